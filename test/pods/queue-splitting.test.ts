// SQS queue splitting on real pods: the pod stack with an ElasticMQ per workload cluster on its
// node's host address (pod-stack.ts `sqs`), the members' control planes splitting from their
// pods as the chart configures them (queues.sqs), and the demo Deployment of east and west —
// two replicas on a real kubelet — consuming queue `orders` of its cluster through
// ORDERS_QUEUE_URL (fixtures/queue-consumer.mjs). Every pod reports each batch it handled, and
// the queue it read from its start to its exit, to a ledger on this machine (ledger.ts), so every
// message can be accounted for and the rollouts seen as they happened: old and new pods
// overlapping, terminating pods still reading through their grace period. `switchyard exec`
// runs the developer's consumer (the same consumer code) on the output queue the session gets.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { CreateQueueCommand, ListQueuesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { SPLIT_QUEUES_ANNOTATION } from "../../control-plane/src/queues/consumer-env.js";
import { queueConsumerClient } from "../../proto/api/v1alpha1/index.js";
import { ELASTICMQ_ACCOUNT_ID, sqsClientFor } from "../env/sqs/elasticmq-server.js";
import { freePorts } from "../env/ports.js";
import { podLogs } from "../env/stack/pod-problems.js";
import { startPodStack, type PodStack } from "../env/stack/pod-stack.js";
import { launch, repoRoot, tsx, type LaunchedProcess } from "../support/launch.js";
import { eventually } from "../support/poll.js";
import { produce, templateVariable, type Sent } from "../e2e/queues/sqs-traffic.js";
import { startLedger, type Ledger } from "./ledger.js";
import { watchTempQueues, type TempQueueWatch } from "./temp-queue-watch.js";

const CLUSTERS = ["east", "west"] as const;
type Cluster = (typeof CLUSTERS)[number];
const QUEUE = "orders";
const CONSUMER = join(repoRoot, "test/env/images/fixtures/queue-consumer.mjs");

let stack: PodStack;
let ledger: Ledger;
let watch: TempQueueWatch;
let dir: string;
const sqs = {} as Record<Cluster, { client: SQSClient; original: string }>;
const running: LaunchedProcess<unknown>[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-pod-queues-"));
  const ledgerPort = (await freePorts(1))[0]!;
  stack = await startPodStack({
    sqs: true,
    primaryRouters: 1,
    primaryControlPlanes: 1,
    demoEnvFor: (c) => ({
      ORDERS_QUEUE_URL: `${c.sqsEndpoint}/${ELASTICMQ_ACCOUNT_ID}/${QUEUE}`,
      LEDGER_URL: `http://${c.hostIp}:${ledgerPort}`,
    }),
    onPhase: (phase, ms) => console.log(`[pod queues] ${phase} at ${(ms / 1000).toFixed(1)} s`),
  });
  ledger = await startLedger(
    CLUSTERS.map((c) => stack.workloads[c]!.hostIp),
    ledgerPort,
  );
  for (const c of CLUSTERS) {
    const client = sqsClientFor(stack.workloads[c]!.sqs!);
    const out = await client.send(
      new CreateQueueCommand({
        QueueName: QUEUE,
        Attributes: { VisibilityTimeout: "20" },
        tags: { team: "shop" },
      }),
    );
    sqs[c] = { client, original: out.QueueUrl! };
    await queueConsumerClient(stack.set.get(c).kubeConfig()).create({
      metadata: { name: "demo-orders", namespace: "default" },
      spec: { consumer: "deployment/demo", queues: [{ id: QUEUE, type: "SQS", envVar: "ORDERS_QUEUE_URL" }] },
    });
  }
  watch = watchTempQueues(CLUSTERS.map((c) => sqs[c].client));
  // Both replicas of each cluster read the original queue.
  await eventually(
    "every demo pod to read its cluster's queue",
    () => CLUSTERS.every((c) => ledger.liveReaders(sqs[c].original).length === 2),
    { timeoutMs: 60_000, intervalMs: 200 },
  );
}, 600_000);

afterEach(async () => {
  for (const p of running.splice(0)) await p.stop(0, "SIGKILL");
});

afterAll(async () => {
  await watch?.stop();
  for (const c of CLUSTERS) sqs[c]?.client.destroy();
  await ledger?.close();
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 180_000);

interface LocalConsumer {
  name: string;
  proc: LaunchedProcess;
  stop(): Promise<number | string>;
}

/**
 * `switchyard exec --config <split> -- node <the consumer>` as the developer: the consumer
 * reads ORDERS_QUEUE_URL as the session gives it and reports to the ledger as `local-<name>`.
 */
async function localConsumer(name: string, split: object): Promise<LocalConsumer> {
  const config = join(dir, `${name}.json`);
  writeFileSync(config, JSON.stringify({ queues: [split] }));
  const stopFile = join(dir, `${name}.stop`);
  const runner = join(dir, `${name}.mjs`);
  writeFileSync(
    runner,
    [
      `import { existsSync, writeFileSync } from "node:fs";`,
      `import { startConsumer } from ${JSON.stringify(pathToFileURL(CONSUMER).href)};`,
      `const c = startConsumer({ queueUrl: process.env.ORDERS_QUEUE_URL, ledgerUrl: process.env.LEDGER_URL, pod: "local-${name}", cluster: "local" });`,
      `const t = setInterval(() => { if (existsSync(${JSON.stringify(stopFile)})) { clearInterval(t); c.stop(0).then(() => process.exit(0)); } }, 100);`,
    ].join("\n"),
  );
  const proc = await launch({
    name: `switchyard-exec-${name}`,
    ...tsx("cli/src/main.ts", [
      "exec",
      ...stack.developerCliArgs,
      "--config",
      config,
      "--",
      process.execPath,
      runner,
    ]),
  });
  running.push(proc);
  return {
    name,
    proc,
    stop: async () => {
      writeFileSync(stopFile, "");
      return proc.exited;
    },
  };
}

/** Runs `fn`; on failure adds the CLI's output and the members' Switchyard logs to the error. */
async function explained<T>(local: LocalConsumer | undefined, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const logs: string[] = [];
    for (const c of CLUSTERS)
      logs.push(
        await podLogs(stack.set.get(c), "switchyard", "app.kubernetes.io/component=control-plane").catch(
          (x: unknown) => `(no logs of ${c}: ${String(x)})`,
        ),
      );
    (err as Error).message +=
      `${local ? `\nCLI output:\n${local.proc.output()}` : ""}\n${await stack.describeProblems()}\n${logs.join("\n")}`;
    throw err;
  }
}

const sendBoth = (sent: Sent[], tenants: readonly string[], from: number, count: number, rate: number) =>
  Promise.all(
    CLUSTERS.map((c) => produce(sqs[c].client, sqs[c].original, c, from, count, tenants, rate, sent)),
  );

/** Waits until local `name` has started on an output queue of east; returns that queue. */
async function localQueue(local: LocalConsumer): Promise<string> {
  return eventually(
    `${local.name}'s consumer to start`,
    () => {
      if (local.proc.hasExited()) throw new Error(`exec ended early:\n${local.proc.output()}`);
      return ledger.pods().find((p) => p.pod === `local-${local.name}`)?.queue;
    },
    { timeoutMs: 180_000, intervalMs: 200 },
  );
}

/** Every sent id handled exactly once by the readers `who` accepts. */
async function handledOnce(sent: readonly Sent[], who: (pod: string) => boolean): Promise<void> {
  await eventually(
    "every message handled",
    () => {
      const missing = sent.filter((s) => ledger.handled(s.id).filter((h) => who(h.pod)).length === 0);
      if (missing.length > 0)
        throw new Error(
          `${missing.length} of ${sent.length} not handled, e.g. ${missing.slice(0, 3).map((m) => m.id)}`,
        );
      return true;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
  const twice = sent.filter((s) => ledger.handled(s.id).filter((h) => who(h.pod)).length > 1);
  expect(
    twice.map((s) => `${s.id}: ${ledger.handled(s.id).map((h) => `${h.pod} on ${h.queue}`)}`),
    "messages handled twice",
  ).toEqual([]);
}

/** Both Deployments read their own queue again, exactly as before, and no `sy-` queue is left. */
async function restored(): Promise<void> {
  for (const c of CLUSTERS) {
    await eventually(
      `${c}'s Deployment restored`,
      async () => {
        const t = await templateVariable(
          stack.set.get(c).kubeConfig(),
          "default",
          "demo",
          "ORDERS_QUEUE_URL",
        );
        if (t.value !== sqs[c].original) throw new Error(`ORDERS_QUEUE_URL is ${t.value}`);
        if (t.annotations[SPLIT_QUEUES_ANNOTATION]) throw new Error("the split annotation is still there");
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await eventually(
      `${c}'s pods to read the original queue only`,
      () => {
        const live = ledger.pods().filter((p) => p.cluster === c && p.exitAt === undefined);
        return live.length === 2 && live.every((p) => p.queue === sqs[c].original);
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
  }
  await eventually(
    "no temporary queue left",
    async () => {
      const left: string[] = [];
      for (const c of CLUSTERS)
        left.push(
          ...((await sqs[c].client.send(new ListQueuesCommand({ QueueNamePrefix: "sy-" }))).QueueUrls ?? []),
        );
      if (left.length > 0) throw new Error(left.join(", "));
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}

/**
 * What the rollouts of `cluster` looked like on the ledger: a pod of the temporary queue and one
 * of the original ran at once (the rollout overlapped them), and every temporary queue was
 * deleted only after the last pod reading it had exited (none was drained under a terminating pod).
 */
function rolloutsSeen(cluster: Cluster, since: number): void {
  const pods = ledger.pods().filter((p) => p.cluster === cluster && (p.exitAt ?? Infinity) > since);
  const temps = [...new Set(pods.map((p) => p.queue).filter((q) => /\/sy-t-/.test(q)))];
  expect(temps, `${cluster}'s pods reading a temporary queue`).toHaveLength(1);
  const onTemp = pods.filter((p) => p.queue === temps[0]);
  const onOriginal = pods.filter((p) => p.queue === sqs[cluster].original);
  const overlapped = onTemp.some((t) =>
    onOriginal.some((o) => o.startedAt < (t.exitAt ?? Infinity) && t.startedAt < (o.exitAt ?? Infinity)),
  );
  expect(overlapped, `a pod of ${temps[0]} and one of the original ran at once in ${cluster}`).toBe(true);
  const deletedAt = watch.deletedAt(temps[0]!);
  expect(deletedAt, `${temps[0]} deleted`).toBeDefined();
  for (const p of onTemp) {
    expect(p.exitAt, `${p.pod} (on ${temps[0]}) exited`).toBeDefined();
    expect(p.exitAt!, `${p.pod} exited before ${temps[0]} was deleted`).toBeLessThan(deletedAt!);
  }
}

describe("SQS queue splitting on real pods", () => {
  it("steals a developer's messages while a session starts and ends, through overlapping rollouts, losing and duplicating none", async () => {
    const tenants = ["dev-alice", "prod", "dev-bob"];
    const since = Date.now();
    const sent: Sent[] = [];
    // Messages flow before and while the session starts (its rollouts overlap old and new pods).
    const before = sendBoth(sent, tenants, 0, 1500, 100);
    const alice = await localConsumer("alice", { id: QUEUE, messageFilter: { tenant: "^dev-alice$" } });
    await explained(alice, async () => {
      const output = await localQueue(alice);
      expect(output).toMatch(
        new RegExp(
          `^${stack.workloads.east!.sqs!.endpoint}/${ELASTICMQ_ACCOUNT_ID}/sy-o-[0-9a-f]+-${QUEUE}$`,
        ),
      );
      await before;
      // The split in force in both clusters: every dev-alice message of this window is alice's.
      const windowStart = Date.now();
      await sendBoth(sent, tenants, 1500, 1000, 200);
      const inWindow = sent.filter((s) => s.at > windowStart);
      // More while the session ends: its rollouts put the pods back on the original queue.
      const after = sendBoth(sent, tenants, 2500, 1000, 100);
      await eventually(
        "alice to handle every dev-alice message of the window",
        () =>
          inWindow
            .filter((s) => s.tenant === "dev-alice")
            .every((s) => ledger.handled(s.id).some((h) => h.pod === "local-alice")),
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      expect(await alice.stop()).toBe(0);
      await after;
      await restored();
      expect(sent).toHaveLength(7000);
      await handledOnce(sent, () => true);
      const atAlice = sent.filter((s) => ledger.handled(s.id).some((h) => h.pod === "local-alice"));
      expect(
        atAlice.filter((s) => s.tenant !== "dev-alice"),
        "others' messages at alice",
      ).toEqual([]);
      expect(new Set(atAlice.map((s) => s.cluster)), "both clusters' messages at alice").toEqual(
        new Set(CLUSTERS),
      );
      expect(
        inWindow.filter(
          (s) => s.tenant === "dev-alice" && ledger.handled(s.id).some((h) => h.pod !== "local-alice"),
        ),
        "dev-alice messages of the window handled by the pods",
      ).toEqual([]);
      for (const c of CLUSTERS) rolloutsSeen(c, since);
    });
  }, 600_000);

  it("mirrors copies of a developer's messages while the pods still handle every message once", async () => {
    const tenants = ["dev-erin", "prod"];
    const since = Date.now();
    const sent: Sent[] = [];
    const erin = await localConsumer("erin", {
      id: QUEUE,
      messageFilter: { tenant: "^dev-erin$" },
      mode: "mirror",
    });
    await explained(erin, async () => {
      await localQueue(erin);
      const windowStart = Date.now();
      await sendBoth(sent, tenants, 10_000, 1000, 200);
      const wanted = sent.filter((s) => s.tenant === "dev-erin" && s.at > windowStart);
      await eventually(
        "erin's copies",
        () => wanted.every((s) => ledger.handled(s.id).some((h) => h.pod === "local-erin")),
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      expect(await erin.stop()).toBe(0);
      await restored();
      // Mirror: the pods handle every message, each once; erin had copies of hers only.
      await handledOnce(sent, (pod) => !pod.startsWith("local-"));
      const atErin = sent.filter((s) => ledger.handled(s.id).some((h) => h.pod === "local-erin"));
      expect(
        atErin.filter((s) => s.tenant !== "dev-erin"),
        "others' messages at erin",
      ).toEqual([]);
      for (const c of CLUSTERS) rolloutsSeen(c, since);
    });
  }, 600_000);
});
