// SQS queue splitting end to end, as developers use it: the embedded stack (a management-only
// Primary, east as the Default cluster, west) with a real ElasticMQ server per workload
// cluster as that cluster's "AWS". The demo Deployment consumes queue `orders` in each cluster
// through ORDERS_QUEUE_URL, declared by a QueueConsumer; a stand-in for its pods consumes
// whichever queue the Deployment's template names. `switchyard exec` runs a local consumer
// (stock @aws-sdk/client-sqs) that reads ORDERS_QUEUE_URL from the Default cluster's
// environment, rewritten to the session's output queue in east; west's splitter sends its
// matches there too. Messages are numbered per cluster, so every one can be accounted for.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateQueueCommand, ListQueuesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queueConsumerClient } from "../../../proto/api/v1alpha1/index.js";
import { startEmbeddedStack, type EmbeddedStack } from "../../env/stack/embedded-stack.js";
import { sqsClientFor, startElasticmq, type ElasticmqServer } from "../../env/sqs/elasticmq-server.js";
import { launch, tsx, type LaunchedProcess } from "../../support/launch.js";
import { eventually } from "../../support/poll.js";
import {
  consume,
  keepPodsRunning,
  produce,
  templateVariable,
  type Received,
  type Sent,
} from "./sqs-traffic.js";

const CLUSTERS = ["east", "west"] as const;
type Cluster = (typeof CLUSTERS)[number];
const TENANTS = ["dev-alice", "prod", "dev-bob", "prod-eu", "dev-carol"] as const;

let stack: EmbeddedStack;
let dir: string;
const sqs = {} as Record<Cluster, { server: ElasticmqServer; client: SQSClient; original: string }>;
const stopping = new AbortController();
const deployed: Received[] = [];
const background: Promise<void>[] = [];
/** Local programs written into the repository (so they resolve its packages); removed in afterAll. */
const scripts: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-queues-e2e-"));
  for (const c of CLUSTERS) {
    const server = await startElasticmq({ name: `sqs-${c}` });
    const client = sqsClientFor(server);
    const out = await client.send(
      new CreateQueueCommand({
        QueueName: "orders",
        Attributes: { VisibilityTimeout: "20" },
        tags: { team: "shop" },
      }),
    );
    sqs[c] = { server, client, original: out.QueueUrl! };
  }
  stack = await startEmbeddedStack({
    sqsEndpoints: Object.fromEntries(
      CLUSTERS.map((c) => [c, { endpoint: sqs[c].server.endpoint, region: sqs[c].server.region }]),
    ),
    demoEnvByCluster: Object.fromEntries(CLUSTERS.map((c) => [c, { ORDERS_QUEUE_URL: sqs[c].original }])),
  });
  for (const c of CLUSTERS) {
    const kc = stack.workloads[c]!.cluster.kubeConfig();
    await queueConsumerClient(kc).create({
      metadata: { name: "demo-orders", namespace: "default" },
      spec: {
        consumer: "deployment/demo",
        queues: [{ id: "orders", type: "SQS", envVar: "ORDERS_QUEUE_URL" }],
      },
    });
    background.push(keepPodsRunning(kc, "default", "app=demo", stopping.signal));
    background.push(
      consume(
        sqs[c].client,
        async () => (await templateVariable(kc, "default", "demo", "ORDERS_QUEUE_URL")).value!,
        `deployed-${c}`,
        deployed,
        stopping.signal,
      ),
    );
  }
}, 300_000);

afterAll(async () => {
  for (const f of scripts) rmSync(f, { force: true });
  stopping.abort();
  await Promise.allSettled(background);
  await stack?.stop();
  for (const c of CLUSTERS) {
    sqs[c]?.client.destroy();
    await sqs[c]?.server.stop();
  }
  rmSync(dir, { recursive: true, force: true });
});

const LOCAL_APP = `
import { appendFileSync, existsSync, writeFileSync } from "node:fs";
import { DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
const [out, stop] = process.argv.slice(2);
const url = process.env.ORDERS_QUEUE_URL;
const client = new SQSClient({
  region: "us-east-1",
  endpoint: new URL(url).origin,
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});
writeFileSync(out + ".ready", url);
for (;;) {
  const r = await client.send(new ReceiveMessageCommand({
    QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ["All"],
  }));
  const msgs = r.Messages ?? [];
  if (msgs.length === 0) {
    if (existsSync(stop)) break;
    continue;
  }
  const at = Date.now();
  appendFileSync(out, msgs.map((m) => {
    const b = JSON.parse(m.Body);
    return JSON.stringify({ id: b.cluster + "-" + b.n, tenant: m.MessageAttributes?.tenant?.StringValue, at });
  }).join("\\n") + "\\n");
  await client.send(new DeleteMessageBatchCommand({
    QueueUrl: url, Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
  }));
}
`;

interface LocalConsumer {
  proc: LaunchedProcess<true>;
  out: string;
  stopFile: string;
  /** The queue URL the local app was given. */
  ready(): Promise<string>;
  received(): { id: string; tenant: string; at: number }[];
  stop(): Promise<number | string>;
}

/** `switchyard exec --config <split> -- node <local consumer>`. */
async function localConsumer(name: string, split: object): Promise<LocalConsumer> {
  const configFile = join(dir, `${name}.json`);
  writeFileSync(configFile, JSON.stringify({ queues: [split] }));
  const scriptFile = join(process.cwd(), `test/e2e/fixtures/.queue-app-${process.pid}-${name}.mjs`);
  scripts.push(scriptFile);
  writeFileSync(scriptFile, LOCAL_APP);
  const out = join(dir, `${name}.jsonl`);
  const stopFile = join(dir, `${name}.stop`);
  const proc = await launch({
    name: `switchyard-exec-${name}`,
    ...tsx("cli/src/main.ts", [
      "exec",
      ...stack.developerCliArgs,
      "--config",
      configFile,
      "--",
      process.execPath,
      scriptFile,
      out,
      stopFile,
    ]),
  });
  return {
    proc,
    out,
    stopFile,
    ready: () =>
      eventually(
        `${name}'s local consumer to start`,
        () => {
          if (proc.hasExited()) throw new Error(`exec ended early:\n${proc.output()}`);
          return existsSync(`${out}.ready`) ? readFileSync(`${out}.ready`, "utf8") : undefined;
        },
        { timeoutMs: 90_000, intervalMs: 100 },
      ),
    received: () =>
      existsSync(out)
        ? readFileSync(out, "utf8")
            .split("\n")
            .filter(Boolean)
            .map((l) => JSON.parse(l) as { id: string; tenant: string; at: number })
        : [],
    stop: async () => {
      writeFileSync(stopFile, "");
      try {
        return await proc.exited;
      } finally {
        rmSync(scriptFile, { force: true });
      }
    },
  };
}

/** Waits until neither cluster's SQS holds a temporary (`sy-`) queue. */
const noTemporaryQueueLeft = () =>
  eventually(
    "no temporary queue left",
    async () => {
      const left: string[] = [];
      for (const c of CLUSTERS) {
        const out = await sqs[c].client.send(new ListQueuesCommand({ QueueNamePrefix: "sy-" }));
        left.push(...(out.QueueUrls ?? []));
      }
      if (left.length > 0) throw new Error(left.join(", "));
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );

/** Fails unless every sent message was consumed exactly once by the deployed consumers or `locals`. */
async function accountedOnce(sent: readonly Sent[], locals: readonly LocalConsumer[], deployedFrom: number) {
  const ids = new Set(sent.map((s) => s.id));
  const seen = () => [
    ...locals.flatMap((l) => l.received().map((r) => r.id)),
    ...deployed.slice(deployedFrom).map((r) => r.id),
  ];
  await eventually(
    "every message consumed by someone",
    () => {
      const got = new Set(seen().filter((id) => ids.has(id)));
      if (got.size < ids.size) throw new Error(`${got.size} of ${ids.size}`);
      return true;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
  const counts = new Map<string, number>();
  for (const id of seen()) if (ids.has(id)) counts.set(id, (counts.get(id) ?? 0) + 1);
  expect(
    [...counts].filter(([, n]) => n > 1),
    "messages delivered twice",
  ).toEqual([]);
}

describe("SQS queue splitting across two clusters", () => {
  it("delivers every message once, to the consumer its filter names, while a session starts and ends", async () => {
    const sent: Sent[] = [];
    const sendBoth = (from: number, count: number) =>
      Promise.all(
        CLUSTERS.map((c) => produce(sqs[c].client, sqs[c].original, c, from, count, TENANTS, 400, sent)),
      );
    // 2,500 per cluster before and while the session starts.
    const before = sendBoth(0, 2500);
    const alice = await localConsumer("alice", { id: "orders", messageFilter: { tenant: "^dev-alice$" } });
    const outputUrl = await alice.ready();
    await before;
    expect(outputUrl).toMatch(/\/sy-o-[0-9a-f]+-orders$/);
    expect(outputUrl.startsWith(sqs.east.server.endpoint)).toBe(true);
    // Split in force in both clusters: the window in which alice's messages must all be hers.
    const windowStart = Date.now();
    await sendBoth(2500, 1500);
    const windowEnd = Date.now();
    const inWindow = sent.filter((s) => s.at > windowStart && s.at <= windowEnd);
    const aliceInWindow = inWindow.filter((s) => s.tenant === "dev-alice").map((s) => s.id);
    await eventually(
      "alice to receive every dev-alice message sent while split",
      () => {
        const got = new Set(alice.received().map((r) => r.id));
        const missing = aliceInWindow.filter((id) => !got.has(id));
        if (missing.length > 0)
          throw new Error(`${missing.length} missing, e.g. ${missing.slice(0, 3).join(", ")}`);
        return true;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    // 1,000 more per cluster while the session ends.
    const after = sendBoth(4000, 1000);
    expect(await alice.stop()).toBe(0);
    await after;

    expect(sent).toHaveLength(10_000);
    await accountedOnce(sent, [alice], 0);
    const local = alice.received();
    expect(
      local.filter((r) => r.tenant !== "dev-alice"),
      "others' messages at the local consumer",
    ).toEqual([]);
    const deployedIds = new Set(deployed.map((r) => r.id));
    expect(inWindow.filter((s) => s.tenant === "dev-alice" && deployedIds.has(s.id))).toEqual([]);
    // Both clusters' messages reached the one local consumer.
    expect(new Set(local.map((r) => r.id.split("-")[0]))).toEqual(new Set(CLUSTERS));

    // The workloads read their own queue again, exactly as before, and nothing is left behind.
    for (const c of CLUSTERS) {
      await eventually(
        `${c}'s Deployment restored`,
        async () => {
          const t = await templateVariable(
            stack.workloads[c]!.cluster.kubeConfig(),
            "default",
            "demo",
            "ORDERS_QUEUE_URL",
          );
          if (t.value !== sqs[c].original) throw new Error(`ORDERS_QUEUE_URL is ${t.value}`);
          if (t.annotations["switchyard.dev/split-queues"])
            throw new Error("the split annotation is still there");
          return true;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
    }
    await noTemporaryQueueLeft();
  }, 400_000);

  it("gives two developers with disjoint filters their own messages, and tells a third whose filter overlaps", async () => {
    const tenants = ["dev-bob", "dev-carol", "dev-dave", "prod"];
    const from = deployed.length;
    const bob = await localConsumer("bob", { id: "orders", messageFilter: { tenant: "^dev-bob$" } });
    await bob.ready();
    const carol = await localConsumer("carol", { id: "orders", messageFilter: { tenant: "^dev-carol$" } });
    await carol.ready();
    const dave = await localConsumer("dave", { id: "orders", messageFilter: { tenant: "^dev-(bob|dave)$" } });
    await dave.ready();
    // Told at admission: dave's filter may take bob's messages; bob was first, so bob keeps them.
    expect(dave.proc.output()).toMatch(
      /may match the same messages as session default:mc-[0-9a-f]{16}-east's \(tenant=~\^dev-bob\$, steal\)/,
    );
    expect(dave.proc.output()).toContain("goes to the earlier session");
    expect(bob.proc.output()).not.toContain("may match the same messages");
    expect(carol.proc.output()).not.toContain("may match the same messages");

    const sent: Sent[] = [];
    const start = Date.now();
    await Promise.all(
      CLUSTERS.map((c) => produce(sqs[c].client, sqs[c].original, c, 10_000, 1000, tenants, 400, sent)),
    );
    const want = (tenant: string) => sent.filter((m) => m.tenant === tenant && m.at > start).map((m) => m.id);
    for (const [who, tenant] of [
      [bob, "dev-bob"],
      [carol, "dev-carol"],
      [dave, "dev-dave"],
    ] as const) {
      await eventually(
        `${tenant}'s messages at their developer`,
        () => {
          const got = new Set(who.received().map((r) => r.id));
          const missing = want(tenant).filter((id) => !got.has(id));
          if (missing.length > 0) throw new Error(`${missing.length} missing`);
          return true;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    }
    expect(dave.received().filter((r) => r.tenant !== "dev-dave")).toEqual([]);
    expect(bob.received().filter((r) => r.tenant !== "dev-bob")).toEqual([]);
    expect(carol.received().filter((r) => r.tenant !== "dev-carol")).toEqual([]);
    for (const l of [dave, carol, bob]) expect(await l.stop()).toBe(0);
    await accountedOnce(sent, [bob, carol, dave], from);
  }, 400_000);

  it("mirrors a copy to the session, and loses nothing when a member control plane restarts mid-split", async () => {
    const from = deployed.length;
    const erin = await localConsumer("erin", {
      id: "orders",
      messageFilter: { tenant: "^dev-erin$" },
      mode: "mirror",
    });
    await erin.ready();
    const tenants = ["dev-erin", "prod"];
    const sent: Sent[] = [];
    const start = Date.now();
    const traffic = Promise.all(
      CLUSTERS.map((c) => produce(sqs[c].client, sqs[c].original, c, 20_000, 1500, tenants, 300, sent)),
    );
    await new Promise((r) => setTimeout(r, 2000));
    const restarted: number[] = [];
    for (const c of ["west", "east"]) {
      restarted.push(Date.now());
      await stack.restartMemberControlPlane(c);
      restarted.push(Date.now());
    }
    await traffic;
    const erinWants = sent.filter((m) => m.tenant === "dev-erin" && m.at > start).map((m) => m.id);
    await eventually(
      "erin's copies",
      () => {
        const got = new Set(erin.received().map((r) => r.id));
        const missing = erinWants.filter((id) => !got.has(id));
        if (missing.length > 0) {
          const at = deployed.slice(from).filter((d) => missing.includes(d.id));
          throw new Error(
            `${missing.length} missing (${missing.slice(0, 5).join(", ")}; sent at ` +
              `${missing
                .slice(0, 5)
                .map((id) => sent.find((x) => x.id === id)!.at - start)
                .join(", ")} ms; ` +
              `restarts at ${restarted.map((t) => t - start).join(", ")} ms; deployed got ${JSON.stringify(at.slice(0, 5))})`,
          );
        }
        return true;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    expect(await erin.stop()).toBe(0);
    // Mirror: the deployed consumers still get every message, each once.
    await accountedOnce(sent, [], from);
    expect(new Set(erin.received().map((r) => r.id))).toEqual(new Set(erinWants));
    await noTemporaryQueueLeft();
  }, 400_000);
});
