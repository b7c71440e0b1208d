// SQS queue splitting in one cluster, with the control plane as a user runs it
// (control-plane/src/main.ts, member mode, the process agent provisioner, `--sqs-splitting`
// against a real ElasticMQ) and ClusterSessions created directly (single-cluster mode: no
// parent, `spec.connectParams.sqsSplit`). Deployments hold their queue in a plain variable;
// a stand-in for their pods (sqs-traffic.ts) consumes whichever queue the template names now.
// Covered: a session is Ready only once its split is in force; steal routing; the variable
// restored exactly (a URL, and a queue name) with nothing left on SQS; FIFO groups and order;
// refusals (no QueueConsumer, a valueFrom variable, a control plane without
// `--sqs-splitting`); leftovers of a crash drained back by the next start, another cluster's
// untouched; the splitter metrics without a queue or session in any label.
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ListQueuesCommand,
  ListQueueTagsCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import {
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1EnvVar,
} from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  clusterSessionClient,
  queueConsumerClient,
  type ClusterSession,
  type SqsQueueSplit,
} from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { SPLIT_QUEUES_ANNOTATION } from "../../../control-plane/src/queues/consumer-env.js";
import { QUEUE_TAGS } from "../../../control-plane/src/queues/queue-refs.js";
import { QUEUE_SPLIT_FINALIZER } from "../../../control-plane/src/queues/queue-split-status.js";
import { tempQueueName } from "../../../control-plane/src/queues/temp-queues.js";
import { rolloutDone } from "../../../control-plane/src/queues/workload-rollout.js";
import { freePorts, startClusterSet, type ClusterSet } from "../../env/index.js";
import {
  ELASTICMQ_ACCOUNT_ID,
  ELASTICMQ_CREDENTIALS,
  sqsClientFor,
  startElasticmq,
  type ElasticmqServer,
} from "../../env/sqs/elasticmq-server.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";
import { eventually } from "../../support/poll.js";
import {
  consume,
  keepPodsRunning,
  produce,
  templateVariable,
  type Received,
  type Sent,
} from "../../e2e/queues/sqs-traffic.js";

const NS = "switchyard";
const CLUSTER = "east";
/** Every consuming Deployment's pods carry it: one stand-in kubelet plays them all. */
const CONSUMER_LABEL = "queue-split-test";
const TENANTS = ["dev-alice", "prod"] as const;
const ALICE: SqsQueueSplit = { queueId: "orders", messageFilter: { tenant: "^dev-alice$" } };
/** Every session this file makes: none may appear in a metric label. */
const SESSION_NAMES = ["alice-url", "alice-name", "alice-fifo", "no-consumer", "value-from", "no-sqs"];

let set: ClusterSet;
let kc: KubeConfig;
let server: ElasticmqServer;
let sqs: SQSClient;
let dir: string;
let cp: LaunchedProcess<LogLine> | undefined;
const stopping = new AbortController();
const background: Promise<void>[] = [];
/** What the Deployments' pods consumed (ids `<label>-<n>`, labels per case). */
const deployed: Received[] = [];
const original = {} as Record<"orders" | "named" | "fifo" | "refunds", string>;

const escaped = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** A queue URL on the test's ElasticMQ: `^<endpoint>/<account>/<name>$`. */
const urlPattern = (name: string) =>
  new RegExp(`^${escaped(server.endpoint)}/${ELASTICMQ_ACCOUNT_ID}/${name}$`);
const queueUrlOf = (value: string) =>
  /^https?:\/\//.test(value) ? value : `${server.endpoint}/${ELASTICMQ_ACCOUNT_ID}/${value}`;
const sessions = () => clusterSessionClient(kc);
const readyCondition = (s: ClusterSession) => s.status?.conditions?.find((c) => c.type === "Ready");

async function createQueue(name: string, attributes: Record<string, string> = {}): Promise<string> {
  return (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))).QueueUrl!;
}

async function tempQueuesLeft(): Promise<string[]> {
  return (await sqs.send(new ListQueuesCommand({ QueueNamePrefix: "sy-" }))).QueueUrls ?? [];
}

async function queueAttributes(url: string): Promise<Record<string, string>> {
  return (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["All"] })))
    .Attributes!;
}

async function createDeployment(name: string, env: V1EnvVar[]): Promise<void> {
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: "default",
    body: {
      metadata: { name },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name, [CONSUMER_LABEL]: "consumer" } },
          spec: { containers: [{ name: "app", image: "example.invalid/shop:1", env }] },
        },
      },
    },
  });
}

async function createQueueConsumer(name: string, deployment: string, envVar: string): Promise<void> {
  await queueConsumerClient(kc).create({
    metadata: { name, namespace: "default" },
    spec: { consumer: `deployment/${deployment}`, queues: [{ id: "orders", type: "SQS", envVar }] },
  });
}

/** The queue each Deployment's pods read now (set before every poll). */
const polling: Record<string, string> = {};

/** The Deployment's pods, played by a loop that reads the queue its template names now. */
function deployedConsumers(deployment: string, envVar: string): void {
  background.push(
    consume(
      sqs,
      async () =>
        (polling[deployment] = queueUrlOf(
          (await templateVariable(kc, "default", deployment, envVar)).value!,
        )),
      deployment,
      deployed,
      stopping.signal,
    ),
  );
}

/**
 * Waits until the Deployment's pods poll `url`: their poll of the queue before has ended (with
 * real pods, the rollout is done). Until then they still take messages from the original.
 */
async function consumersRead(deployment: string, url: string): Promise<void> {
  await eventually(`${deployment}'s pods to read ${url}`, () => polling[deployment] === url, {
    timeoutMs: 30_000,
    intervalMs: 50,
  });
}

async function openSession(name: string, target: string, sqsSplit: SqsQueueSplit[]): Promise<void> {
  const s = sessions();
  await s.create({
    metadata: { name, namespace: "default" },
    spec: {
      target,
      clientKeyHash: createHash("sha256").update(randomBytes(24)).digest("hex"),
      // Nothing renews a session created directly: long enough for the whole file.
      ttlSeconds: 3600,
      connectParams: { sqsSplit },
    },
  } as Parameters<typeof s.create>[0]);
}

/** Polls the session until its phase is `phase`; returns it and every state seen on the way. */
async function untilPhase(
  name: string,
  phase: "Ready" | "Failed",
): Promise<{ session: ClusterSession; seen: ClusterSession[] }> {
  const seen: ClusterSession[] = [];
  const session = await eventually(
    `session ${name} to be ${phase}`,
    async () => {
      const s = await sessions().get({ namespace: "default", name });
      if (!s) return undefined;
      seen.push(s);
      if (s.status?.phase !== phase)
        throw new Error(
          `${s.status?.phase}: ${JSON.stringify(readyCondition(s))} ${JSON.stringify(s.status?.queues)}`,
        );
      return s;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  return { session, seen };
}

async function endSession(name: string): Promise<void> {
  await sessions().delete({ namespace: "default", name });
  await eventually(
    `session ${name} gone (finalizers released)`,
    async () => {
      const s = await sessions().get({ namespace: "default", name });
      if (s) throw new Error(`finalizers ${JSON.stringify(s.metadata.finalizers)}`);
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 100 },
  );
}

async function noTempQueueLeft(): Promise<void> {
  await eventually(
    "no sy- queue left",
    async () => {
      const left = await tempQueuesLeft();
      if (left.length > 0) throw new Error(left.join(", "));
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

/** Receives (and deletes) from `url` until `want` messages came, then one more empty poll. */
async function receiveAll(url: string, want: number, timeoutMs = 30_000): Promise<Message[]> {
  const got: Message[] = [];
  const deadline = Date.now() + timeoutMs;
  for (let emptyAfterAll = false; !emptyAfterAll;) {
    if (Date.now() > deadline) throw new Error(`${got.length} of ${want} messages at ${url}`);
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["All"],
      }),
    );
    const msgs = out.Messages ?? [];
    if (msgs.length === 0) {
      emptyAfterAll = got.length >= want;
      continue;
    }
    got.push(...msgs);
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
  }
  return got;
}

const numberOf = (m: Message) => (JSON.parse(m.Body!) as { n: number }).n;

/** Fails unless every id of `want` is in `got` exactly once and nothing else of `label` is. */
function exactlyOnce(got: readonly Received[], label: string, want: readonly string[]): void {
  const mine = got.filter((r) => r.id.startsWith(`${label}-`)).map((r) => r.id);
  expect([...mine].sort()).toEqual([...want].sort());
}

function startControlPlane(splitting: boolean, routerPort: number): Promise<LaunchedProcess<LogLine>> {
  const east = set.get(CLUSTER);
  return launch({
    name: splitting ? "control-plane" : "control-plane-without-sqs",
    ...tsx("control-plane/src/main.ts", [
      "--mode=member",
      `--cluster-name=${CLUSTER}`,
      `--kubeconfig=${east.adminKubeconfigPath}`,
      `--namespace=${NS}`,
      "--identity=cp-0",
      "--grpc-listen=127.0.0.1:0",
      "--metrics-listen=127.0.0.1:0",
      "--grpc-plaintext",
      `--router-service-account=${NS}/switchyard-router`,
      `--router-endpoint=ws://127.0.0.1:${routerPort}`,
      "--agent-provisioner=process",
      `--agent-kubeconfig=${east.adminKubeconfigPath}`,
      `--agent-state-dir=${join(dir, "agents")}`,
      "--leader-lease-duration-seconds=3",
      "--leader-renew-deadline-seconds=2",
      "--leader-retry-period-seconds=0.5",
      ...(splitting
        ? ["--sqs-splitting", `--sqs-region=${server.region}`, `--sqs-endpoint=${server.endpoint}`]
        : []),
    ]),
    // The SDK's default chain reads these (ElasticMQ checks no signature).
    env: {
      AWS_ACCESS_KEY_ID: ELASTICMQ_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: ELASTICMQ_CREDENTIALS.secretAccessKey,
    },
    ready: (p) => p.logs.find((l) => l.msg === "control plane started"),
    readyTimeoutMs: 60_000,
    readyIntervalMs: 200,
  });
}

let routerPort = 0;
const restartControlPlane = async (splitting: boolean) => {
  await cp?.stop(10_000);
  cp = undefined;
  cp = await startControlPlane(splitting, routerPort);
};

/** Kills the agents the process provisioner recorded (a failed case may leave one running). */
function killRecordedAgents(): void {
  const agents = join(dir, "agents");
  if (!existsSync(agents)) return;
  for (const f of readdirSync(agents).filter((n) => n.endsWith(".json"))) {
    try {
      const { pid } = JSON.parse(readFileSync(join(agents, f), "utf8")) as { pid: number };
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone already */
    }
  }
}

beforeAll(async () => {
  [set, server] = await Promise.all([
    startClusterSet({ clusters: [CLUSTER] }),
    startElasticmq({ name: "queue-split-member" }),
  ]);
  sqs = sqsClientFor(server);
  dir = mkdtempSync(join(tmpdir(), "switchyard-queue-split-member-"));
  kc = set.get(CLUSTER).kubeConfig();
  await installCrds(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
  // Made by the first case, once its session was seen waiting for it.
  original.orders = queueUrlOf("orders");
  original.named = await createQueue("orders-named");
  original.fifo = await createQueue("orders.fifo", {
    FifoQueue: "true",
    ContentBasedDeduplication: "false",
  });
  original.refunds = await createQueue("refunds");
  await createDeployment("shop", [{ name: "ORDERS_QUEUE_URL", value: original.orders }]);
  await createDeployment("named", [{ name: "ORDERS_QUEUE", value: "orders-named" }]);
  await createDeployment("fifo", [{ name: "ORDERS_QUEUE_URL", value: original.fifo }]);
  await createDeployment("vault", [
    { name: "ORDERS_QUEUE_URL", valueFrom: { configMapKeyRef: { name: "queues", key: "orders" } } },
  ]);
  background.push(keepPodsRunning(kc, "default", `${CONSUMER_LABEL}=consumer`, stopping.signal));
  deployedConsumers("shop", "ORDERS_QUEUE_URL");
  deployedConsumers("named", "ORDERS_QUEUE");
  deployedConsumers("fifo", "ORDERS_QUEUE_URL");
  routerPort = (await freePorts(1))[0]!;
  cp = await startControlPlane(true, routerPort);
}, 180_000);

afterAll(async () => {
  stopping.abort();
  await Promise.allSettled(background);
  await cp?.stop(10_000);
  if (dir) killRecordedAgents();
  await set?.stop();
  sqs?.destroy();
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// A failed case leaves its sessions: end them so the next case starts from no split.
afterEach(async () => {
  const left = (await sessions().list({ namespace: "default" })).items.map((s) => s.metadata.name!);
  await Promise.allSettled(left.map((name) => endSession(name)));
}, 90_000);

describe("queue splitting by the member control plane (single-cluster sessions)", () => {
  it("steals a session's messages once the split is in force, and restores the Deployment exactly at the end", async () => {
    await createQueueConsumer("shop-orders", "shop", "ORDERS_QUEUE_URL");
    await openSession("alice-url", "deployment/shop", [ALICE]);
    // The queue does not exist yet, so the split cannot be made: agents serve, but the session
    // is held back until the split is in force.
    const held = await eventually(
      "the session held back while its split cannot be made",
      async () => {
        const s = await sessions().get({ namespace: "default", name: "alice-url" });
        const ready = s && readyCondition(s);
        if (!s || (s.status?.agents ?? 0) < 1 || ready?.reason !== "QueueSplitWaiting")
          throw new Error(`${s?.status?.phase} ${s?.status?.agents} ${JSON.stringify(ready)}`);
        return s;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(held.status?.phase).toBe("Pending");
    await new Promise((r) => setTimeout(r, 2000));
    expect((await sessions().get({ namespace: "default", name: "alice-url" }))?.status?.phase).toBe(
      "Pending",
    );
    expect(await createQueue("orders", { VisibilityTimeout: "20" })).toBe(original.orders);
    const { session, seen } = await untilPhase("alice-url", "Ready");
    // Never Ready while the split was not in force.
    const early = seen.filter(
      (s) => s.status?.phase === "Ready" && s.status.queues?.[0]?.phase !== "Splitting",
    );
    expect(early.map((s) => s.status?.queues)).toEqual([]);
    const q = session.status!.queues![0]!;
    expect(q).toMatchObject({ queueId: "orders", phase: "Splitting", envVar: "ORDERS_QUEUE_URL" });
    expect(q.outputQueueUrl).toMatch(urlPattern("sy-o-[0-9a-f]{8}-orders"));
    expect(q.localValue).toBe(q.outputQueueUrl);
    expect(await tempQueuesLeft()).toContain(q.outputQueueUrl);
    expect(session.metadata.finalizers).toContain(QUEUE_SPLIT_FINALIZER);

    // The split is in force when Ready: the consumers' variable names their temporary queue.
    const t = await templateVariable(kc, "default", "shop", "ORDERS_QUEUE_URL");
    expect(t.value).toMatch(urlPattern("sy-t-[0-9a-f]{8}-orders"));
    expect(JSON.parse(t.annotations[SPLIT_QUEUES_ANNOTATION] ?? "{}")).toEqual({
      orders: { container: "app", envVar: "ORDERS_QUEUE_URL", original: original.orders, temp: t.value },
    });
    expect((await queueAttributes(t.value!)).VisibilityTimeout).toBe("20");

    await consumersRead("shop", t.value!);
    const sent: Sent[] = [];
    await produce(sqs, original.orders, "url", 0, 100, TENANTS, 1000, sent);
    const local: Received[] = [];
    const reading = new AbortController();
    const localConsumer = consume(sqs, () => q.outputQueueUrl!, "session", local, reading.signal);
    const alice = sent.filter((m) => m.tenant === "dev-alice").map((m) => m.id);
    const others = sent.filter((m) => m.tenant !== "dev-alice").map((m) => m.id);
    await eventually(
      "alice's messages at the output queue, the others at the deployed consumers",
      () => {
        const n = local.length + deployed.filter((r) => r.id.startsWith("url-")).length;
        if (n < sent.length) throw new Error(`${n} of ${sent.length}`);
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // A moment's grace for a duplicate to show.
    await new Promise((r) => setTimeout(r, 1500));
    reading.abort();
    await localConsumer;
    exactlyOnce(local, "url", alice);
    exactlyOnce(deployed, "url", others);

    await endSession("alice-url");
    // Restored in the pass that released the finalizer: exactly the original, no annotation.
    const restored = await templateVariable(kc, "default", "shop", "ORDERS_QUEUE_URL");
    expect(restored.value).toBe(original.orders);
    expect(restored.annotations[SPLIT_QUEUES_ANNOTATION]).toBeUndefined();
    expect(await tempQueuesLeft()).not.toContain(q.outputQueueUrl);
    await noTempQueueLeft();
  }, 120_000);

  it("gives a variable holding a queue name a name: the output's localValue, the temporary queue, the restore", async () => {
    await createQueueConsumer("named-orders", "named", "ORDERS_QUEUE");
    await openSession("alice-name", "deployment/named", [ALICE]);
    const { session } = await untilPhase("alice-name", "Ready");
    const q = session.status!.queues![0]!;
    expect(q.outputQueueUrl).toMatch(urlPattern("sy-o-[0-9a-f]{8}-orders-named"));
    expect(q.localValue).toBe(q.outputQueueUrl!.split("/").pop());
    const t = await templateVariable(kc, "default", "named", "ORDERS_QUEUE");
    expect(t.value).toMatch(/^sy-t-[0-9a-f]{8}-orders-named$/);
    expect(JSON.parse(t.annotations[SPLIT_QUEUES_ANNOTATION] ?? "{}")).toMatchObject({
      orders: { original: "orders-named", temp: t.value },
    });

    await consumersRead("named", queueUrlOf(t.value!));
    const sent: Sent[] = [];
    await produce(sqs, original.named, "named", 0, 20, TENANTS, 1000, sent);
    const local = await receiveAll(q.outputQueueUrl!, 10);
    expect(local.map(numberOf).sort((a, b) => a - b)).toEqual(
      sent.filter((m) => m.tenant === "dev-alice").map((m) => Number(m.id.split("-")[1])),
    );
    await eventually(
      "the others at the deployed consumers",
      () => deployed.filter((r) => r.id.startsWith("named-")).length >= 10,
      { timeoutMs: 30_000 },
    );
    exactlyOnce(
      deployed,
      "named",
      sent.filter((m) => m.tenant !== "dev-alice").map((m) => m.id),
    );

    await endSession("alice-name");
    const restored = await templateVariable(kc, "default", "named", "ORDERS_QUEUE");
    expect(restored.value).toBe("orders-named");
    expect(restored.annotations[SPLIT_QUEUES_ANNOTATION]).toBeUndefined();
    await noTempQueueLeft();
  }, 120_000);

  it("counts what it read and forwarded by destination, with no queue or session in any label", async () => {
    const text = await (await fetch(`http://127.0.0.1:${cp!.ready.metricsPort as number}/metrics`)).text();
    const samples = text
      .split("\n")
      .filter((l) => l !== "" && !l.startsWith("#"))
      .map((l) => {
        const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(l)!;
        const labels = Object.fromEntries(
          [...(m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]),
        );
        return { name: m[1]!, labels, value: Number(m[3]) };
      });
    const value = (name: string, labels: Record<string, string> = {}) =>
      samples
        .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .reduce((sum, s) => sum + s.value, 0);
    // 120 messages were split above: 60 to the sessions, 60 to the deployed consumers.
    expect(value("switchyard_queue_messages_read_total")).toBeGreaterThanOrEqual(120);
    expect(
      value("switchyard_queue_messages_forwarded_total", { destination: "session" }),
    ).toBeGreaterThanOrEqual(60);
    expect(
      value("switchyard_queue_messages_forwarded_total", { destination: "target" }),
    ).toBeGreaterThanOrEqual(60);
    const leaks = samples.flatMap((s) =>
      Object.entries(s.labels)
        .filter(
          ([, v]) =>
            v.includes(`127.0.0.1:${server.port}`) ||
            /sy-[ot]-|orders|refunds/.test(v) ||
            SESSION_NAMES.some((n) => v.includes(n)),
        )
        .map(([k, v]) => `${s.name}{${k}="${v}"}`),
    );
    expect(leaks).toEqual([]);
  });

  it("splits a FIFO queue through FIFO queues, keeping each message's group and the order within it", async () => {
    await createQueueConsumer("fifo-orders", "fifo", "ORDERS_QUEUE_URL");
    await openSession("alice-fifo", "deployment/fifo", [ALICE]);
    const { session } = await untilPhase("alice-fifo", "Ready");
    const q = session.status!.queues![0]!;
    expect(q.outputQueueUrl).toMatch(urlPattern("sy-o-[0-9a-f]{8}-orders\\.fifo"));
    const t = await templateVariable(kc, "default", "fifo", "ORDERS_QUEUE_URL");
    expect(t.value).toMatch(urlPattern("sy-t-[0-9a-f]{8}-orders\\.fifo"));
    for (const url of [q.outputQueueUrl!, t.value!])
      expect(await queueAttributes(url)).toMatchObject({
        FifoQueue: "true",
        ContentBasedDeduplication: "false",
      });
    await consumersRead("fifo", t.value!);

    // 90 messages in three groups, sent in order; half of each group is alice's.
    const group = (n: number) => `g${n % 3}`;
    for (let i = 0; i < 90; i += 10) {
      const out = await sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: original.fifo,
          Entries: Array.from({ length: 10 }, (_, k) => i + k).map((n) => ({
            Id: String(n),
            MessageBody: JSON.stringify({ n, cluster: "fifo" }),
            MessageGroupId: group(n),
            MessageDeduplicationId: `d${n}`,
            MessageAttributes: { tenant: { DataType: "String", StringValue: TENANTS[n % 2]! } },
          })),
        }),
      );
      expect(out.Failed ?? []).toEqual([]);
    }
    const local = await receiveAll(q.outputQueueUrl!, 45);
    const numbers = local.map(numberOf);
    expect([...numbers].sort((a, b) => a - b)).toEqual(Array.from({ length: 45 }, (_, k) => 2 * k));
    for (const m of local) expect(m.Attributes?.MessageGroupId).toBe(group(numberOf(m)));
    for (const g of ["g0", "g1", "g2"]) {
      const inGroup = local.filter((m) => m.Attributes?.MessageGroupId === g).map(numberOf);
      expect(inGroup, `group ${g} in order`).toEqual([...inGroup].sort((a, b) => a - b));
    }
    await eventually(
      "the others at the deployed consumers",
      () => deployed.filter((r) => r.id.startsWith("fifo-")).length >= 45,
      { timeoutMs: 30_000 },
    );
    exactlyOnce(
      deployed,
      "fifo",
      Array.from({ length: 45 }, (_, k) => `fifo-${2 * k + 1}`),
    );

    await endSession("alice-fifo");
    expect((await templateVariable(kc, "default", "fifo", "ORDERS_QUEUE_URL")).value).toBe(original.fifo);
    await noTempQueueLeft();
  }, 120_000);

  it("fails a session, naming the fix, when no QueueConsumer names its queue or the variable is not plain", async () => {
    await createQueueConsumer("vault-orders", "vault", "ORDERS_QUEUE_URL");
    const shopBefore = await templateVariable(kc, "default", "shop", "ORDERS_QUEUE_URL");
    const vaultBefore = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ namespace: "default", name: "vault" });
    await openSession("no-consumer", "deployment/shop", [{ ...ALICE, queueId: "payments" }]);
    await openSession("value-from", "deployment/vault", [ALICE]);
    const [noConsumer, valueFrom] = await Promise.all([
      untilPhase("no-consumer", "Failed"),
      untilPhase("value-from", "Failed"),
    ]);

    expect(noConsumer.session.status?.queues?.[0]).toMatchObject({
      queueId: "payments",
      phase: "Failed",
      reason: "QueueNotConsumed",
    });
    expect(readyCondition(noConsumer.session)).toMatchObject({ status: "False", reason: "QueueSplitFailed" });
    expect(readyCondition(noConsumer.session)?.message).toMatch(
      /queue payments: no QueueConsumer in namespace default names queue payments for deployment\/shop: create one/,
    );

    expect(valueFrom.session.status?.queues?.[0]).toMatchObject({
      phase: "Failed",
      reason: "QueueVariableNotPlain",
    });
    expect(readyCondition(valueFrom.session)).toMatchObject({ status: "False", reason: "QueueSplitFailed" });
    expect(readyCondition(valueFrom.session)?.message).toMatch(
      /sets ORDERS_QUEUE_URL with valueFrom .*needs the queue's URL or name as a plain value/,
    );

    // Nothing was made or changed for either.
    expect(await tempQueuesLeft()).toEqual([]);
    expect(await templateVariable(kc, "default", "shop", "ORDERS_QUEUE_URL")).toEqual(shopBefore);
    const vaultAfter = await kc
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ namespace: "default", name: "vault" });
    expect(vaultAfter.metadata?.generation).toBe(vaultBefore.metadata?.generation);
    expect(vaultAfter.metadata?.annotations?.[SPLIT_QUEUES_ANNOTATION]).toBeUndefined();
    await Promise.all([endSession("no-consumer"), endSession("value-from")]);
  }, 120_000);

  it("fails a session that splits a queue when the control plane runs without --sqs-splitting", async () => {
    await restartControlPlane(false);
    expect(cp!.logs.some((l) => l.msg === "SQS queue splitting enabled")).toBe(false);
    await openSession("no-sqs", "deployment/shop", [ALICE]);
    const { session } = await untilPhase("no-sqs", "Failed");
    expect(readyCondition(session)).toMatchObject({ status: "False", reason: "QueueSplittingDisabled" });
    expect(readyCondition(session)?.message).toContain("queues.sqs.enabled=true");
    expect(session.metadata.finalizers ?? []).not.toContain(QUEUE_SPLIT_FINALIZER);
    expect((await templateVariable(kc, "default", "shop", "ORDERS_QUEUE_URL")).value).toBe(original.orders);
    expect(await tempQueuesLeft()).toEqual([]);
    await endSession("no-sqs");
    await cp!.stop(10_000);
    cp = undefined;
  }, 120_000);

  it("holds a rollout unfinished while a pod of the workload is still terminating (its grace period reads the old queue)", async () => {
    const ref = { kind: "deployment", namespace: "default", name: "shop" } as const;
    await eventually("shop's rollout done", () => rolloutDone(kc, ref), {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    // A pod of the workload whose deletion started but that still runs: a finalizer holds it
    // the way a kubelet's grace period holds a real one (status stops counting it either way).
    const core = kc.makeApiClient(CoreV1Api);
    const name = "shop-old-terminating";
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name, labels: { app: "shop" }, finalizers: ["switchyard.test/hold"] },
        spec: { containers: [{ name: "app", image: "example.invalid/shop:1" }] },
      },
    });
    try {
      await core.deleteNamespacedPod({ namespace: "default", name });
      expect(await rolloutDone(kc, ref)).toBe(false);
      // A terminating pod of another workload (labels the selector does not match) holds nothing.
      await core.patchNamespacedPod(
        { namespace: "default", name, body: { metadata: { labels: { app: "other" } } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      expect(await rolloutDone(kc, ref)).toBe(true);
    } finally {
      await core.patchNamespacedPod(
        { namespace: "default", name, body: { metadata: { finalizers: null } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    }
  });

  it("drains the output queue of a session gone while it was stopped back into its original, and leaves another cluster's alone", async () => {
    // As a crash leaves them: the control plane is down, the session never existed on the API server.
    await cp?.stop(10_000);
    cp = undefined;
    const tags = (owner: string) => ({
      [QUEUE_TAGS.owner]: owner,
      [QUEUE_TAGS.role]: "output",
      [QUEUE_TAGS.original]: original.refunds,
      [QUEUE_TAGS.session]: "default:vanished",
    });
    const mkQueue = async (owner: string) =>
      (
        await sqs.send(
          new CreateQueueCommand({ QueueName: tempQueueName("o", "refunds"), tags: tags(owner) }),
        )
      ).QueueUrl!;
    const ours = await mkQueue(CLUSTER);
    const foreign = await mkQueue("west");
    const sent: Sent[] = [];
    await produce(sqs, ours, "left", 0, 50, TENANTS, 1000, sent);
    await produce(sqs, foreign, "foreign", 0, 5, TENANTS, 1000, []);

    cp = await startControlPlane(true, routerPort);
    await eventually(
      "the leftover output queue deleted",
      async () => !(await tempQueuesLeft()).includes(ours),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const back = await receiveAll(original.refunds, 50);
    expect(back.map(numberOf).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, n) => n));
    for (const m of back) {
      const n = numberOf(m);
      expect(m.MessageAttributes?.tenant).toEqual({ DataType: "String", StringValue: TENANTS[n % 2] });
      expect(m.MessageAttributes?.seq).toEqual({ DataType: "Number", StringValue: String(n) });
    }
    expect(cp.logs.some((l) => l.msg === "output queue of an ended session drained back and deleted")).toBe(
      true,
    );

    // Another cluster's queue: still there, its messages and tags as they were.
    expect(await tempQueuesLeft()).toEqual([foreign]);
    expect((await queueAttributes(foreign)).ApproximateNumberOfMessages).toBe("5");
    expect((await sqs.send(new ListQueueTagsCommand({ QueueUrl: foreign }))).Tags).toEqual(tags("west"));
    await sqs.send(new DeleteQueueCommand({ QueueUrl: foreign }));
  }, 120_000);
});
