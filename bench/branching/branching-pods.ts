// The `pod` provisioner's part of `npm run bench -- branching`: time to Ready of a branch made
// as a database pod (the test PostgreSQL 15 image, test/env/databases/postgres-image.ts) on a
// real node, seeding itself from a source pod of about the same size as the bench's source.
// `empty` measures what every pod branch pays before copying anything (scheduling, container
// start, initdb, the temporary server); `schema` and `all` add their copy. Runs on its own
// cluster set and node, after the server measurements, so that neither disturbs the other.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { BranchController } from "../../control-plane/src/branching/branch-controller.js";
import { PgPodBranches } from "../../control-plane/src/branching/pod/pod-branches.js";
import { installCrds } from "../../control-plane/src/runtime/index.js";
import { pgBranchDatabaseClient, type BranchDatabase } from "../../proto/api/v1alpha1/index.js";
import { POSTGRES_IMAGE, postgresImage, postgresPodSpec } from "../../test/env/databases/postgres-image.js";
import { startClusterSet } from "../../test/env/index.js";
import { startNodes } from "../../test/env/nodes/node-set.js";

const NS = "bench";
const PASSWORD = "bench-source-password";

export interface PodBranchTimes {
  /** ms from the source pod's creation to Ready (its initdb.d script generated the rows). */
  sourceReadyMs: number;
  empty: number[];
  schema: number[];
  all: number[];
}

/** The bench's source (branching.ts `generate`) as an initdb.d script for the source pod. */
function sourceSql(mb: number): string {
  const rows = Math.round(mb * 4_200);
  const customers = Math.ceil(rows / 10);
  return `
CREATE TABLE customers (id serial PRIMARY KEY, tenant int NOT NULL, name text NOT NULL);
CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers(id), note text NOT NULL);
INSERT INTO customers (tenant, name) SELECT g % 50, 'customer ' || g FROM generate_series(1, ${customers}) g;
INSERT INTO orders (customer_id, note) SELECT 1 + g % ${customers}, repeat(md5(g::text), 5) FROM generate_series(1, ${rows}) g;
CREATE INDEX orders_customer ON orders (customer_id);
ANALYZE;
`;
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function startSource(kc: KubeConfig, mb: number): Promise<number> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: "bench-source" }, stringData: { password: PASSWORD } },
  });
  await core.createNamespacedConfigMap({
    namespace: NS,
    body: { metadata: { name: "source-init" }, data: { "init.sql": sourceSql(mb) } },
  });
  const t0 = performance.now();
  await core.createNamespacedPod({
    namespace: NS,
    body: {
      metadata: { name: "source", labels: { app: "source" } },
      spec: postgresPodSpec({
        user: "app",
        database: "bench",
        password: PASSWORD,
        initConfigMap: "source-init",
      }),
    },
  });
  await core.createNamespacedService({
    namespace: NS,
    body: { metadata: { name: "source" }, spec: { selector: { app: "source" }, ports: [{ port: 5432 }] } },
  });
  await until("the source pod Ready", 600_000, async () => {
    const p = await core.readNamespacedPod({ namespace: NS, name: "source" });
    return p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") || undefined;
  });
  return performance.now() - t0;
}

/** Starts a cluster with one real node, the source pod and the branching controller with the pod provisioner; measures each mode `runs` times. */
export async function podBranchTimes(mb: number, runs: number, logger: Logger): Promise<PodBranchTimes> {
  const image = await postgresImage();
  const set = await startClusterSet({ clusters: ["pods"], nodes: true });
  const stop = new AbortController();
  let running: Promise<void> | undefined;
  try {
    const nodes = await startNodes(set, { images: [image] });
    try {
      const kc = set.get("pods").kubeConfig();
      await installCrds(kc);
      const sourceReadyMs = await startSource(kc, mb);
      running = new BranchController({
        kubeConfig: kc,
        provisioners: {
          PgBranchDatabase: new PgPodBranches({ kubeConfig: kc, image: POSTGRES_IMAGE, logger }),
        },
        provisionerHint: "",
        logger,
      }).start(stop.signal);
      const client = pgBranchDatabaseClient(kc);
      const out: PodBranchTimes = { sourceReadyMs, empty: [], schema: [], all: [] };
      for (let i = 0; i < runs; i++) {
        for (const mode of ["empty", "schema", "all"] as const) {
          const name = `pod-${mode}-${i}`;
          const spec: BranchDatabase["spec"] = {
            target: "deployment/unused",
            source: {
              host: `source.${NS}.svc`,
              database: "bench",
              user: "app",
              passwordSecretRef: { name: "bench-source", key: "password" },
            },
            copy: { mode },
          };
          const t0 = performance.now();
          await client.create({ metadata: { name, namespace: NS }, spec });
          await until(`${name} Ready`, 600_000, async () => {
            const b = await client.get({ namespace: NS, name });
            if (b?.status?.phase === "Failed")
              throw new Error(`${name} Failed: ${JSON.stringify(b.status.conditions)}`);
            return b?.status?.phase === "Ready" || undefined;
          });
          out[mode].push(performance.now() - t0);
          await client.delete({ namespace: NS, name });
          await until(`${name} gone`, 120_000, async () =>
            (await client.get({ namespace: NS, name })) ? undefined : true,
          );
        }
      }
      return out;
    } finally {
      stop.abort();
      await running?.catch(() => undefined);
      await nodes.stop().catch(() => undefined);
    }
  } finally {
    await set.stop();
  }
}
