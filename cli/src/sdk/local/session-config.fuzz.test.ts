// Fuzz of switchyard.json (fast-check): mutated files (fields removed, wrong types, hostile
// and huge strings, bad regexes, unknown keys, duplicate ports) and text that is not JSON.
// Every outcome is a configuration the session can be opened with — its target parses, its
// ports are valid, its TTL is one the session CRDs accept, each database branch is a spec
// the branch CRD accepts (schema and rules), each queue split one the session CRDs and the
// splitters accept (schema, a filter, RE2 regexes, body paths, each queue once) — or a CliError
// SWITCHYARD_CLI_CONFIG_INVALID on one line, naming the field of the file (prefixed with the
// file's name when the value came from it), of bounded size.
import { Value } from "@sinclair/typebox/value";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FUZZ_SEED, fuzzParameters } from "../../../../test/support/fuzz-parameters.js";
import { mutatedJson, type Json } from "../../../../test/support/mutated-json.js";
import {
  BODY_PATH_PATTERN,
  ENV_VAR_PATTERN,
  mysqlBranchDatabaseCrd,
  parseTarget,
  pgBranchDatabaseCrd,
  SqsQueueSplit,
  TTL_SECONDS_MAX,
  TTL_SECONDS_MIN,
} from "../../../../proto/api/v1alpha1/index.js";
import { compileFilterRegex } from "../../../../proto/http-filter.js";
import { CliError, CliErrorCode } from "../cli-errors.js";
import type { HttpFilterSpec } from "../session/http-filter.js";
import { parseConfigText, resolveConfig, SessionConfigFile } from "./session-config.js";

const FIELDS = Object.keys(SessionConfigFile.shape);

const valid: Json = {
  target: "deployment/myapp/container/app",
  namespace: "shop",
  context: "primary",
  router: ["wss://r1.example:8443", "wss://r2.example:8443"],
  mode: "steal",
  ports: [8080, "9090:3000"],
  httpFilter: { headers: ["X-User: alice|bob"], path: "^/api/", method: "post", match: "any" },
  env: { include: ["DB_*"], exclude: ["SECRET_*"] },
  ttlSeconds: 120,
  failurePolicy: "BestEffort",
  proxy: true,
  branches: [
    { envVar: "DATABASE_URL", engine: "postgres", copy: { mode: "schema" }, ttlSeconds: 600 },
    {
      envVar: "ORDERS_DB",
      engine: "mysql",
      id: "orders-1",
      source: { host: "mysql.shop.svc", port: 3306, database: "orders", user: "app" },
      copy: { mode: "empty", filters: [{ table: "tenants", where: "id = 42" }] },
    },
  ],
  branchTimeoutSeconds: 60,
  queues: [
    {
      id: "orders",
      messageFilter: { tenant: "^dev-(alice|bob)$" },
      bodyFilter: [{ path: "$.order.tier", matches: "^gold$" }],
      mode: "mirror",
    },
    { id: "refunds.fifo", bodyFilter: [{ path: "$['items'][0].sku", matches: "." }] },
  ],
};

/** The whole outcome: a configuration, or the error text (failing on anything but a config CliError). */
function outcome(text: string): ReturnType<typeof resolveConfig> | string {
  try {
    return resolveConfig(parseConfigText(text, "switchyard.json"), {});
  } catch (err) {
    if (!(err instanceof CliError))
      throw new Error(`expected a CliError, got ${String(err)}`, { cause: err });
    expect(err.code).toBe(CliErrorCode.CONFIG_INVALID);
    return err.message;
  }
}

function regexesOf(spec: HttpFilterSpec): string[] {
  if ("header" in spec) return [spec.header.valueRegex];
  if ("path" in spec) return [spec.path];
  if ("method" in spec) return [];
  return ("allOf" in spec ? spec.allOf : spec.anyOf).flatMap(regexesOf);
}

function expectUsable(cfg: ReturnType<typeof resolveConfig>): void {
  expect(() => parseTarget(cfg.target)).not.toThrow();
  for (const p of cfg.ports) {
    expect(Number.isInteger(p.remote) && p.remote >= 1 && p.remote <= 65535).toBe(true);
    expect(Number.isInteger(p.local) && p.local >= 1 && p.local <= 65535).toBe(true);
  }
  expect(new Set(cfg.ports.map((p) => p.remote)).size).toBe(cfg.ports.length);
  // The session CRDs refuse any other TTL: the CLI must not accept one the API server refuses.
  if (cfg.ttlSeconds !== undefined) {
    expect(cfg.ttlSeconds).toBeGreaterThanOrEqual(TTL_SECONDS_MIN);
    expect(cfg.ttlSeconds).toBeLessThanOrEqual(TTL_SECONDS_MAX);
  }
  if (cfg.httpFilter) {
    expect(cfg.mode).toBe("steal");
    for (const re of regexesOf(cfg.httpFilter)) expect(() => compileFilterRegex(re)).not.toThrow();
  }
  // Every branch is one the API server accepts: its schema, and the rules it checks in CEL.
  expect(Number.isInteger(cfg.branchTimeoutSeconds) && cfg.branchTimeoutSeconds >= 1).toBe(true);
  expect(new Set(cfg.branches.map((b) => b.envVar)).size).toBe(cfg.branches.length);
  for (const b of cfg.branches) {
    expect(b.envVar).toMatch(new RegExp(ENV_VAR_PATTERN));
    const crd = b.kind === "PgBranchDatabase" ? pgBranchDatabaseCrd : mysqlBranchDatabaseCrd;
    expect(Value.Check(crd.spec, b.spec), JSON.stringify(b.spec)).toBe(true);
    const src = b.spec.source;
    if (!src.fromEnv) expect(src.host && src.database && src.user).toBeTruthy();
    if (b.spec.copy?.mode === "all") expect(b.spec.copy.filters).toBeUndefined();
  }
  // Every queue split is one the session CRDs accept (schema and the filter rule) and the
  // splitters compile (RE2 regexes, body paths), each queue once.
  expect(new Set(cfg.queues.map((q) => q.queueId)).size).toBe(cfg.queues.length);
  for (const q of cfg.queues) {
    expect(Value.Check(SqsQueueSplit, q), JSON.stringify(q)).toBe(true);
    expect(q.messageFilter ?? q.bodyFilter).toBeDefined();
    for (const re of Object.values(q.messageFilter ?? {})) expect(() => compileFilterRegex(re)).not.toThrow();
    for (const c of q.bodyFilter ?? []) {
      expect(c.path).toMatch(new RegExp(BODY_PATH_PATTERN));
      expect(() => compileFilterRegex(c.matches)).not.toThrow();
    }
  }
}

function expectPrecise(message: string): void {
  expect(message).not.toMatch(/\n|\s+at \S+:\d+/);
  expect(message.length, message.slice(0, 200)).toBeLessThanOrEqual(2_000);
  // Names a field of the file (or says the file is not JSON, or has no target).
  const named = FIELDS.some((f) => new RegExp(`(^|[ :;(])${f}\\b`).test(message));
  expect(named || /not valid JSON|\(root\)/.test(message), message).toBe(true);
}

describe(`switchyard.json under fuzz (seed ${FUZZ_SEED})`, () => {
  it("mutated files give a usable configuration or an error naming the field", () => {
    const tally = { accepted: 0, refused: 0 };
    fc.assert(
      fc.property(mutatedJson(valid, { maxMutations: 3 }), ({ value }) => {
        const r = outcome(JSON.stringify(value));
        if (typeof r === "string") {
          tally.refused++;
          return expectPrecise(r);
        }
        tally.accepted++;
        expectUsable(r);
      }),
      fuzzParameters(500),
    );
    expect(tally.accepted).toBeGreaterThan(0);
    expect(tally.refused).toBeGreaterThan(0);
  });

  it("filters, ports and TTLs at their edges", () => {
    const edge = fc.record({
      headers: fc.array(
        fc.oneof(
          fc.constantFrom("X-User: alice", "X-User: (", "X-User:", ": x", "X User: a", "X-User: a{1001}"),
          fc.string({ maxLength: 20 }).map((s) => `X-A: ${s}`),
        ),
        { maxLength: 3 },
      ),
      path: fc.option(fc.constantFrom("^/api", "", "[", "(?!x)", "a".repeat(1100), "(a+)+$"), {
        nil: undefined,
      }),
      method: fc.option(fc.constantFrom("GET", "get", "GET /", "", "😀"), { nil: undefined }),
      ports: fc.array(
        fc.oneof(fc.integer({ min: -2, max: 70_000 }), fc.constantFrom("80", "80:0", "x", "1:2:3")),
        {
          maxLength: 3,
        },
      ),
      ttlSeconds: fc.option(fc.integer({ min: -1, max: 100_000 }), { nil: undefined }),
      mode: fc.constantFrom("steal", "mirror"),
    });
    fc.assert(
      fc.property(edge, ({ headers, path, method, ports, ttlSeconds, mode }) => {
        const file = {
          target: "deployment/web",
          mode,
          ports,
          httpFilter: {
            headers,
            ...(path !== undefined ? { path } : {}),
            ...(method !== undefined ? { method } : {}),
          },
          ...(ttlSeconds !== undefined ? { ttlSeconds } : {}),
        };
        const r = outcome(JSON.stringify(file));
        if (typeof r === "string") return expectPrecise(r);
        expectUsable(r);
      }),
      fuzzParameters(400),
    );
  });

  it("text that is not a JSON object is refused on one line", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: "binary", maxLength: 60 }),
          fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
          fc.constantFrom("{", "[]", "null", '{"target": "deployment/a",}', '{"__proto__": {"x": 1}}'),
        ),
        (text) => {
          const r = outcome(text);
          if (typeof r === "string") expectPrecise(r);
        },
      ),
      fuzzParameters(300),
    );
  });
});
