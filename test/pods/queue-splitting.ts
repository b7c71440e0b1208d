// SQS queue splitting on real pods, run on the sessions suite's stack (sessions.test.ts:
// `startPodStack({ sqs: true, demoEnvFor: queueDemoEnv(…) })`): an ElasticMQ per workload
// cluster on its node's host address, the members' control planes splitting from their pods as
// the chart configures them (queues.sqs), and the demo Deployment of east and west — two
// replicas on a real kubelet — consuming queue `orders` of its cluster through ORDERS_QUEUE_URL
// (test/env/images/fixtures/queue-consumer.mjs). Every pod reports each batch it handled, and
// the queue it read from its start to its exit, to a ledger on this machine (ledger.ts), so
// every message can be accounted for and the rollouts seen as they happened: old and new pods
// overlapping, terminating pods still reading through their grace period. `switchyard exec`
// runs the developer's consumer (the same consumer code) on the output queue the session gets.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { CreateQueueCommand, ListQueuesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { afterEach, describe, expect, it } from "vitest";
import { SPLIT_QUEUES_ANNOTATION } from "../../control-plane/src/queues/consumer-env.js";
import { queueConsumerClient } from "../../proto/api/v1alpha1/index.js";
import { ELASTICMQ_ACCOUNT_ID, sqsClientFor } from "../env/sqs/elasticmq-server.js";
import { freePorts } from "../env/ports.js";
import { podLogs } from "../env/stack/pod-problems.js";
import type { PodClusterAddresses, PodStack } from "../env/stack/pod-stack.js";
import { launch, repoRoot, tsx, type LaunchedProcess } from "../support/launch.js";
import { eventually } from "../support/poll.js";
import { produce, templateVariable, type Sent } from "../e2e/queues/sqs-traffic.js";
import { startLedger, type Ledger } from "./ledger.js";
import { watchTempQueues, type TempQueueWatch } from "./temp-queue-watch.js";

const CLUSTERS = ["east", "west"] as const;
type Cluster = (typeof CLUSTERS)[number];
const QUEUE = "orders";
const CONSUMER = join(repoRoot, "test/env/images/fixtures/queue-consumer.mjs");

/** The ledger's port, chosen before the stack starts (the demos' LEDGER_URL names it). */
export async function ledgerPort(): Promise<number> {
  return (await freePorts(1))[0]!;
}

/** The demo's queue variables in one cluster: its `orders` queue and the ledger. */
export function queueDemoEnv(port: number): (c: PodClusterAddresses) => Record<string, string> {
  return (c) => ({
    ORDERS_QUEUE_URL: `${c.sqsEndpoint}/${ELASTICMQ_ACCOUNT_ID}/${QUEUE}`,
    LEDGER_URL: `http://${c.hostIp}:${port}`,
  });
}

/** What the queue-splitting cases share once the stack is up; `close()` ends it. */
export interface QueueSplitting {
  stack: PodStack;
  ledger: Ledger;
  watch: TempQueueWatch;
  dir: string;
  sqs: Record<Cluster, { client: SQSClient; original: string }>;
  close(): Promise<void>;
}

/**
 * The ledger listening, queue `orders` made in each cluster, its QueueConsumer declared, and
 * both replicas of each cluster reading it.
 */
export async function startQueueSplitting(stack: PodStack, port: number): Promise<QueueSplitting> {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-pod-queues-"));
  const ledger = await startLedger(
    CLUSTERS.map((c) => stack.workloads[c]!.hostIp),
    port,
  );
  const sqs = {} as QueueSplitting["sqs"];
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
  // Clients of its own, each call cut at 2 s: one unanswered ListQueues must not stop the watch.
  const watchClients = CLUSTERS.map((c) =>
    sqsClientFor(stack.workloads[c]!.sqs!, { maxAttempts: 1, requestTimeoutMs: 2000 }),
  );
  const watch = watchTempQueues(watchClients);
  const q: QueueSplitting = {
    stack,
    ledger,
    watch,
    dir,
    sqs,
    close: async () => {
      await watch.stop();
      for (const client of watchClients) client.destroy();
      for (const c of CLUSTERS) sqs[c].client.destroy();
      await ledger.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await eventually(
    "every demo pod to read its cluster's queue",
    async () => {
      for (const c of CLUSTERS) if (!(await podsRead(q, c, sqs[c].original))) return false;
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  return q;
}

/** Every demo pod of `cluster` that exists now (terminating ones included) read `queue` from its start. */
async function podsRead(q: QueueSplitting, cluster: Cluster, queue: string): Promise<boolean> {
  const pods = await q.stack.set
    .get(cluster)
    .kubeConfig()
    .makeApiClient(CoreV1Api)
    .listNamespacedPod({ namespace: "default", labelSelector: "app=demo" });
  const names = pods.items.map((p) => p.metadata!.name!);
  const onLedger = q.ledger.pods();
  return (
    names.length > 0 &&
    names.every((n) => onLedger.find((p) => p.pod === n && p.exitAt === undefined)?.queue === queue)
  );
}

interface LocalConsumer {
  name: string;
  proc: LaunchedProcess;
  stop(): Promise<number | string>;
}

/** The queue-splitting cases, on the suite's stack; `ctx()` is there once its beforeAll ran. */
export function describeQueueSplitting(ctx: () => QueueSplitting): void {
  const running: LaunchedProcess<unknown>[] = [];

  /**
   * `switchyard exec --config <split> -- node <the consumer>` as the developer: the consumer
   * reads ORDERS_QUEUE_URL as the session gives it and reports to the ledger as `local-<name>`.
   */
  async function localConsumer(name: string, split: object): Promise<LocalConsumer> {
    const { dir, stack } = ctx();
    const config = join(dir, `${name}.json`);
    writeFileSync(config, JSON.stringify({ queues: [split] }));
    const stopFile = join(dir, `${name}.stop`);
    const runner = join(dir, `${name}.mjs`);
    writeFileSync(
      runner,
      [
        `import { existsSync } from "node:fs";`,
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

  /** Runs `fn`; on failure adds the CLIs' output and the members' control-plane logs to the error. */
  async function explained<T>(locals: LocalConsumer[], fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      const { stack } = ctx();
      const logs: string[] = [];
      for (const c of CLUSTERS)
        logs.push(
          await podLogs(stack.set.get(c), "switchyard", "app.kubernetes.io/component=control-plane").catch(
            (x: unknown) => `(no logs of ${c}: ${String(x)})`,
          ),
        );
      const cli = locals.map((l) => `\nCLI output of ${l.name}:\n${l.proc.output()}`).join("");
      (err as Error).message += `${cli}\n${await stack.describeProblems()}\n${logs.join("\n")}`;
      throw err;
    }
  }

  const sendBoth = (sent: Sent[], tenants: readonly string[], from: number, count: number, rate: number) =>
    Promise.all(
      CLUSTERS.map((c) =>
        produce(ctx().sqs[c].client, ctx().sqs[c].original, c, from, count, tenants, rate, sent),
      ),
    );

  const handledBy = (id: string, pod: string) =>
    ctx()
      .ledger.handled(id)
      .some((h) => h.pod === pod);

  /** Waits until local `name` has started on an output queue; returns that queue. */
  function localQueue(local: LocalConsumer): Promise<string> {
    return eventually(
      `${local.name}'s consumer to start`,
      () => {
        if (local.proc.hasExited()) throw new Error(`exec ended early:\n${local.proc.output()}`);
        return ctx()
          .ledger.pods()
          .find((p) => p.pod === `local-${local.name}`)?.queue;
      },
      { timeoutMs: 180_000, intervalMs: 200 },
    );
  }

  /** Waits until every id of `want` was handled by `local`. */
  const reaches = (local: LocalConsumer, want: readonly Sent[], what: string) =>
    eventually(
      what,
      () => {
        const missing = want.filter((s) => !handledBy(s.id, `local-${local.name}`));
        if (missing.length > 0) throw new Error(`${missing.length} of ${want.length} missing`);
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );

  /** Every sent id handled exactly once by the readers `who` accepts. */
  async function handledOnce(sent: readonly Sent[], who: (pod: string) => boolean): Promise<void> {
    const { ledger } = ctx();
    const count = (id: string) => ledger.handled(id).filter((h) => who(h.pod)).length;
    await eventually(
      "every message handled",
      () => {
        const missing = sent.filter((s) => count(s.id) === 0);
        if (missing.length > 0)
          throw new Error(
            `${missing.length} of ${sent.length} not handled, e.g. ${missing
              .slice(0, 3)
              .map((m) => m.id)
              .join(", ")}`,
          );
        return true;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    );
    expect(
      sent
        .filter((s) => count(s.id) > 1)
        .map((s) => `${s.id}: ${ledger.handled(s.id).map((h) => `${h.pod} on ${h.queue}`)}`),
      "messages handled twice",
    ).toEqual([]);
  }

  /** Both Deployments read their own queue again, exactly as before, and no `sy-` queue is left. */
  async function restored(): Promise<void> {
    const q = ctx();
    for (const c of CLUSTERS) {
      await eventually(
        `${c}'s Deployment restored`,
        async () => {
          const t = await templateVariable(
            q.stack.set.get(c).kubeConfig(),
            "default",
            "demo",
            "ORDERS_QUEUE_URL",
          );
          if (t.value !== q.sqs[c].original) throw new Error(`ORDERS_QUEUE_URL is ${t.value}`);
          if (t.annotations[SPLIT_QUEUES_ANNOTATION]) throw new Error("the split annotation is still there");
          return true;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      await eventually(
        `${c}'s pods to read the original queue only`,
        () => podsRead(q, c, q.sqs[c].original),
        {
          timeoutMs: 120_000,
          intervalMs: 250,
        },
      );
    }
    await eventually(
      "no temporary queue left",
      async () => {
        const left: string[] = [];
        for (const c of CLUSTERS)
          left.push(
            ...((await q.sqs[c].client.send(new ListQueuesCommand({ QueueNamePrefix: "sy-" }))).QueueUrls ??
              []),
          );
        if (left.length > 0) throw new Error(left.join(", "));
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
  }

  /**
   * What the rollouts of `cluster` since `since` looked like on the ledger: a pod of the
   * temporary queue and one of the original ran at once (the rollout overlapped them), and the
   * temporary queue was deleted only after the last pod reading it had exited (none was drained
   * under a terminating pod). Only pods that started or exited since then are looked at.
   */
  async function rolloutsSeen(cluster: Cluster, since: number): Promise<void> {
    const { ledger, sqs, watch } = ctx();
    const pods = ledger
      .pods()
      .filter(
        (p) => p.cluster === cluster && (p.startedAt > since || (p.exitAt !== undefined && p.exitAt > since)),
      );
    const temps = [...new Set(pods.map((p) => p.queue).filter((url) => /\/sy-t-/.test(url)))];
    expect(temps, `${cluster}'s pods reading a temporary queue`).toHaveLength(1);
    const temp = temps[0]!;
    const onTemp = pods.filter((p) => p.queue === temp);
    const onOriginal = pods.filter((p) => p.queue === sqs[cluster].original);
    const overlapped = onTemp.some((t) =>
      onOriginal.some((o) => o.startedAt < (t.exitAt ?? Infinity) && t.startedAt < (o.exitAt ?? Infinity)),
    );
    expect(overlapped, `a pod of ${temp} and one of the original ran at once in ${cluster}`).toBe(true);
    // restored() saw the queue gone with a listing of its own: let the watch catch up first.
    await watch.caughtUp();
    const existedAt = watch.lastSeenBeforeDeletion(temp);
    expect(existedAt, `${temp} deleted`).toBeDefined();
    for (const p of onTemp) {
      expect(p.exitAt, `${p.pod} (on ${temp}) exited`).toBeDefined();
      expect(p.exitAt!, `${p.pod} exited while ${temp} still existed`).toBeLessThan(existedAt!);
    }
  }

  /** Deletes `cluster`'s member control-plane pod and waits for its Deployment to be available again. */
  async function restartMemberControlPlane(cluster: Cluster): Promise<void> {
    const kc = ctx().stack.set.get(cluster).kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const selector = "app.kubernetes.io/component=control-plane";
    const old = (await core.listNamespacedPod({ namespace: "switchyard", labelSelector: selector })).items;
    for (const p of old) await core.deleteNamespacedPod({ name: p.metadata!.name!, namespace: "switchyard" });
    await eventually(
      `${cluster}'s control plane back`,
      async () => {
        const d = await kc
          .makeApiClient(AppsV1Api)
          .readNamespacedDeployment({ name: "switchyard-control-plane", namespace: "switchyard" });
        const pods = (await core.listNamespacedPod({ namespace: "switchyard", labelSelector: selector }))
          .items;
        return (
          (d.status?.availableReplicas ?? 0) >= 1 &&
          pods.every((p) => !old.some((o) => o.metadata!.uid === p.metadata!.uid))
        );
      },
      { timeoutMs: 120_000, intervalMs: 250 },
    );
  }

  describe("SQS queue splitting on real pods", () => {
    afterEach(async () => {
      for (const p of running.splice(0)) await p.stop(0, "SIGKILL");
    });

    it("steals a developer's messages while a session starts and ends, through overlapping rollouts, losing and duplicating none", async () => {
      const { stack } = ctx();
      const tenants = ["dev-alice", "prod", "dev-bob"];
      const since = Date.now();
      const sent: Sent[] = [];
      // Messages flow before and while the session starts (its rollouts overlap old and new pods).
      const before = sendBoth(sent, tenants, 0, 1500, 100);
      const alice = await localConsumer("alice", { id: QUEUE, messageFilter: { tenant: "^dev-alice$" } });
      await explained([alice], async () => {
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
        await reaches(
          alice,
          inWindow.filter((s) => s.tenant === "dev-alice"),
          "alice to handle every dev-alice message of the window",
        );
        expect(await alice.stop()).toBe(0);
        await after;
        await restored();
        expect(sent).toHaveLength(7000);
        await handledOnce(sent, () => true);
        const atAlice = sent.filter((s) => handledBy(s.id, "local-alice"));
        expect(
          atAlice.filter((s) => s.tenant !== "dev-alice"),
          "others' messages at alice",
        ).toEqual([]);
        expect(new Set(atAlice.map((s) => s.cluster)), "both clusters' messages at alice").toEqual(
          new Set(CLUSTERS),
        );
        expect(
          inWindow.filter(
            (s) =>
              s.tenant === "dev-alice" &&
              ctx()
                .ledger.handled(s.id)
                .some((h) => h.pod !== "local-alice"),
          ),
          "dev-alice messages of the window handled by the pods",
        ).toEqual([]);
        for (const c of CLUSTERS) await rolloutsSeen(c, since);
      });
    }, 600_000);

    it("gives two developers with disjoint filters their own messages, and tells a third whose filter overlaps", async () => {
      const tenants = ["dev-bob", "dev-carol", "dev-dave", "prod"];
      const all: LocalConsumer[] = [];
      // One after the other: admission order decides who keeps an overlap's messages.
      const next = async (name: string, tenant: string) => {
        const l = await localConsumer(name, { id: QUEUE, messageFilter: { tenant } });
        all.push(l);
        await localQueue(l);
        return l;
      };
      await explained(all, async () => {
        const bob = await next("bob", "^dev-bob$");
        const carol = await next("carol", "^dev-carol$");
        const dave = await next("dave", "^dev-(bob|dave)$");
        // Told at admission: dave's filter may take bob's messages; bob was first, so bob keeps them.
        expect(dave.proc.output()).toMatch(
          /may match the same messages as session default:mc-[0-9a-f]{16}-east's \(tenant=~\^dev-bob\$, steal\)/,
        );
        expect(dave.proc.output()).toContain("goes to the earlier session");
        expect(bob.proc.output()).not.toContain("may match the same messages");
        expect(carol.proc.output()).not.toContain("may match the same messages");
        const sent: Sent[] = [];
        await sendBoth(sent, tenants, 10_000, 1000, 200);
        for (const [who, tenant] of [
          [bob, "dev-bob"],
          [carol, "dev-carol"],
          [dave, "dev-dave"],
        ] as const) {
          await reaches(
            who,
            sent.filter((s) => s.tenant === tenant),
            `${tenant}'s messages at their developer`,
          );
          expect(
            sent.filter((s) => handledBy(s.id, `local-${who.name}`) && s.tenant !== tenant),
            `others' messages at ${who.name}`,
          ).toEqual([]);
        }
        for (const l of [dave, carol, bob]) expect(await l.stop()).toBe(0);
        await restored();
        await handledOnce(sent, () => true);
      });
    }, 600_000);

    it("mirrors copies of a developer's messages while the pods handle every message once, a member control plane restarting mid-split", async () => {
      const tenants = ["dev-erin", "prod"];
      const since = Date.now();
      const sent: Sent[] = [];
      const erin = await localConsumer("erin", {
        id: QUEUE,
        messageFilter: { tenant: "^dev-erin$" },
        mode: "mirror",
      });
      await explained([erin], async () => {
        await localQueue(erin);
        const windowStart = Date.now();
        const traffic = sendBoth(sent, tenants, 20_000, 1500, 150);
        // Each member's control plane (its splitter) is replaced while messages flow.
        await Promise.all([restartMemberControlPlane("west"), restartMemberControlPlane("east")]);
        await traffic;
        await reaches(
          erin,
          sent.filter((s) => s.tenant === "dev-erin" && s.at > windowStart),
          "erin's copies",
        );
        expect(await erin.stop()).toBe(0);
        await restored();
        // Mirror: the pods handle every message, each once; erin had copies of hers only.
        await handledOnce(sent, (pod) => !pod.startsWith("local-"));
        expect(
          sent.filter((s) => handledBy(s.id, "local-erin") && s.tenant !== "dev-erin"),
          "others' messages at erin",
        ).toEqual([]);
        for (const c of CLUSTERS) await rolloutsSeen(c, since);
      });
    }, 600_000);
  });
}
