// Where the branching controllers run, proven with the control plane as a user runs it
// (control-plane/src/main.ts, mode both) against a real API server and a real PostgreSQL 18
// branch server: a single-cluster install makes branches itself, and so does a Primary that is
// its own Default cluster (multiCluster.defaultCluster names it) — no sync controller, no copy
// anywhere else. Placement is decided at start-up, so each case is its own control-plane run.
// (A Primary whose Default is another cluster only syncs: test/e2e/branching.test.ts.)
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { pgBranchDatabaseClient } from "../../../proto/api/v1alpha1/index.js";
import { startPostgres, type PostgresServer } from "../../env/databases/postgres-server.js";
import { freePorts, startClusterSet, type ClusterSet } from "../../env/index.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";
import { eventually } from "../../support/poll.js";
import { NS, putConfigMap } from "../control-plane/remote-fixtures.js";

const APP_PASSWORD = "placement-source-password";
let set: ClusterSet;
let kc: KubeConfig;
let pg18: PostgresServer;
let dir: string;
let cp: LaunchedProcess<LogLine> | undefined;

const sourceUrl = () => `postgres://app:${APP_PASSWORD}@127.0.0.1:${pg18.port}/shop`;

async function sql<T>(url: string, text: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text)).rows as T[];
  } finally {
    await c.end();
  }
}

const branchDatabases = async () =>
  (
    await sql<{ datname: string }>(
      pg18.adminUrl,
      "SELECT datname FROM pg_database WHERE datname LIKE 'sy\\_%' ORDER BY 1",
    )
  ).map((r) => r.datname);

beforeAll(async () => {
  [set, pg18] = await Promise.all([
    startClusterSet({ clusters: ["primary"], controllerManager: false }),
    startPostgres({ version: 18 }),
  ]);
  dir = mkdtempSync(join(tmpdir(), "switchyard-branch-placement-"));
  kc = set.get("primary").kubeConfig();
  await installCrds(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
  await sql(pg18.adminUrl, `CREATE ROLE app LOGIN PASSWORD '${APP_PASSWORD}'`);
  await sql(pg18.adminUrl, "CREATE DATABASE shop OWNER app");
  await sql(
    sourceUrl(),
    "CREATE TABLE items (id serial PRIMARY KEY, name text); INSERT INTO items (name) SELECT 'i' || g FROM generate_series(1, 30) g",
  );
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: "default",
    body: {
      metadata: { name: "shop" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "shop" } },
        template: {
          metadata: { labels: { app: "shop" } },
          spec: {
            containers: [
              { name: "app", image: "app:1", env: [{ name: "DATABASE_URL", value: sourceUrl() }] },
            ],
          },
        },
      },
    },
  });
  writeFileSync(join(dir, "pg-url"), pg18.adminUrl, { mode: 0o600 });
}, 180_000);

afterEach(async () => {
  await cp?.stop();
  cp = undefined;
});

afterAll(async () => {
  await cp?.stop();
  await Promise.all([set?.stop(), pg18?.stop()]);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function startControlPlane(): Promise<LaunchedProcess<LogLine>> {
  const primary = set.get("primary");
  const [routerPort] = await freePorts(1);
  return launch({
    name: "control-plane",
    ...tsx("control-plane/src/main.ts", [
      "--mode=both",
      "--cluster-name=primary",
      `--kubeconfig=${primary.adminKubeconfigPath}`,
      `--namespace=${NS}`,
      "--identity=cp-0",
      "--grpc-listen=127.0.0.1:0",
      "--metrics-listen=127.0.0.1:0",
      "--grpc-plaintext",
      `--router-service-account=${NS}/switchyard-router`,
      `--router-endpoint=ws://127.0.0.1:${routerPort}`,
      "--agent-provisioner=process",
      `--agent-kubeconfig=${primary.adminKubeconfigPath}`,
      `--agent-state-dir=${join(dir, "agents")}`,
      `--branch-postgres-url-file=${join(dir, "pg-url")}`,
      "--leader-lease-duration-seconds=3",
      "--leader-renew-deadline-seconds=2",
      "--leader-retry-period-seconds=0.5",
    ]),
    ready: (p) => p.logs.find((l) => l.msg === "control plane started"),
    readyTimeoutMs: 60_000,
    readyIntervalMs: 200,
  });
}

/** Creates a branch of the Deployment's DATABASE_URL, waits for Ready, then deletes it and waits for the database to go. */
async function branchMadeHere(name: string): Promise<string> {
  const client = pgBranchDatabaseClient(kc);
  await client.create({
    metadata: { name, namespace: "default" },
    spec: { target: "deployment/shop", source: { fromEnv: { name: "DATABASE_URL" } }, copy: { mode: "all" } },
  });
  const ready = await eventually(
    `${name} Ready`,
    async () => {
      const b = await client.get({ namespace: "default", name });
      if (b?.status?.phase === "Failed") throw new Error(`${name} failed: ${JSON.stringify(b.status)}`);
      return b?.status?.phase === "Ready" ? b : undefined;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  const branchName = ready.status!.branchName!;
  expect(await branchDatabases()).toContain(branchName);
  const rows = await sql<{ n: number }>(
    pg18.adminUrl.replace(/\/postgres$/, `/${branchName}`),
    "SELECT count(*)::int AS n FROM items",
  );
  expect(rows[0]?.n).toBe(30);
  await client.delete({ namespace: "default", name });
  await eventually(
    `${name} and its database gone`,
    async () =>
      (await client.get({ namespace: "default", name })) === undefined &&
      !(await branchDatabases()).includes(branchName),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  return ready.status!.conditions?.find((c) => c.type === "Ready")?.message ?? "";
}

const placementLine = (p: LaunchedProcess<LogLine>) =>
  p.logs.find((l) => typeof l.branching === "boolean" && typeof l.sync === "boolean");

describe("branch controller placement", () => {
  it("a single-cluster install makes branches itself", async () => {
    cp = await startControlPlane();
    const line = await eventually("the placement log line", async () => placementLine(cp!), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    expect({ branching: line.branching, sync: line.sync }).toEqual({ branching: true, sync: false });
    expect(await branchMadeHere("single")).toMatch(/made by (clone|template) copy in \d+ ms/);
  }, 120_000);

  it("a Primary that is its own Default makes branches itself and runs no sync", async () => {
    await putConfigMap(
      kc,
      "switchyard-clusters",
      stringify({ enabled: true, clusterName: "primary", defaultCluster: "primary", clusters: {} }),
    );
    cp = await startControlPlane();
    const line = await eventually("the placement log line", async () => placementLine(cp!), {
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    expect({ branching: line.branching, sync: line.sync }).toEqual({ branching: true, sync: false });
    expect(String(line.msg)).toMatch(/this Primary \(primary\) is the Default cluster/);
    expect(await branchMadeHere("primary-default")).toMatch(/made by (clone|template) copy in \d+ ms/);
    // Nothing of the sync controller's: no finalizer or copy annotation was ever put on a branch.
    expect(cp.logs.some((l) => l.component === "branch-sync")).toBe(false);
  }, 120_000);
});
