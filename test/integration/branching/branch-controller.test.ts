// The branching controller (control-plane/src/branching/branch-*.ts) on a real API server with
// kube-controller-manager, making branches on real PostgreSQL servers through the `server`
// provisioner: a PostgreSQL 18 branch server that also holds a source (copied by the server),
// and a PostgreSQL 15 source elsewhere (streamed with pg_dump | psql). The target is a real
// Deployment whose DATABASE_URL the controller reads.
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  branchSecretName,
  clusterSessionClient,
  mysqlBranchDatabaseClient,
  pgBranchDatabaseClient,
  readBranchSecretData,
  type BranchDatabase,
} from "../../../proto/api/v1alpha1/index.js";
import { BranchController } from "../../../control-plane/src/branching/branch-controller.js";
import { BRANCH_CLEANUP_FINALIZER } from "../../../control-plane/src/branching/branch-reconciler.js";
import { PgServerBranches } from "../../../control-plane/src/branching/postgres/pg-server-branches.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { startPostgres, type PostgresServer } from "../../env/databases/postgres-server.js";
import { freePorts } from "../../env/ports.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { eventually } from "../../support/poll.js";

const NS = "branches";
const APP_PASSWORD = "Src-Pa55word-in-env";
let set: ClusterSet;
let kc: KubeConfig;
let core: CoreV1Api;
let pg18: PostgresServer;
let pg15: PostgresServer;
const logLines: string[] = [];
const logger = pino({ level: "info" }, { write: (l: string) => void logLines.push(l) });
const branches = () => pgBranchDatabaseClient(kc);

beforeAll(async () => {
  [set, pg18, pg15] = await Promise.all([
    startClusterSet({ clusters: ["east"], controllerManager: true }),
    startPostgres({ version: 18 }),
    startPostgres({ version: 15 }),
  ]);
  kc = set.get("east").kubeConfig();
  core = kc.makeApiClient(CoreV1Api);
  await installCrds(kc);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await Promise.all([seed(pg18, 2_000), seed(pg15, 200_000)]);
  const apps = kc.makeApiClient(AppsV1Api);
  for (const [name, server] of [
    ["shop", pg18],
    ["legacy", pg15],
  ] as const) {
    await apps.createNamespacedDeployment({
      namespace: NS,
      body: {
        metadata: { name },
        spec: {
          selector: { matchLabels: { app: name } },
          template: {
            metadata: { labels: { app: name } },
            spec: {
              containers: [
                { name: "app", image: "app:1", env: [{ name: "DATABASE_URL", value: sourceUrl(server) }] },
              ],
            },
          },
        },
      },
    });
  }
}, 120_000);

afterAll(async () => {
  await Promise.all([set?.stop(), pg18?.stop(), pg15?.stop()]);
});

function sourceUrl(server: PostgresServer): string {
  return `postgres://app:${APP_PASSWORD}@127.0.0.1:${server.port}/shop`;
}

async function withClient<T>(url: string, use: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** Database `shop` owned by `app`: `items` with `rows` rows. */
async function seed(server: PostgresServer, rows: number): Promise<void> {
  await withClient(server.adminUrl, async (c) => {
    await c.query(`CREATE ROLE app LOGIN PASSWORD '${APP_PASSWORD}'`);
    await c.query("CREATE DATABASE shop OWNER app");
  });
  await withClient(sourceUrl(server), (c) =>
    c.query(`CREATE TABLE items (id serial PRIMARY KEY, tenant int NOT NULL, payload text NOT NULL);
             INSERT INTO items (tenant, payload) SELECT g % 7, repeat(md5(g::text), 4) FROM generate_series(1, ${rows}) g;`),
  );
}

const count = (url: string, where = "true") =>
  withClient(url, async (c) =>
    Number((await c.query(`SELECT count(*) AS n FROM items WHERE ${where}`)).rows[0].n),
  );
const branchDatabases = (server: PostgresServer) =>
  withClient(server.adminUrl, async (c) =>
    (await c.query("SELECT datname FROM pg_database WHERE datname LIKE 'sy\\_%' ORDER BY 1")).rows.map(
      (r: { datname: string }) => r.datname,
    ),
  );

/** Runs a branching controller with the PostgreSQL 18 server as its branch server until the returned stop. */
function runController(options: { maxAttempts?: number; noPostgres?: boolean } = {}): () => Promise<void> {
  const stop = new AbortController();
  const controller = new BranchController({
    kubeConfig: kc,
    provisioners: options.noPostgres
      ? {}
      : { PgBranchDatabase: new PgServerBranches({ adminUrl: pg18.adminUrl, logger }) },
    provisionerHint: "set branching.postgres.urlSecret",
    logger,
    maxAttempts: options.maxAttempts ?? 3,
  });
  const done = controller.start(stop.signal);
  return async () => {
    stop.abort();
    await done;
  };
}

async function create(name: string, spec: Partial<BranchDatabase["spec"]> = {}): Promise<void> {
  await branches().create({
    metadata: { name, namespace: NS },
    spec: { target: "deployment/shop", source: { fromEnv: { name: "DATABASE_URL" } }, ...spec },
  });
}

async function settled(name: string, timeoutMs = 60_000): Promise<BranchDatabase> {
  return eventually(
    `${name} Ready or Failed`,
    async () => {
      const b = await branches().get({ namespace: NS, name });
      return b?.status?.phase === "Ready" || b?.status?.phase === "Failed" ? b : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

async function secretOf(name: string) {
  const s = await core.readNamespacedSecret({
    namespace: NS,
    name: branchSecretName("PgBranchDatabase", name),
  });
  return { secret: s, credentials: readBranchSecretData(s.data)! };
}

const gone = (name: string) =>
  eventually(`${name} deleted`, async () => (await branches().get({ namespace: NS, name })) === undefined, {
    timeoutMs: 60_000,
    intervalMs: 200,
  });

describe("branching controller", () => {
  it("branches the target's database on the same server: Ready, a Secret with a working URL, the source untouched", async () => {
    const stop = runController();
    try {
      await create("copy-all", { copy: { mode: "all" } });
      const b = await settled("copy-all");
      expect(b.status).toMatchObject({
        phase: "Ready",
        secretName: branchSecretName("PgBranchDatabase", "copy-all"),
      });
      expect(b.metadata.finalizers).toContain(BRANCH_CLEANUP_FINALIZER);
      const ready = b.status!.conditions!.find((c) => c.type === "Ready")!;
      expect(ready).toMatchObject({ status: "True", reason: "Provisioned" });
      expect(ready.message).toMatch(/^sy_copy_all_\w+ made by (clone|template) copy in \d+ ms$/);
      expect(Date.parse(b.status!.expiresAt!)).toBeGreaterThan(Date.now() + 200_000);
      const { secret, credentials } = await secretOf("copy-all");
      expect(secret.metadata?.ownerReferences?.[0]).toMatchObject({
        kind: "PgBranchDatabase",
        uid: b.metadata.uid,
      });
      expect(credentials).toMatchObject({
        host: "127.0.0.1",
        port: String(pg18.port),
        database: b.status!.branchName,
      });
      expect(await count(credentials.url)).toBe(2_000);
      await withClient(credentials.url, (c) => c.query("DELETE FROM items WHERE tenant = 1"));
      expect(await count(credentials.url)).toBeLessThan(2_000);
      expect(await count(sourceUrl(pg18))).toBe(2_000);
      // No password in the CR, and none in what the controller logged.
      expect(JSON.stringify(b)).not.toContain(credentials.password);
      expect(logLines.join("")).not.toContain(credentials.password);
      expect(logLines.join("")).not.toContain(APP_PASSWORD);

      // Deleting the CR drops the database, its user and the Secret.
      await branches().delete({ namespace: NS, name: "copy-all" });
      await gone("copy-all");
      expect(await branchDatabases(pg18)).not.toContain(credentials.database);
      await expect(
        core.readNamespacedSecret({ namespace: NS, name: secret.metadata!.name! }),
      ).rejects.toMatchObject({ code: 404 });
      await expect(withClient(credentials.url, () => Promise.resolve())).rejects.toThrow();
    } finally {
      await stop();
    }
  });

  it("keeps a branch while a session names it, then lets it expire with its database and Secret", async () => {
    const stop = runController();
    const sessions = clusterSessionClient(kc);
    try {
      await create("short", {
        copy: { mode: "schema", filters: [{ table: "items", where: "tenant = 3" }] },
        ttlSeconds: 30,
      });
      const b = await settled("short");
      expect(b.status?.phase).toBe("Ready");
      const { credentials } = await secretOf("short");
      expect(await count(credentials.url)).toBe(await count(sourceUrl(pg18), "tenant = 3"));
      await sessions.create({
        metadata: { name: "dev-1", namespace: NS },
        spec: {
          target: "deployment/shop",
          clientKeyHash: "0".repeat(64),
          connectParams: {
            databaseBranches: [{ envVar: "DATABASE_URL", kind: "PgBranchDatabase", name: "short" }],
          },
        },
      });
      const used = await eventually(
        "the session recorded",
        async () => {
          const x = await branches().get({ namespace: NS, name: "short" });
          return x?.status?.sessions?.includes("dev-1") ? x : undefined;
        },
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      expect(Date.parse(used.status!.expiresAt!)).toBeGreaterThan(Date.now() + 14_000);
      await sessions.delete({ namespace: NS, name: "dev-1" });
      await eventually(
        "the session forgotten",
        async () => (await branches().get({ namespace: NS, name: "short" }))?.status?.sessions?.length === 0,
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      await gone("short");
      expect(await branchDatabases(pg18)).not.toContain(credentials.database);
      await expect(
        core.readNamespacedSecret({ namespace: NS, name: branchSecretName("PgBranchDatabase", "short") }),
      ).rejects.toMatchObject({ code: 404 });
    } finally {
      await stop();
    }
  }, 90_000);

  it("fails with the reason: an unreachable source, a variable that is not a URL, a kind with no server, a foreign Secret", async () => {
    const stop = runController({ maxAttempts: 2 });
    try {
      const [closed] = await freePorts(1);
      await create("unreachable", {
        source: { host: "127.0.0.1", port: closed, database: "shop", user: "app" },
      });
      const u = await settled("unreachable");
      expect(u.status?.phase).toBe("Failed");
      expect(u.status?.conditions?.find((c) => c.type === "Ready")?.message).toMatch(
        new RegExp(`127\\.0\\.0\\.1:${closed}`),
      );

      const apps = kc.makeApiClient(AppsV1Api);
      await apps.createNamespacedDeployment({
        namespace: NS,
        body: {
          metadata: { name: "dsn" },
          spec: {
            selector: { matchLabels: { app: "dsn" } },
            template: {
              metadata: { labels: { app: "dsn" } },
              spec: {
                containers: [
                  {
                    name: "app",
                    image: "app:1",
                    env: [{ name: "DATABASE_URL", value: `host=db password=${APP_PASSWORD}` }],
                  },
                ],
              },
            },
          },
        },
      });
      await create("not-url", { target: "deployment/dsn" });
      const n = await settled("not-url", 10_000);
      expect(n.status?.phase).toBe("Failed");
      const why = n.status!.conditions!.find((c) => c.type === "Ready")!;
      expect(why.reason).toBe("SourceInvalid");
      expect(why.message).toMatch(/DATABASE_URL of deployment\/dsn/);
      expect(why.message).not.toContain(APP_PASSWORD);

      await mysqlBranchDatabaseClient(kc).create({
        metadata: { name: "no-server", namespace: NS },
        spec: { target: "deployment/shop", source: { host: "db", database: "shop", user: "app" } },
      });
      const m = await eventually(
        "the MySQL branch Failed",
        async () => {
          const x = await mysqlBranchDatabaseClient(kc).get({ namespace: NS, name: "no-server" });
          return x?.status?.phase === "Failed" ? x : undefined;
        },
        { timeoutMs: 10_000, intervalMs: 100 },
      );
      expect(m.status!.conditions!.find((c) => c.type === "Ready")).toMatchObject({
        reason: "NoProvisioner",
      });
      expect(m.status!.conditions!.find((c) => c.type === "Ready")!.message).toMatch(
        /branching\.postgres\.urlSecret/,
      );

      await core.createNamespacedSecret({
        namespace: NS,
        body: {
          metadata: { name: branchSecretName("PgBranchDatabase", "taken") },
          stringData: { mine: "yes" },
        },
      });
      await create("taken");
      const t = await settled("taken", 10_000);
      expect(t.status!.conditions!.find((c) => c.type === "Ready")).toMatchObject({
        reason: "SecretConflict",
      });
      await branches().delete({ namespace: NS, name: "taken" });
      await gone("taken");
      const kept = await core.readNamespacedSecret({
        namespace: NS,
        name: branchSecretName("PgBranchDatabase", "taken"),
      });
      expect(Buffer.from(kept.data!.mine!, "base64").toString()).toBe("yes");
    } finally {
      await stop();
    }
  }, 60_000);

  it("converges to one complete branch when the control plane stops in the middle of a copy", async () => {
    let stop = runController();
    const before = await branchDatabases(pg18);
    await create("restart", { target: "deployment/legacy", copy: { mode: "all" } });
    // The copy from the other server is under way once the Secret exists and a branch database appeared.
    await eventually(
      "a copy under way",
      async () =>
        (await branchDatabases(pg18)).some((d) => d.startsWith("sy_restart_") && !before.includes(d)),
      { timeoutMs: 30_000, intervalMs: 20 },
    );
    await stop();
    expect((await branches().get({ namespace: NS, name: "restart" }))?.status?.phase).toBe("Pending");
    stop = runController();
    try {
      const b = await settled("restart", 120_000);
      expect(b.status?.phase).toBe("Ready");
      expect(b.status!.conditions!.find((c) => c.type === "Ready")!.message).toMatch(/stream copy/);
      const { credentials } = await secretOf("restart");
      expect((await branchDatabases(pg18)).filter((d) => d.startsWith("sy_restart_"))).toEqual([
        credentials.database,
      ]);
      expect(await count(credentials.url)).toBe(200_000);
    } finally {
      await branches().delete({ namespace: NS, name: "restart" });
      await gone("restart");
      await stop();
    }
  }, 180_000);
});
