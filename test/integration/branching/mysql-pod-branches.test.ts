// The MySQL/MariaDB `pod` provisioner (control-plane/src/branching/pod/pod-branches.ts,
// MysqlPodBranches) on a real node: the branching controller makes each branch as a database
// Pod + Service of the test MariaDB image (test/env/databases/mariadb-image.ts), which seeds
// itself from a source MariaDB pod of the same image behind its own Service. Branch and source
// are read from inside the cluster, by short-lived `mariadb` pods (pod IPs and ClusterIPs are
// not routed from the host). Needs root and the packages of test/env/nodes/install-host-packages.sh
// and test/env/databases/install-database-packages.sh (it fails without them, never skips).
import { CoreV1Api, type KubeConfig, type V1EnvVar } from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BRANCH_SECRET_LABEL,
  branchSecretName,
  mysqlBranchDatabaseClient,
  readBranchSecretData,
  type BranchDatabase,
} from "../../../proto/api/v1alpha1/index.js";
import { BranchController } from "../../../control-plane/src/branching/branch-controller.js";
import { MysqlPodBranches } from "../../../control-plane/src/branching/pod/pod-branches.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { startClusterSet, type ClusterSet } from "../../env/clusters/cluster-set.js";
import { MARIADB_IMAGE, MARIADB_IMAGE_UID, mariadbImage } from "../../env/databases/mariadb-image.js";
import { startNodes, type NodeSet } from "../../env/nodes/node-set.js";
import { eventually } from "../../support/poll.js";
import { runOnceInCluster, secretEnv } from "./pod-once.js";

const NS = "mysql-branches";
const SOURCE_PASSWORD = "Src-Pa55word-in-a-Secret";
const SOURCE_HOST = `source.${NS}.svc`;
let set: ClusterSet | undefined;
let nodes: NodeSet | undefined;
let kc: KubeConfig;
let core: CoreV1Api;
let stopController: (() => Promise<void>) | undefined;
const logLines: string[] = [];
const logger = pino({ level: "info" }, { write: (l: string) => void logLines.push(l) });
const branches = () => mysqlBranchDatabaseClient(kc);

// 0..9 and 0..8 as rows, for generating rows without a sequence engine.
const DIGITS =
  "(SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 " +
  "UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";
// 30 customers in 3 tenants, 90 orders referencing them; a view, a trigger and a function whose
// definer is the source's user (the entrypoint runs this as root, which may name any definer).
const SOURCE_SQL = `
CREATE TABLE customers (id int AUTO_INCREMENT PRIMARY KEY, name varchar(100) NOT NULL, tenant int NOT NULL) ENGINE=InnoDB;
CREATE TABLE orders (id bigint AUTO_INCREMENT PRIMARY KEY, customer_id int NOT NULL, total decimal(10,2) NOT NULL,
  FOREIGN KEY (customer_id) REFERENCES customers (id)) ENGINE=InnoDB;
CREATE TABLE audit (id int AUTO_INCREMENT PRIMARY KEY, what varchar(100) NOT NULL, who varchar(200) NOT NULL) ENGINE=InnoDB;
INSERT INTO customers (name, tenant) SELECT CONCAT('customer ', k), k % 3 FROM
  (SELECT 1 + d.n + 10 * t.n AS k FROM ${DIGITS} d, ${DIGITS} t WHERE t.n < 3) g ORDER BY k;
INSERT INTO orders (customer_id, total) SELECT 1 + k % 30, k * 1.5 FROM
  (SELECT 1 + d.n + 10 * t.n AS k FROM ${DIGITS} d, ${DIGITS} t WHERE t.n < 9) g ORDER BY k;
CREATE DEFINER=\`app\`@\`%\` SQL SECURITY DEFINER VIEW big_orders AS SELECT * FROM orders WHERE total > 100;
CREATE DEFINER=\`app\`@\`%\` TRIGGER customers_audit AFTER INSERT ON customers FOR EACH ROW
  INSERT INTO audit (what, who) VALUES (NEW.name, CURRENT_USER());
CREATE DEFINER=\`app\`@\`%\` FUNCTION order_count(c int) RETURNS int READS SQL DATA
  RETURN (SELECT count(*) FROM orders WHERE customer_id = c);
`;

beforeAll(async () => {
  const image = await mariadbImage();
  set = await startClusterSet({ clusters: ["east"], nodes: true });
  nodes = await startNodes(set, { images: [image] });
  kc = set.get("east").kubeConfig();
  core = kc.makeApiClient(CoreV1Api);
  await installCrds(kc);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  for (const [name, password] of [
    ["source-credentials", SOURCE_PASSWORD],
    ["wrong-credentials", "not-the-password"],
  ] as const)
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name }, stringData: { password } },
    });
  await core.createNamespacedConfigMap({
    namespace: NS,
    body: { metadata: { name: "source-init" }, data: { "init.sql": SOURCE_SQL } },
  });
  await core.createNamespacedPod({
    namespace: NS,
    body: {
      metadata: { name: "source", labels: { app: "source" } },
      spec: {
        securityContext: { runAsNonRoot: true, runAsUser: MARIADB_IMAGE_UID, fsGroup: MARIADB_IMAGE_UID },
        containers: [
          {
            name: "mariadb",
            image: MARIADB_IMAGE,
            imagePullPolicy: "Never",
            env: [
              { name: "MARIADB_USER", value: "app" },
              { name: "MARIADB_DATABASE", value: "shop" },
              ...secretEnv("source-credentials", { MARIADB_PASSWORD: "password" }),
              { name: "MARIADB_RANDOM_ROOT_PASSWORD", value: "1" },
            ],
            ports: [{ containerPort: 3306 }],
            readinessProbe: { tcpSocket: { port: 3306 }, periodSeconds: 1 },
            volumeMounts: [
              { name: "data", mountPath: "/var/lib/mysql" },
              { name: "init", mountPath: "/docker-entrypoint-initdb.d" },
            ],
          },
        ],
        volumes: [
          { name: "data", emptyDir: {} },
          { name: "init", configMap: { name: "source-init" } },
        ],
      },
    },
  });
  await core.createNamespacedService({
    namespace: NS,
    body: { metadata: { name: "source" }, spec: { selector: { app: "source" }, ports: [{ port: 3306 }] } },
  });
  await eventually(
    "source pod Ready",
    async () => {
      const p = await core.readNamespacedPod({ namespace: NS, name: "source" });
      return p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
    },
    { timeoutMs: 120_000, intervalMs: 200 },
  );
  const controller = new BranchController({
    kubeConfig: kc,
    provisioners: {
      MysqlBranchDatabase: new MysqlPodBranches({ kubeConfig: kc, image: MARIADB_IMAGE, logger }),
    },
    provisionerHint: "set --branch-provisioner-mysql",
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

/** Runs `sql` with `mariadb` in a short-lived pod, connected as `env` says (DB_* and MYSQL_PWD); answers its rows. */
const mariadbInCluster = (env: V1EnvVar[], sql: string) =>
  runOnceInCluster(core, {
    namespace: NS,
    tool: "mariadb",
    image: MARIADB_IMAGE,
    uid: MARIADB_IMAGE_UID,
    // The kubelet expands $(VAR) from the container's env.
    command: [
      "mariadb",
      "--no-defaults",
      "--host=$(DB_HOST)",
      "--port=$(DB_PORT)",
      "--user=$(DB_USER)",
      "--database=$(DB_NAME)",
      "--batch",
      "--skip-column-names",
      `--execute=${sql}`,
    ],
    env,
  });

const onBranch = (cr: string, sql: string) =>
  mariadbInCluster(
    secretEnv(branchSecretName("MysqlBranchDatabase", cr), {
      DB_HOST: "host",
      DB_PORT: "port",
      DB_NAME: "database",
      DB_USER: "user",
      MYSQL_PWD: "password",
    }),
    sql,
  );
const onSource = (sql: string) =>
  mariadbInCluster(
    [
      { name: "DB_HOST", value: SOURCE_HOST },
      { name: "DB_PORT", value: "3306" },
      { name: "DB_NAME", value: "shop" },
      { name: "DB_USER", value: "app" },
      ...secretEnv("source-credentials", { MYSQL_PWD: "password" }),
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
    { timeoutMs: 180_000, intervalMs: 200 },
  );

/** Everything labelled as the branch's: Pod, Service, seed Secret and the credentials Secret. */
const objectsOf = async (cr: string) => {
  const selector = `${BRANCH_SECRET_LABEL}=mysqlbranchdatabase.${cr}`;
  const [pods, services, secrets] = await Promise.all([
    core.listNamespacedPod({ namespace: NS, labelSelector: selector }),
    core.listNamespacedService({ namespace: NS, labelSelector: selector }),
    core.listNamespacedSecret({ namespace: NS, labelSelector: selector }),
  ]);
  return { pods: pods.items.length, services: services.items.length, secrets: secrets.items.length };
};

const DEFINERS =
  "SELECT DEFINER FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE() " +
  "UNION ALL SELECT DEFINER FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() " +
  "UNION ALL SELECT DEFINER FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()";

describe("MySQL/MariaDB pod provisioner on a real node", () => {
  it("schema with a row filter: Ready, the filtered rows, definers the branch user's, the source untouched; deleting the CR removes everything", async () => {
    const t0 = Date.now();
    await create("filtered", { mode: "schema", filters: [{ table: "customers", where: "tenant = 1" }] });
    const b = await settled("filtered");
    const ready = b.status!.conditions!.find((c) => c.type === "Ready")!;
    expect(b.status?.phase, ready.message).toBe("Ready");
    expect(ready.message).toMatch(/^sy_filtered_\w+ made by pod copy in \d+ ms$/);
    process.stderr.write(`[mysql-pod-branches] schema branch Ready in ${Date.now() - t0} ms\n`);
    const secret = await core.readNamespacedSecret({ namespace: NS, name: b.status!.secretName! });
    const credentials = readBranchSecretData(secret.data)!;
    const podName = b.status!.branchName!.replaceAll("_", "-");
    expect(credentials).toMatchObject({ host: `${podName}.${NS}.svc`, port: "3306" });
    const pod = await core.readNamespacedPod({ namespace: NS, name: podName });
    expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: "MysqlBranchDatabase",
      uid: b.metadata.uid,
    });
    expect(pod.spec?.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 999 });
    expect(JSON.stringify(pod)).not.toContain(SOURCE_PASSWORD);
    const log = String(await core.readNamespacedPodLog({ namespace: NS, name: podName }));
    expect(log).toMatch(/switchyard: seeded sy_filtered_\w+ in \d+ s/);
    expect(log).not.toContain(SOURCE_PASSWORD);

    const account = `${credentials.user}@%`;
    // Only the filtered rows; the copy fired no trigger; the branch user sees its database only.
    expect(
      await onBranch(
        "filtered",
        "SELECT (SELECT count(*) FROM customers), (SELECT count(*) FROM customers WHERE tenant <> 1), " +
          "(SELECT count(*) FROM orders), (SELECT count(*) FROM audit), (SELECT count(*) FROM big_orders), " +
          "CURRENT_USER(), (SELECT GROUP_CONCAT(SCHEMA_NAME ORDER BY SCHEMA_NAME) FROM information_schema.SCHEMATA)",
      ),
    ).toBe(`10\t0\t0\t0\t0\t${account}\tinformation_schema,${credentials.database}`);
    expect((await onBranch("filtered", DEFINERS)).split("\n")).toEqual([account, account, account]);
    // The copied trigger runs as the branch user.
    expect(
      await onBranch(
        "filtered",
        "INSERT INTO customers (name, tenant) VALUES ('new', 1); SELECT who FROM audit",
      ),
    ).toBe(account);
    await onBranch("filtered", "DELETE FROM audit; DELETE FROM customers");
    expect(await onSource("SELECT (SELECT count(*) FROM customers), (SELECT count(*) FROM audit)")).toBe(
      "30\t0",
    );

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
  });

  it("all: every row, the view, the function and the foreign key; writes to the branch leave the source as it was", async () => {
    await create("everything", { mode: "all" });
    const b = await settled("everything");
    expect(b.status?.phase, JSON.stringify(b.status?.conditions)).toBe("Ready");
    expect(
      await onBranch(
        "everything",
        "SELECT (SELECT count(*) FROM customers), (SELECT count(*) FROM orders), (SELECT count(*) FROM big_orders), " +
          "order_count(1), (SELECT count(*) FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE()), " +
          "(SELECT count(*) FROM audit)",
      ),
    ).toBe("30\t90\t24\t3\t1\t0");
    await onBranch("everything", "DELETE FROM orders; UPDATE customers SET name = 'changed'");
    expect(
      await onSource(
        "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM customers WHERE name = 'changed')",
      ),
    ).toBe("90\t0");
  });

  it("a wrong source password: Failed with the seed's reason, the pod gone, no password anywhere", async () => {
    await create("wrong-password", { mode: "schema" }, "wrong-credentials");
    const b = await settled("wrong-password");
    const ready = b.status!.conditions!.find((c) => c.type === "Ready")!;
    expect(b.status?.phase).toBe("Failed");
    expect(ready.reason).toBe("SeedFailed");
    process.stderr.write(`[mysql-pod-branches] wrong password: ${ready.message}\n`);
    expect(ready.message).toMatch(/Access denied for user 'app'/);
    expect(ready.message).toMatch(/seeding .* failed while reading the source database's character set/);
    await eventually(
      "wrong-password's pod gone",
      async () => (await objectsOf("wrong-password")).pods === 0,
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const all = JSON.stringify(b) + logLines.join("");
    for (const secret of [SOURCE_PASSWORD, "not-the-password"]) expect(all).not.toContain(secret);
  });
});
