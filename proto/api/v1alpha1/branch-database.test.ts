// Local validation of the branch kinds (what Value.Check sees: shapes, patterns, bounds,
// enums) and the parts of their manifests the API server enforces beyond that (CEL rules,
// defaults). The CEL rules themselves run against a real API server in
// test/integration/crds/branch-databases.test.ts.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { FormatRegistry } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  BRANCH_ENGINES,
  BRANCH_KINDS,
  crdDefinitions,
  crdManifests,
  mysqlBranchDatabaseCrd,
  pgBranchDatabaseCrd,
  type BranchDatabaseSpec,
  type MysqlBranchDatabase,
  type PgBranchDatabase,
} from "./index.js";

FormatRegistry.Set("date-time", (v) => !Number.isNaN(Date.parse(v)));

const fromEnv: BranchDatabaseSpec = {
  target: "deployment/shop",
  source: { fromEnv: { name: "DATABASE_URL" } },
};
const explicit: BranchDatabaseSpec = {
  target: "deployment/shop/container/app",
  source: {
    host: "db.shop.svc.cluster.local",
    port: 5432,
    database: "shop",
    user: "app",
    passwordSecretRef: { name: "shop-db", key: "password" },
  },
  copy: { mode: "schema", filters: [{ table: "public.tenants", where: "id = 42" }] },
  ttlSeconds: 600,
  id: "shared-1",
};

type Node = { [key: string]: unknown };
const props = (node: Node) => node.properties as Record<string, Node>;
const specNode = (kind: "PgBranchDatabase" | "MysqlBranchDatabase"): Node => {
  const versions = crdManifests[kind].spec.versions as { schema: { openAPIV3Schema: Node } }[];
  return props(versions[0]!.schema.openAPIV3Schema).spec!;
};
const rules = (node: Node) => (node["x-kubernetes-validations"] ?? []) as { rule: string; message: string }[];

describe.each([pgBranchDatabaseCrd, mysqlBranchDatabaseCrd])("$kind", (crd) => {
  it.each([
    ["a source from the target's environment", fromEnv],
    ["an explicit source with copy filters, ttl and id", explicit],
  ])("accepts %s", (_what, spec) => {
    expect(Value.Check(crd.spec, spec)).toBe(true);
  });

  it.each<[string, Record<string, unknown>]>([
    ["a bad target", { target: "service/shop" }],
    ["no source", { source: undefined }],
    ["an env var starting with a digit", { source: { fromEnv: { name: "1DATABASE" } } }],
    ["an unknown copy mode", { copy: { mode: "some" } }],
    ["a filter with a second statement", { copy: { filters: [{ table: "t", where: "1=1; DROP TABLE t" }] } }],
    ["a filter on a bad table name", { copy: { filters: [{ table: "t; --", where: "true" }] } }],
    ["an empty filter list", { copy: { filters: [] } }],
    [
      "too many filters",
      { copy: { filters: Array.from({ length: 33 }, (_, i) => ({ table: `t${i}`, where: "true" })) } },
    ],
    ["a TTL below 30 s", { ttlSeconds: 29 }],
    ["a negative TTL", { ttlSeconds: -1 }],
    ["a TTL above a day", { ttlSeconds: 86401 }],
    ["an id that is not a DNS label", { id: "Shared_1" }],
    ["a port out of range", { source: { host: "db", database: "d", user: "u", port: 70000 } }],
    [
      "a password secret without a key",
      { source: { host: "db", database: "d", user: "u", passwordSecretRef: { name: "s" } } },
    ],
  ])("refuses %s", (_what, change) => {
    const spec = { ...explicit, ...change };
    for (const [k, v] of Object.entries(spec))
      if (v === undefined) delete (spec as Record<string, unknown>)[k];
    expect(Value.Check(crd.spec, spec)).toBe(false);
  });

  it("accepts a full status and refuses an unknown phase", () => {
    const status = {
      phase: "Ready",
      branchName: "shop_br_1a2b",
      expiresAt: "2026-11-22T01:00:00Z",
      secretName: "shop-br-1a2b",
      observedGeneration: 1,
      sessions: ["mc-0123456789abcdef"],
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "Copied",
          message: "",
          lastTransitionTime: "2026-11-22T01:00:00Z",
        },
      ],
    };
    expect(Value.Check(crd.status, status)).toBe(true);
    expect(Value.Check(crd.status, { ...status, phase: "Running" })).toBe(false);
    expect(Value.Check(crd.status, { ...status, branchName: "x;y" })).toBe(false);
  });

  it("carries the rules Value.Check cannot run: exactly one source, filters only without mode all, immutability", () => {
    const spec = specNode(crd.kind);
    const fields = props(spec);
    expect(rules(fields.source!).map((r) => r.message)).toEqual([
      expect.stringMatching(/exactly one of spec\.source\.fromEnv or the explicit fields/),
      expect.stringMatching(/explicit source needs spec\.source\.host/),
    ]);
    expect(rules(fields.copy!)[0]!.message).toMatch(
      /spec\.copy\.filters .* spec\.copy\.mode empty or schema/,
    );
    expect(rules(spec).map((r) => r.message.split(" ")[0])).toEqual([
      "spec.target",
      "spec.source",
      "spec.copy",
      "spec.id",
    ]);
    expect(rules(spec).every((r) => r.rule.includes("oldSelf"))).toBe(true);
    expect(fields.copy!.default).toEqual({});
    expect(props(fields.copy!).mode!.default).toBe("schema");
    expect(fields.ttlSeconds).toMatchObject({ default: 300, minimum: 30 });
  });

  it("never has a literal password field", () => {
    expect(Object.keys(crd.spec.properties.source.properties)).not.toContain("password");
  });
});

describe("the two kinds", () => {
  it("are registered under the kinds connect params may name", () => {
    expect(BRANCH_KINDS.every((kind) => kind in crdDefinitions)).toBe(true);
    expect(pgBranchDatabaseCrd.plural).toBe(BRANCH_ENGINES.PgBranchDatabase.plural);
    expect(mysqlBranchDatabaseCrd.shortNames).toEqual(["mysqlbranch", "myb"]);
  });

  it("differ only in names, descriptions and engine limits", () => {
    const strip = (value: unknown): unknown =>
      JSON.parse(JSON.stringify(value), (key, v: unknown) =>
        ["description", "maxLength"].includes(key) ? undefined : v,
      );
    expect(strip(mysqlBranchDatabaseCrd.spec)).toEqual(strip(pgBranchDatabaseCrd.spec));
    expect(strip(mysqlBranchDatabaseCrd.status)).toEqual(strip(pgBranchDatabaseCrd.status));
  });

  it("use the plurals the chart's RBAC grants", () => {
    const root = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../..");
    // The control plane writes status where it makes branches; the Primary's identity on the
    // Default cluster only copies the objects (it never writes their status there).
    for (const [file, status] of [
      ["control-plane-rbac.yaml", true],
      ["member-rbac.yaml", false],
    ] as const) {
      const text = readFileSync(resolve(root, "charts/switchyard/templates", file), "utf8");
      for (const crd of [pgBranchDatabaseCrd, mysqlBranchDatabaseCrd]) {
        expect(text, file).toContain(crd.plural);
        expect(text.includes(`${crd.plural}/status`), file).toBe(status);
        expect(text, file).toContain(`${crd.plural}.switchyard.dev`);
      }
    }
  });

  it("derive precise static types", () => {
    expectTypeOf<PgBranchDatabase["spec"]["copy"]>().toEqualTypeOf<
      { mode?: "empty" | "schema" | "all"; filters?: { table: string; where: string }[] } | undefined
    >();
    expectTypeOf<NonNullable<MysqlBranchDatabase["status"]>["phase"]>().toEqualTypeOf<
      "Pending" | "Ready" | "Failed" | undefined
    >();
    expectTypeOf<PgBranchDatabase["spec"]["source"]["passwordSecretRef"]>().toEqualTypeOf<
      { name: string; key: string } | undefined
    >();
  });
});
