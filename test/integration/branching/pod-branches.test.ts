// The `pod` provisioner (control-plane/src/branching/pod/pod-branches.ts) on a real node: the
// branching controller makes each branch as a database Pod + Service of the test PostgreSQL
// image (test/env/databases/postgres-image.ts), which seeds itself from a source Postgres pod
// of the same image behind its own Service. Branch and source are read from inside the
// cluster, by short-lived psql pods (pod IPs and ClusterIPs are not routed from the host).
// Needs root and the packages of test/env/nodes/install-host-packages.sh and
// test/env/databases/install-database-packages.sh (it fails without them, never skips).
import { CoreV1Api, type KubeConfig, type V1EnvVar } from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BRANCH_SECRET_LABEL,
  branchSecretName,
  pgBranchDatabaseClient,
  readBranchSecretData,
  type BranchDatabase,
} from "../../../proto/api/v1alpha1/index.js";
import { BranchController } from "../../../control-plane/src/branching/branch-controller.js";
import { PgPodBranches } from "../../../control-plane/src/branching/pod/pod-branches.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { startClusterSet, type ClusterSet } from "../../env/clusters/cluster-set.js";
import {
  POSTGRES_IMAGE,
  POSTGRES_IMAGE_UID,
  postgresImage,
  postgresPodSpec,
} from "../../env/databases/postgres-image.js";
import { startNodes, type NodeSet } from "../../env/nodes/node-set.js";
import { eventually } from "../../support/poll.js";
import { runOnceInCluster, secretEnv } from "./pod-once.js";

const NS = "branches";
const SOURCE_PASSWORD = "Src-Pa55word-in-a-Secret";
const SOURCE_HOST = `source.${NS}.svc`;
let set: ClusterSet | undefined;
let nodes: NodeSet | undefined;
let kc: KubeConfig;
let core: CoreV1Api;
let stopController: (() => Promise<void>) | undefined;
const logLines: string[] = [];
const logger = pino({ level: "info" }, { write: (l: string) => void logLines.push(l) });
const branches = () => pgBranchDatabaseClient(kc);

// 30 customers in 3 tenants, 90 orders referencing them.
const SOURCE_SQL = `
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, tenant int NOT NULL);
CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL REFERENCES customers (id), total numeric NOT NULL);
INSERT INTO customers (name, tenant) SELECT 'customer ' || g, g % 3 FROM generate_series(1, 30) g;
INSERT INTO orders (customer_id, total) SELECT 1 + g % 30, g * 1.5 FROM generate_series(1, 90) g;
CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 100;
`;

beforeAll(async () => {
  const image = await postgresImage();
  set = await startClusterSet({ clusters: ["east"], nodes: true });
  nodes = await startNodes(set, { images: [image] });
  kc = set.get("east").kubeConfig();
  core = kc.makeApiClient(CoreV1Api);
  await installCrds(kc);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: "source-credentials" }, stringData: { password: SOURCE_PASSWORD } },
  });
  await core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: "wrong-credentials" }, stringData: { password: "not-the-password" } },
  });
  await core.createNamespacedConfigMap({
    namespace: NS,
    body: { metadata: { name: "source-init" }, data: { "init.sql": SOURCE_SQL } },
  });
  await core.createNamespacedPod({
    namespace: NS,
    body: {
      metadata: { name: "source", labels: { app: "source" } },
      spec: postgresPodSpec({
        user: "app",
        database: "shop",
        password: { secretKeyRef: { name: "source-credentials", key: "password" } },
        initConfigMap: "source-init",
      }),
    },
  });
  await core.createNamespacedService({
    namespace: NS,
    body: { metadata: { name: "source" }, spec: { selector: { app: "source" }, ports: [{ port: 5432 }] } },
  });
  await eventually(
    "source pod Ready",
    async () => {
      const p = await core.readNamespacedPod({ namespace: NS, name: "source" });
      return p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
    },
    { timeoutMs: 90_000, intervalMs: 200 },
  );
  const controller = new BranchController({
    kubeConfig: kc,
    provisioners: { PgBranchDatabase: new PgPodBranches({ kubeConfig: kc, image: POSTGRES_IMAGE, logger }) },
    provisionerHint: "set --branch-provisioner-postgres",
    logger,
    maxAttempts: 3,
  });
  const stop = new AbortController();
  const done = controller.start(stop.signal);
  stopController = async () => {
    stop.abort();
    await done;
  };
}, 600_000);

afterAll(async () => {
  await stopController?.();
  await nodes?.stop().catch(() => {});
  await set?.stop();
});

/** Runs `sql` with psql in a short-lived pod (the image's psql) as `env` says; answers its output. */
const psqlInCluster = (env: V1EnvVar[], sql: string) =>
  runOnceInCluster(core, {
    namespace: NS,
    tool: "psql",
    image: POSTGRES_IMAGE,
    uid: POSTGRES_IMAGE_UID,
    command: ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql],
    env,
  });

const onBranch = (cr: string, sql: string) =>
  psqlInCluster(
    secretEnv(branchSecretName("PgBranchDatabase", cr), {
      PGHOST: "host",
      PGPORT: "port",
      PGDATABASE: "database",
      PGUSER: "user",
      PGPASSWORD: "password",
    }),
    sql,
  );
const onSource = (sql: string) =>
  psqlInCluster(
    [
      { name: "PGHOST", value: SOURCE_HOST },
      { name: "PGDATABASE", value: "shop" },
      { name: "PGUSER", value: "app" },
      ...secretEnv("source-credentials", { PGPASSWORD: "password" }),
    ],
    sql,
  );

async function create(name: string, copy: BranchDatabase["spec"]["copy"], secret = "source-credentials") {
  await branches().create({
    metadata: { name, namespace: NS },
    spec: {
      target: "deployment/shop",
      source: {
        host: SOURCE_HOST,
        database: "shop",
        user: "app",
        passwordSecretRef: { name: secret, key: "password" },
      },
      copy,
    },
  });
}

const settled = (name: string) =>
  eventually(
    `${name} Ready or Failed`,
    async () => {
      const b = await branches().get({ namespace: NS, name });
      return b?.status?.phase === "Ready" || b?.status?.phase === "Failed" ? b : undefined;
    },
    { timeoutMs: 120_000, intervalMs: 200 },
  );

/** Everything labelled as the branch's: Pod, Service, seed Secret and the credentials Secret. */
const objectsOf = async (cr: string) => {
  const selector = `${BRANCH_SECRET_LABEL}=pgbranchdatabase.${cr}`;
  const [pods, services, secrets] = await Promise.all([
    core.listNamespacedPod({ namespace: NS, labelSelector: selector }),
    core.listNamespacedService({ namespace: NS, labelSelector: selector }),
    core.listNamespacedSecret({ namespace: NS, labelSelector: selector }),
  ]);
  return { pods: pods.items.length, services: services.items.length, secrets: secrets.items.length };
};

describe("pod provisioner on a real node", () => {
  it("schema with a row filter: Ready, the filtered rows, sequences moved, the source untouched; deleting the CR removes everything", async () => {
    const t0 = Date.now();
    await create("filtered", { mode: "schema", filters: [{ table: "customers", where: "tenant = 1" }] });
    const b = await settled("filtered");
    const ready = b.status!.conditions!.find((c) => c.type === "Ready")!;
    expect(b.status?.phase, ready.message).toBe("Ready");
    expect(ready.message).toMatch(/^sy_filtered_\w+ made by pod copy in \d+ ms$/);
    process.stderr.write(`[pod-branches] schema branch Ready in ${Date.now() - t0} ms\n`);
    const secret = await core.readNamespacedSecret({ namespace: NS, name: b.status!.secretName! });
    const credentials = readBranchSecretData(secret.data)!;
    const podName = b.status!.branchName!.replaceAll("_", "-");
    expect(credentials).toMatchObject({ host: `${podName}.${NS}.svc`, port: "5432" });
    const pod = await core.readNamespacedPod({ namespace: NS, name: podName });
    expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: "PgBranchDatabase",
      uid: b.metadata.uid,
    });
    expect(pod.spec?.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 999 });
    expect(JSON.stringify(pod)).not.toContain(SOURCE_PASSWORD);
    // Seeded on one exported snapshot, then the real server started.
    const log = String(await core.readNamespacedPodLog({ namespace: NS, name: podName }));
    expect(log).toMatch(/switchyard: seeded sy_filtered_\w+ in \d+ s/);
    expect(log).not.toContain("exported no snapshot");
    expect(log).not.toContain(SOURCE_PASSWORD);

    expect(
      await onBranch(
        "filtered",
        "SELECT (SELECT count(*) FROM customers), (SELECT count(*) FROM customers WHERE tenant <> 1), " +
          "(SELECT count(*) FROM orders), (SELECT count(*) FROM big_orders), current_user",
      ),
    ).toBe(`10|0|0|0|${credentials.user}`);
    // The serial moved past the highest id copied (28): a new row gets 29, not 1.
    expect(
      await onBranch("filtered", "INSERT INTO customers (name, tenant) VALUES ('new', 1) RETURNING id"),
    ).toBe("29");
    await onBranch("filtered", "DELETE FROM customers");
    expect(await onSource("SELECT count(*) FROM customers")).toBe("30");

    expect(await objectsOf("filtered")).toEqual({ pods: 1, services: 1, secrets: 2 });
    await branches().delete({ namespace: NS, name: "filtered" });
    await eventually(
      "filtered's objects gone",
      async () => {
        const left = await objectsOf("filtered");
        const cr = await branches().get({ namespace: NS, name: "filtered" });
        return left.pods + left.services + left.secrets === 0 && !cr ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    await expect(
      core.readNamespacedSecret({ namespace: NS, name: b.status!.secretName! }),
    ).rejects.toMatchObject({
      code: 404,
    });
  });

  it("all: every row, view and foreign key; writes to the branch leave the source as it was", async () => {
    await create("everything", { mode: "all" });
    const b = await settled("everything");
    expect(b.status?.phase, JSON.stringify(b.status?.conditions)).toBe("Ready");
    expect(
      await onBranch(
        "everything",
        "SELECT (SELECT count(*) FROM customers), (SELECT count(*) FROM orders), (SELECT count(*) FROM big_orders), " +
          "(SELECT count(*) FROM pg_constraint WHERE contype = 'f')",
      ),
    ).toBe("30|90|24|1");
    await onBranch("everything", "DELETE FROM orders; UPDATE customers SET name = 'changed'");
    expect(
      await onSource(
        "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM customers WHERE name = 'changed')",
      ),
    ).toBe("90|0");
  });

  it("a wrong source password: Failed with the seed's reason, the pod gone, no password anywhere", async () => {
    await create("wrong-password", { mode: "schema" }, "wrong-credentials");
    const b = await settled("wrong-password");
    const ready = b.status!.conditions!.find((c) => c.type === "Ready")!;
    expect(b.status?.phase).toBe("Failed");
    expect(ready.reason).toBe("SeedFailed");
    process.stderr.write(`[pod-branches] wrong password: ${ready.message}\n`);
    expect(ready.message).toMatch(/password authentication failed for user "app"/);
    expect(ready.message).toMatch(/seeding .* failed while copying the schema of every table/);
    await eventually(
      "wrong-password's pod gone",
      async () => (await objectsOf("wrong-password")).pods === 0,
      {
        timeoutMs: 30_000,
        intervalMs: 200,
      },
    );
    const all = JSON.stringify(b) + logLines.join("");
    for (const secret of [SOURCE_PASSWORD, "not-the-password"]) expect(all).not.toContain(secret);
  });
});
