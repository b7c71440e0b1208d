// `branches` in switchyard.json: defaults, the CRD's limits and CEL rules checked before
// anything is created, duplicates refused, and every error naming the field and the fix.
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { pgBranchDatabaseCrd, mysqlBranchDatabaseCrd } from "../../../../proto/api/v1alpha1/index.js";
import { CliErrorCode } from "../cli-errors.js";
import { branchObjectName, envVarSlug } from "./branch-config.js";
import { parseConfigText, resolveConfig } from "./session-config.js";

const cfg = (extra: Record<string, unknown>) =>
  resolveConfig(parseConfigText(JSON.stringify({ target: "deployment/shop", ...extra })), {});
const branches = (...entries: unknown[]) => cfg({ branches: entries });

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect((err as { code?: string }).code).toBe(CliErrorCode.CONFIG_INVALID);
    return (err as Error).message;
  }
  throw new Error("expected the config to be refused");
}

describe("branches in switchyard.json", () => {
  it("has no branches and a 120 s timeout by default", () => {
    const c = cfg({});
    expect(c.branches).toEqual([]);
    expect(c.branchTimeoutSeconds).toBe(120);
    expect(cfg({ branchTimeoutSeconds: 30 }).branchTimeoutSeconds).toBe(30);
  });

  it("reads the source from envVar unless an explicit source is given, as specs the API server accepts", () => {
    const c = branches(
      { envVar: "DATABASE_URL", engine: "postgres" },
      {
        envVar: "ORDERS_DB",
        engine: "mysql",
        id: "orders-1",
        source: {
          host: "mysql.shop.svc",
          database: "orders",
          user: "app",
          passwordSecretRef: { name: "db", key: "pw" },
        },
        copy: { mode: "schema", filters: [{ table: "orders", where: "tenant_id = 42" }] },
        ttlSeconds: 600,
      },
    );
    expect(c.branches).toEqual([
      {
        envVar: "DATABASE_URL",
        kind: "PgBranchDatabase",
        spec: { target: "deployment/shop", source: { fromEnv: { name: "DATABASE_URL" } } },
        field: "branches[0]",
      },
      {
        envVar: "ORDERS_DB",
        kind: "MysqlBranchDatabase",
        id: "orders-1",
        spec: {
          target: "deployment/shop",
          source: {
            host: "mysql.shop.svc",
            database: "orders",
            user: "app",
            passwordSecretRef: { name: "db", key: "pw" },
          },
          copy: { mode: "schema", filters: [{ table: "orders", where: "tenant_id = 42" }] },
          ttlSeconds: 600,
          id: "orders-1",
        },
        field: "branches[1]",
      },
    ]);
    expect(Value.Check(pgBranchDatabaseCrd.spec, c.branches[0]!.spec)).toBe(true);
    expect(Value.Check(mysqlBranchDatabaseCrd.spec, c.branches[1]!.spec)).toBe(true);
  });

  it.each<[string, unknown[], RegExp]>([
    [
      "a bad variable name",
      [{ envVar: "DATABASE-URL", engine: "postgres" }],
      /branches\[0\]\.envVar: "DATABASE-URL" must be an environment variable name, 1-128 characters matching/,
    ],
    [
      "a ttl below the CRD's minimum",
      [{ envVar: "A", engine: "postgres", ttlSeconds: 5 }],
      /branches\[0\]\.ttlSeconds: 5 must be a whole number from 30 to 86400 \(what PgBranchDatabase accepts\)/,
    ],
    [
      "an id that is not a DNS label",
      [{ envVar: "A", engine: "postgres", id: "Shared_1" }],
      /branches\[0\]\.id: "Shared_1" must be 1-63 characters matching/,
    ],
    [
      "a table name with a space",
      [{ envVar: "A", engine: "mysql", copy: { filters: [{ table: "my table", where: "1=1" }] } }],
      /branches\[0\]\.copy\.filters\[0\]\.table: "my table" must be 1-129 characters/,
    ],
    [
      "a where clause with ;",
      [{ envVar: "A", engine: "mysql", copy: { filters: [{ table: "t", where: "1=1; drop table t" }] } }],
      /branches\[0\]\.copy\.filters\[0\]\.where: .* must be 1-4096 characters matching \^\[\^;\]\+\$/,
    ],
    [
      "a Postgres database name over 63 characters",
      [{ envVar: "A", engine: "postgres", source: { host: "h", user: "u", database: "d".repeat(64) } }],
      /branches\[0\]\.source\.database: .* must be 1-63 characters/,
    ],
    [
      "an explicit source without a user",
      [{ envVar: "A", engine: "postgres", source: { host: "h", database: "d" } }],
      /branches\[0\]\.source: an explicit source needs user .*or leave source out to branch the database whose URL the target holds in A/,
    ],
    [
      "filters with copy mode all",
      [{ envVar: "A", engine: "postgres", copy: { mode: "all", filters: [{ table: "t", where: "x" }] } }],
      /branches\[0\]\.copy\.filters: only goes with copy\.mode "empty" or "schema"/,
    ],
    [
      "the same variable twice",
      [
        { envVar: "A", engine: "postgres" },
        { envVar: "A", engine: "mysql", id: "x" },
      ],
      /branches\[1\]: names envVar A again as branches\[0\]; each variable can point at one branch only/,
    ],
    [
      "two variables giving one branch name",
      [
        { envVar: "DB", engine: "postgres" },
        { envVar: "DB_", engine: "postgres" },
      ],
      /branches\[1\]: gets the same branch name \(db\) as branches\[0\]; give one of them an id/,
    ],
    [
      "one id twice for an engine",
      [
        { envVar: "A", engine: "postgres", id: "s" },
        { envVar: "B", engine: "postgres", id: "s" },
      ],
      /branches\[1\]: uses id s for the same engine as branches\[0\]/,
    ],
    ["an unknown engine", [{ envVar: "A", engine: "oracle" }], /branches\.0\.engine: /],
    ["an unknown field", [{ envVar: "A", engine: "postgres", size: 1 }], /branches\.0: .*size/],
  ])("refuses %s, naming the field", (_what, entries, message) => {
    expect(refusal(() => branches(...entries))).toMatch(message);
  });

  it("refuses more branches than a session can name, and a timeout out of range", () => {
    const many = Array.from({ length: 17 }, (_, i) => ({ envVar: `DB_${i}`, engine: "postgres" }));
    expect(refusal(() => branches(...many))).toMatch(
      /branches: lists 17 branches; a session can use at most 16/,
    );
    expect(refusal(() => cfg({ branchTimeoutSeconds: 0 }))).toMatch(/branchTimeoutSeconds: /);
  });

  it("names session branches after the session and the variable, shared ones after their id", () => {
    expect(envVarSlug("DATABASE_URL")).toBe("database-url");
    expect(envVarSlug("_DB_")).toBe("db");
    expect(envVarSlug("___")).toBe("branch");
    expect(branchObjectName({ envVar: "DATABASE_URL" }, "mc-0123456789abcdef")).toBe(
      "mc-0123456789abcdef-database-url",
    );
    expect(branchObjectName({ envVar: "DATABASE_URL", id: "orders-1" }, "mc-0123456789abcdef")).toBe(
      "branch-orders-1",
    );
  });
});
