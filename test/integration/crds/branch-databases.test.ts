// PgBranchDatabase and MysqlBranchDatabase against a real kube-apiserver: valid branches
// are accepted with their defaults; the API server itself refuses invalid ones (the CEL
// rules included: exactly one source, filters only without copy mode all), naming the
// field; the spec is immutable except ttlSeconds; the status subresource, printer
// columns, short names and categories work.
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  setHeaderOptions,
  type KubeConfig,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  crdManifests,
  GROUP,
  mysqlBranchDatabaseClient,
  pgBranchDatabaseClient,
  VERSION,
  type BranchDatabaseSpec,
} from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { condition, refused } from "./crd-writes.js";

const NS = "branch-tests";
let set: ClusterSet;
let kc: KubeConfig;
let counter = 0;

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary"], controllerManager: false });
  kc = set.get("primary").kubeConfig();
  await installCrds(kc, ["PgBranchDatabase", "MysqlBranchDatabase"]);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
});

afterAll(async () => {
  await set?.stop();
});

/** A fresh object name per write, so cases never collide. */
function branchName(): string {
  counter += 1;
  return `branch-${counter}`;
}

const pg = () => pgBranchDatabaseClient(kc);
const mysql = () => mysqlBranchDatabaseClient(kc);

const fromEnv: BranchDatabaseSpec = {
  target: "deployment/shop/container/app",
  source: { fromEnv: { name: "DATABASE_URL" } },
};
const explicitSource = {
  host: "db.shop.svc.cluster.local",
  port: 5432,
  database: "shop",
  user: "app",
  passwordSecretRef: { name: "shop-db", key: "password" },
};

function createPg(spec: Record<string, unknown>, name = branchName()) {
  return pg().create({
    metadata: { name, namespace: NS },
    spec: { ...fromEnv, ...spec } as BranchDatabaseSpec,
  });
}

describe("valid branches", () => {
  it.each([
    ["PgBranchDatabase", pg],
    ["MysqlBranchDatabase", mysql],
  ] as const)(
    "accepts a %s reading its source from the environment, with defaults",
    async (_kind, client) => {
      const created = await client().create({
        metadata: { name: branchName(), namespace: NS },
        spec: fromEnv,
      });
      expect(created.spec.copy).toEqual({ mode: "schema" });
      expect(created.spec.ttlSeconds).toBe(300);
      expect(created.spec.id).toBeUndefined();
    },
  );

  it("accepts an explicit source with row filters, an id and a TTL", async () => {
    const spec = {
      source: explicitSource,
      copy: {
        mode: "empty",
        filters: [
          { table: "public.tenants", where: "id = 42" },
          { table: "orders", where: "tenant_id = 42 AND created_at > now() - interval '7 days'" },
        ],
      },
      ttlSeconds: 3600,
      id: "shared-1",
    };
    const created = await createPg(spec);
    expect(created.spec).toEqual({ ...fromEnv, ...spec });
  });

  it("accepts a MySQL branch without a port (the engine default applies)", async () => {
    const { port: _port, ...source } = explicitSource;
    const created = await mysql().create({
      metadata: { name: branchName(), namespace: NS },
      spec: {
        target: "statefulset/shop",
        source: { ...source, user: "u".repeat(80) },
        copy: { mode: "all" },
      },
    });
    expect(created.spec.source.port).toBeUndefined();
  });
});

type Case = [what: string, write: () => Promise<unknown>, field: string, message?: RegExp];

describe("invalid branches are refused by the API server, naming the field", () => {
  it.each<Case>([
    [
      "both fromEnv and explicit fields",
      () => createPg({ source: { fromEnv: { name: "DATABASE_URL" }, host: "db" } }),
      "spec.source",
      /set exactly one of spec\.source\.fromEnv or the explicit fields \(spec\.source\.host, port/,
    ],
    [
      "neither fromEnv nor explicit fields",
      () => createPg({ source: {} }),
      "spec.source",
      /set exactly one of spec\.source\.fromEnv/,
    ],
    [
      "an explicit source without a user",
      () => createPg({ source: { host: "db", database: "shop" } }),
      "spec.source",
      /explicit source needs spec\.source\.host, spec\.source\.database and spec\.source\.user/,
    ],
    [
      "filters with copy mode all",
      () => createPg({ copy: { mode: "all", filters: [{ table: "t", where: "true" }] } }),
      "spec.copy.filters",
      /only allowed with spec\.copy\.mode empty or schema .*remove spec\.copy\.filters/,
    ],
    ["an unknown copy mode", () => createPg({ copy: { mode: "some" } }), "spec.copy.mode"],
    [
      "a filter with a second statement",
      () => createPg({ copy: { filters: [{ table: "t", where: "true; DROP TABLE t" }] } }),
      "spec.copy.filters[0].where",
    ],
    [
      "two filters on one table",
      () =>
        createPg({
          copy: {
            filters: [
              { table: "t", where: "a = 1" },
              { table: "t", where: "b = 2" },
            ],
          },
        }),
      "spec.copy.filters[1]",
    ],
    ["an id that is not a DNS label", () => createPg({ id: "Shared_1" }), "spec.id"],
    ["a negative TTL", () => createPg({ ttlSeconds: -1 }), "spec.ttlSeconds"],
    ["a TTL below 30 s", () => createPg({ ttlSeconds: 29 }), "spec.ttlSeconds"],
    ["a TTL above a day", () => createPg({ ttlSeconds: 86401 }), "spec.ttlSeconds"],
    ["a target of an unknown kind", () => createPg({ target: "service/shop" }), "spec.target"],
    [
      "an env var starting with a digit",
      () => createPg({ source: { fromEnv: { name: "1DB" } } }),
      "spec.source.fromEnv.name",
    ],
    [
      "a password secret without a key",
      () => createPg({ source: { ...explicitSource, passwordSecretRef: { name: "shop-db" } } }),
      "spec.source.passwordSecretRef.key",
    ],
    [
      "a Postgres user longer than 63 characters",
      () => createPg({ source: { ...explicitSource, user: "u".repeat(64) } }),
      "spec.source.user",
    ],
    [
      "a MySQL database name longer than 64 characters",
      () =>
        mysql().create({
          metadata: { name: branchName(), namespace: NS },
          spec: { ...fromEnv, source: { ...explicitSource, database: "d".repeat(65) } },
        }),
      "spec.source.database",
    ],
  ])("%s", async (_what, write, field, message) => {
    const refusal = await refused(write());
    expect(refusal.fields).toContain(field);
    if (message) expect(refusal.message).toMatch(message);
  });
});

describe("immutability", () => {
  it.each<[string, Record<string, unknown>, string]>([
    ["the target", { target: "deployment/other" }, "spec.target"],
    ["the source", { source: { fromEnv: { name: "OTHER_URL" } } }, "spec.source"],
    ["the copy mode", { copy: { mode: "all" } }, "spec.copy"],
    ["the id, by adding it", { id: "late" }, "spec.id"],
  ])("refuses changing %s after creation", async (_what, spec, field) => {
    const name = branchName();
    await createPg({}, name);
    const { message, fields } = await refused(pg().patch({ name, namespace: NS }, { spec }));
    expect(fields).toContain(field);
    expect(message).toMatch(/is immutable \(only spec\.ttlSeconds may change\)/);
  });

  it("refuses removing the id and allows changing ttlSeconds", async () => {
    const name = branchName();
    await createPg({ id: "shared-2" }, name);
    const removed = await refused(pg().patch({ name, namespace: NS }, { spec: { id: null } as never }));
    expect(removed.fields).toContain("spec.id");
    const patched = await pg().patch({ name, namespace: NS }, { spec: { ttlSeconds: 900 } });
    expect(patched.spec.ttlSeconds).toBe(900);
    expect(patched.spec.id).toBe("shared-2");
  });
});

describe("status subresource", () => {
  it("takes status writes apart from spec and refuses a Ready branch without its names", async () => {
    const name = branchName();
    const ref = { name, namespace: NS };
    const created = await createPg({}, name);
    const notReady = await refused(pg().patchStatus(ref, { phase: "Ready", branchName: "shop_br_1" }));
    expect(notReady.fields).toContain("status.phase");
    const expiresAt = new Date(Date.now() + 300_000).toISOString().replace(/\.\d+Z$/, "Z");
    const out = await pg().patchStatus(ref, {
      phase: "Ready",
      branchName: "shop_br_1",
      secretName: "shop-br-1",
      expiresAt,
      sessions: ["mc-0123456789abcdef"],
      observedGeneration: 1,
      conditions: [condition("Ready", "True")],
    });
    expect(out.status).toMatchObject({ phase: "Ready", branchName: "shop_br_1", expiresAt });
    expect(out.metadata.generation).toBe(created.metadata.generation);
    // Status smuggled into a main-resource patch is ignored.
    const specPatch = await pg().patch(ref, {
      spec: { ttlSeconds: 60 },
      status: { phase: "Failed" },
    } as never);
    expect(specPatch.status?.phase).toBe("Ready");
    const unknown = await refused(pg().patchStatus(ref, { phase: "Running" as never }));
    expect(unknown.fields).toContain("status.phase");
  });
});

describe("kubectl get is informative", () => {
  it("declares the printer columns, short names and category on the stored CRDs", async () => {
    const api = kc.makeApiClient(ApiextensionsV1Api);
    for (const kind of ["PgBranchDatabase", "MysqlBranchDatabase"] as const) {
      const crd = await api.readCustomResourceDefinition({ name: crdManifests[kind].metadata.name });
      expect(
        crd.spec.versions[0]!.additionalPrinterColumns?.map((c) => c.name),
        kind,
      ).toEqual(["Phase", "Branch", "Target", "Expires", "Age"]);
      expect(crd.spec.versions[0]!.subresources?.status, kind).toEqual({});
      expect(crd.spec.names.categories, kind).toEqual(["switchyard"]);
    }
    const pgCrd = await api.readCustomResourceDefinition({ name: "pgbranchdatabases.switchyard.dev" });
    const myCrd = await api.readCustomResourceDefinition({ name: "mysqlbranchdatabases.switchyard.dev" });
    expect(pgCrd.spec.names.shortNames).toEqual(["pgbranch", "pgb"]);
    expect(myCrd.spec.names.shortNames).toEqual(["mysqlbranch", "myb"]);
  });

  it("serves the columns through the Table API", async () => {
    const name = branchName();
    await createPg({}, name);
    await pg().patchStatus({ name, namespace: NS }, { phase: "Pending" });
    const table = (await kc
      .makeApiClient(CustomObjectsApi)
      .getNamespacedCustomObject(
        { group: GROUP, version: VERSION, plural: "pgbranchdatabases", namespace: NS, name },
        setHeaderOptions("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"),
      )) as { kind: string; columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
    expect(table.kind).toBe("Table");
    const columns = table.columnDefinitions.map((c) => c.name);
    expect(columns).toEqual(["Name", "Phase", "Branch", "Target", "Expires", "Age"]);
    const row = Object.fromEntries(columns.map((c, i) => [c, table.rows[0]!.cells[i]]));
    expect(row).toMatchObject({ Name: name, Phase: "Pending", Target: "deployment/shop/container/app" });
  });
});
