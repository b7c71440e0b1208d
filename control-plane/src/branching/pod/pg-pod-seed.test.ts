import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import type { BranchCreateRequest } from "../branch-provisioner.js";
import { planCopy } from "../copy-plan.js";
import { pgSeedScript, shellQuote } from "./pg-pod-seed.js";

const SOURCE_PASSWORD = "S0urce-Pa55word";
const BRANCH_PASSWORD = "BranchPa55wordBranchPa55wordBranchPa55wo";

function request(copy: BranchCreateRequest["copy"]): BranchCreateRequest {
  return {
    kind: "PgBranchDatabase",
    cr: { namespace: "shop", name: "feature", uid: "u-1" },
    copy,
    plan: planCopy({ mode: copy.mode, filters: [...copy.filters] }),
    source: {
      host: "db.shop.svc",
      port: 5432,
      database: "shop",
      user: "app",
      password: SOURCE_PASSWORD,
      params: { sslmode: "prefer" },
    },
    identifiers: {
      database: "sy_feature_abcdefghijkl",
      user: "sy_feature_abcdefghijkl",
      password: BRANCH_PASSWORD,
    },
  };
}

/** Bash's own parse of the script (`bash -n`): no syntax error. */
const bashParses = (script: string) => execFileSync("bash", ["-n"], { input: script, encoding: "utf8" });

describe("pgSeedScript", () => {
  it("schema with a filter: the plan's pipes in order on one snapshot, then the sequences; no password", () => {
    const script = pgSeedScript(
      request({ mode: "schema", filters: [{ table: "public.orders", where: "note = 'it''s' OR id < 3" }] }),
    );
    bashParses(script);
    expect(script).toMatch(/^#!\/bin\/bash\n/);
    expect(script).toContain("set -Eeuo pipefail");
    expect(script).toContain("source_db='host='\\''db.shop.svc'\\'' port='\\''5432'\\''");
    expect(script).toContain("sslmode=");
    const order = [
      "coproc SNAPSHOT",
      "source_dump '--section=pre-data' '--no-owner' '--no-privileges' '--no-publications' '--no-subscriptions' | branch_psql",
      `source_psql "\${in_snapshot[@]}" -c 'COPY (SELECT * FROM "public"."orders" WHERE (note = '\\''it'\\'''\\''s'\\'' OR id < 3)) TO STDOUT' | branch_psql -c 'COPY "public"."orders" FROM STDIN'`,
      "source_dump '--section=post-data'",
      'pg_temp.owned_sequences(ARRAY[\'"public"."orders"\']::text[]) \\gexec',
    ].map((s) => script.indexOf(s));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(script).not.toContain(SOURCE_PASSWORD);
    expect(script).not.toContain(BRANCH_PASSWORD);
    expect(script).toContain('PGPASSWORD="$SWITCHYARD_SOURCE_PASSWORD" pg_dump');
    expect(script).toContain("postgres://app:***@db.shop.svc:5432/shop");
  });

  it("all: one dump of schema, every row and post-data; no sequence step (positions are dumped)", () => {
    const script = pgSeedScript(request({ mode: "all", filters: [] }));
    bashParses(script);
    expect(script.match(/^source_dump .*\| branch_psql$/gm)).toEqual([
      "source_dump '--no-owner' '--no-privileges' '--no-publications' '--no-subscriptions' | branch_psql",
    ]);
    expect(script).not.toContain("--section");
    expect(script).not.toContain("owned_sequences");
  });

  it("empty without filters: nothing from the source, not even a snapshot", () => {
    const script = pgSeedScript(request({ mode: "empty", filters: [] }));
    bashParses(script);
    expect(script).not.toContain("coproc");
    expect(script).not.toMatch(/^source_(dump|psql) /m);
  });

  it("shellQuote survives bash for any text", () => {
    for (const text of ["plain", "it's", '$(rm -rf /) `x` "y" \\z', "a\nb"]) {
      expect(execFileSync("bash", ["-c", `printf %s ${shellQuote(text)}`], { encoding: "utf8" })).toBe(text);
    }
  });
});
