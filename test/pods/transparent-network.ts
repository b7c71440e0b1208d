// What the transparent-network tests of sessions.test.ts run inside `switchyard exec
// --network=transparent` and check around it: a shell probe whose checks (DNS through glibc
// and a static busybox, a Service by its short name, the target's files, a loopback port of
// this machine) print between markers, a PostgreSQL Deployment `orders-db` in the Default
// cluster for a command to reach by its cluster DNS name, and what a run may leave behind
// (its private directory, its processes).
import { readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { postgresImage, postgresPodSpec } from "../env/databases/postgres-image.js";
import { writeImageArchive } from "../env/images/oci-image.js";
import type { TestNode } from "../env/nodes/node.js";
import { eventually } from "../support/poll.js";

/**
 * `sh -c` script: each check prints `<<<name`, its output (stdout and stderr, as it is), then
 * `>>>name`; the script exits 42.
 */
export function probeScript(hostLoopbackPort: number): string {
  return [
    `check() { n=$1; shift; printf '<<<%s\\n' "$n"; "$@" 2>&1; printf '>>>%s\\n' "$n"; }`,
    `check proxy sh -c 'env | grep -i "^[a-z_]*_proxy=" || echo none'`,
    "check fqdn getent hosts demo.default.svc.cluster.local",
    "check short getent hosts demo",
    "check nslookup busybox nslookup demo.default.svc.cluster.local",
    "check wget busybox wget -q -O- http://demo/transparent",
    "check settings cat /etc/demo/settings.yaml",
    `check loopback busybox wget -q -O- http://127.0.0.1:${hostLoopbackPort}/from-namespace`,
    "exit 42",
  ].join("\n");
}

/** The probe's checks by name: exactly what each printed. */
export function probeAnswers(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of stdout.matchAll(/^<<<(\w+)\n([\s\S]*?)>>>\1$/gm)) out[m[1]!] = m[2]!;
  return out;
}

export const ORDERS_DB = {
  name: "orders-db",
  user: "orders",
  password: "orders-in-east",
  database: "orders",
};

/** orders-db's URL as a workload of east holds it (the demo's DATABASE_URL): what a branch is made from. */
export const ORDERS_DB_URL = `postgres://${ORDERS_DB.user}:${ORDERS_DB.password}@${ORDERS_DB.name}.default.svc:5432/${ORDERS_DB.database}`;

/**
 * A Node script (run with `node -e` from the repository root) that connects to DATABASE_URL as
 * the session gives it, adds an order and prints where it connected and the orders it sees.
 */
export const BRANCH_QUERY = `
const { Client } = require("pg");
(async () => {
  const url = new URL(process.env.DATABASE_URL);
  const c = new Client({ connectionString: process.env.DATABASE_URL });
  await c.connect();
  await c.query("insert into orders (item, total) values ('laptop-widget', 1)");
  const r = await c.query("select current_database() as db, current_user as user, " +
    "(select string_agg(item, ',' order by id) from orders) as orders");
  console.log(JSON.stringify({ host: url.hostname, port: url.port, ...r.rows[0] }));
  await c.end();
})().catch((e) => { console.error(e); process.exit(1); });
`;

/** A Node script (run with `node -e` from the repository root) that queries orders-db by its cluster DNS name. */
export const ORDERS_QUERY = `
const { Client } = require("pg");
(async () => {
  const c = new Client({ host: "${ORDERS_DB.name}.default.svc.cluster.local", port: 5432,
    user: "${ORDERS_DB.user}", password: "${ORDERS_DB.password}", database: "${ORDERS_DB.database}" });
  await c.connect();
  const one = await c.query("select 1 as one");
  const r = await c.query("select host(inet_server_addr()) as server, current_database() as db, " +
    "(select string_agg(item || '=' || total, ',' order by id) from orders) as orders");
  console.log(JSON.stringify({ one: one.rows[0].one, ...r.rows[0],
    proxy: Object.keys(process.env).filter((k) => /_proxy$/i.test(k)) }));
  await c.end();
})().catch((e) => { console.error(e); process.exit(1); });
`;

/**
 * PostgreSQL (the test image, imported into `node` now) as Deployment and Service orders-db in
 * namespace "default" of `kc`, with a table `orders` of two rows; resolves with its pod's IP
 * once Ready. `scratch` holds the image archive while it is imported.
 */
export async function startOrdersDb(kc: KubeConfig, node: TestNode, scratch: string): Promise<string> {
  const archive = writeImageArchive(await postgresImage(), join(scratch, "orders-db-postgres.tar"));
  try {
    await node.importImage(archive);
  } finally {
    rmSync(archive.file, { force: true });
  }
  const core = kc.makeApiClient(CoreV1Api);
  const namespace = "default";
  const { name } = ORDERS_DB;
  const labels = { app: name };
  await core.createNamespacedConfigMap({
    namespace,
    body: {
      metadata: { name: `${name}-init` },
      data: {
        "init.sql":
          "CREATE TABLE orders (id serial PRIMARY KEY, item text NOT NULL, total numeric NOT NULL);\n" +
          "INSERT INTO orders (item, total) VALUES ('east-widget', 12.5), ('east-gadget', 30);\n",
      },
    },
  });
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name, labels },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            terminationGracePeriodSeconds: 2,
            ...postgresPodSpec({
              user: ORDERS_DB.user,
              database: ORDERS_DB.database,
              password: ORDERS_DB.password,
              initConfigMap: `${name}-init`,
            }),
          },
        },
      },
    },
  });
  await core.createNamespacedService({
    namespace,
    body: { metadata: { name }, spec: { selector: labels, ports: [{ port: 5432, targetPort: 5432 }] } },
  });
  return eventually(
    `${name} to be Ready`,
    async () => {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: `app=${name}` });
      const ready = pods.items.find((p) =>
        p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
      );
      return ready?.status?.podIP;
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
}

/** Deletes what startOrdersDb created. */
export async function deleteOrdersDb(kc: KubeConfig): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const namespace = "default";
  const { name } = ORDERS_DB;
  const gone = (p: Promise<unknown>) => p.catch(() => {});
  await gone(kc.makeApiClient(AppsV1Api).deleteNamespacedDeployment({ name, namespace }));
  await gone(core.deleteNamespacedService({ name, namespace }));
  await gone(core.deleteNamespacedConfigMap({ name: `${name}-init`, namespace }));
}

/** A process of this machine whose environment names `TMPDIR=tmp`, and whether it has our network namespace. */
export interface RunProcess {
  pid: number;
  cmdline: string;
  ownNetwork: boolean;
}

/** Every process that `switchyard exec` started with TMPDIR=`tmp` (the CLI, its helper, tun2socks, CMD). */
export function runProcesses(tmp: string): RunProcess[] {
  const ours = readlinkSync("/proc/self/ns/net");
  const out: RunProcess[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(`TMPDIR=${tmp}`)) continue;
      out.push({
        pid: Number(entry),
        cmdline: readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim(),
        ownNetwork: readlinkSync(`/proc/${entry}/ns/net`) !== ours,
      });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** What a finished run left: its private directories under `tmp`, and its processes. */
export function runLeftovers(tmp: string): string[] {
  return [
    ...readdirSync(tmp)
      .filter((f) => f.startsWith("switchyard-ns-"))
      .map((f) => `directory ${join(tmp, f)}`),
    ...runProcesses(tmp).map((p) => `process ${p.pid}: ${p.cmdline}`),
  ];
}
