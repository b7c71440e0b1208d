// The queue splitter (control-plane/src/queues/splitter.ts) against a real ElasticMQ: routing
// by a decision that reads an attribute (steal: the output only; mirror: both), FIFO groups and
// deduplication ids kept, 2,000 messages sent while splitting arriving exactly once, a stop in
// the middle and a new splitter losing and duplicating none, and a destination queue deleted
// mid-run (errors counted, originals kept, none lost once it is back or the decision changes).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type Message,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { pino } from "pino";
import { Registry } from "prom-client";
import { SplitterMetrics } from "../../../control-plane/src/queues/queue-metrics.js";
import { SqsClients } from "../../../control-plane/src/queues/sqs-clients.js";
import {
  QueueSplitter,
  type SplitDecision,
  type SplitMessage,
} from "../../../control-plane/src/queues/splitter.js";
import {
  ELASTICMQ_CREDENTIALS,
  sqsClientFor,
  startElasticmq,
  type ElasticmqServer,
} from "../../env/sqs/elasticmq-server.js";
import { eventually } from "../../support/poll.js";

let server: ElasticmqServer;
let sqs: SQSClient;
let clients: SqsClients;
const running: QueueSplitter[] = [];

beforeAll(async () => {
  server = await startElasticmq({ name: "splitter" });
  sqs = sqsClientFor(server);
  clients = new SqsClients({
    region: server.region,
    endpoint: server.endpoint,
    credentials: ELASTICMQ_CREDENTIALS,
  });
});

afterAll(async () => {
  await Promise.all(running.map((s) => s.stop()));
  clients?.destroy();
  sqs?.destroy();
  await server?.stop();
});

function splitter(o: Omit<ConstructorParameters<typeof QueueSplitter>[0], "clients">): QueueSplitter {
  const s = new QueueSplitter({ clients, ...o });
  running.push(s);
  s.start();
  return s;
}

async function createQueue(name: string, attributes: Record<string, string> = {}) {
  return (await sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))).QueueUrl!;
}

interface Numbered {
  n: number;
  tenant: string;
  fifo?: { group: string; dedup: string };
}

async function send(url: string, items: readonly Numbered[]) {
  for (let i = 0; i < items.length; i += 10) {
    const out = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: items.slice(i, i + 10).map((m) => ({
          Id: `e${m.n}`,
          MessageBody: JSON.stringify({ n: m.n, note: "body-marker-7f3a" }),
          MessageAttributes: {
            tenant: { DataType: "String", StringValue: m.tenant },
            seq: { DataType: "Number", StringValue: String(m.n) },
          },
          ...(m.fifo ? { MessageGroupId: m.fifo.group, MessageDeduplicationId: m.fifo.dedup } : {}),
        })),
      }),
    );
    expect(out.Failed ?? []).toEqual([]);
  }
}

const numbered = (from: number, count: number, tenants: readonly string[]): Numbered[] =>
  Array.from({ length: count }, (_, i) => ({ n: from + i, tenant: tenants[(from + i) % tenants.length]! }));

const bodyN = (m: Message) => (JSON.parse(m.Body!) as { n: number }).n;

/** Receives and deletes until `count` came and a further second brings nothing; sorted numbers. */
async function receiveAll(
  url: string,
  count: number,
  timeoutMs = 60_000,
): Promise<{ ns: number[]; messages: Message[] }> {
  const messages: Message[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const out = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["All"],
      }),
    );
    const batch = out.Messages ?? [];
    messages.push(...batch);
    if (batch.length > 0)
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: batch.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
        }),
      );
    if (batch.length === 0 && messages.length >= count) break;
    if (Date.now() > deadline)
      throw new Error(`received ${messages.length} of ${count} messages from ${url}`);
  }
  return { ns: messages.map(bodyN).sort((a, b) => a - b), messages };
}

async function counts(url: string): Promise<{ visible: number; inFlight: number }> {
  const a = (
    await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
      }),
    )
  ).Attributes!;
  return {
    visible: Number(a.ApproximateNumberOfMessages),
    inFlight: Number(a.ApproximateNumberOfMessagesNotVisible),
  };
}

async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const m = await registry.getSingleMetric(name)!.get();
  return m.values
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .filter((v) => !("metricName" in v) || v.metricName === `${name}_count` || v.metricName === undefined)
    .reduce((sum, v) => sum + v.value, 0);
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);
const byTenant = (decide: Record<string, SplitDecision>, fallback: SplitDecision) => (m: SplitMessage) =>
  decide[m.attributes.tenant ?? ""] ?? fallback;

describe("QueueSplitter", () => {
  it("routes by the decision: steal to the output only, mirror to both, the rest to the target", async () => {
    const original = await createQueue("route");
    const target = await createQueue("route-target");
    const output = await createQueue("route-out");
    const registry = new Registry();
    const metrics = new SplitterMetrics(registry);
    const seen: SplitMessage[] = [];
    const s = splitter({
      originalQueueUrl: original,
      targetQueueUrl: target,
      metrics,
      decide: (m) => {
        seen.push(m);
        return byTenant(
          {
            dev: { outputs: [output], toTarget: false },
            mirror: { outputs: [output, output], toTarget: true },
            nowhere: { outputs: [], toTarget: false },
          },
          { outputs: [], toTarget: true },
        )(m);
      },
    });
    const tenants = ["dev", "mirror", "other", "nowhere"];
    await send(original, numbered(0, 60, tenants));

    const toTarget = await receiveAll(target, 45);
    const toOutput = await receiveAll(output, 30);
    await s.stop();
    const n = (t: string) => range(0, 60).filter((i) => tenants[i % 4] === t);
    expect(toTarget.ns).toEqual([...n("mirror"), ...n("other"), ...n("nowhere")].sort((a, b) => a - b));
    expect(toOutput.ns).toEqual([...n("dev"), ...n("mirror")].sort((a, b) => a - b));
    for (const m of toOutput.messages) {
      expect(m.MessageAttributes?.tenant?.StringValue).toBe(tenants[bodyN(m) % 4]);
      expect(m.MessageAttributes?.seq).toMatchObject({ DataType: "Number", StringValue: String(bodyN(m)) });
    }
    expect(seen.find((m) => m.attributes.seq === "5")).toMatchObject({
      attributes: { tenant: "mirror", seq: "5" },
    });
    expect(await counts(original)).toEqual({ visible: 0, inFlight: 0 });
    expect(await metricValue(registry, "switchyard_queue_messages_read_total")).toBe(60);
    expect(
      await metricValue(registry, "switchyard_queue_messages_forwarded_total", { destination: "target" }),
    ).toBe(45);
    expect(
      await metricValue(registry, "switchyard_queue_messages_forwarded_total", { destination: "session" }),
    ).toBe(30);
    expect(await metricValue(registry, "switchyard_queue_messages_unmatched_total")).toBe(30);
    expect(await metricValue(registry, "switchyard_queue_forward_errors_total")).toBe(0);
    expect(await metricValue(registry, "switchyard_queue_forward_duration_seconds")).toBeGreaterThan(0);
  });

  it("keeps FIFO groups, their order and the deduplication ids", async () => {
    const fifo = { FifoQueue: "true" };
    const original = await createQueue("orders.fifo", fifo);
    const target = await createQueue("orders-target.fifo", fifo);
    const output = await createQueue("orders-out.fifo", fifo);
    const s = splitter({
      originalQueueUrl: original,
      targetQueueUrl: target,
      decide: byTenant({ dev: { outputs: [output], toTarget: false } }, { outputs: [], toTarget: true }),
    });
    const items = numbered(0, 120, ["dev", "other", "other"]).map((m) => ({
      ...m,
      fifo: { group: `g${m.n % 5}`, dedup: `order-${m.n}` },
    }));
    await send(original, items);
    const toTarget = await receiveAll(target, 80);
    const toOutput = await receiveAll(output, 40);
    await s.stop();
    expect([...toTarget.ns, ...toOutput.ns].sort((a, b) => a - b)).toEqual(range(0, 120));
    for (const got of [toTarget.messages, toOutput.messages]) {
      for (const m of got) {
        expect(m.Attributes?.MessageGroupId).toBe(`g${bodyN(m) % 5}`);
        expect(m.Attributes?.MessageDeduplicationId).toBe(`order-${bodyN(m)}`);
      }
      for (let g = 0; g < 5; g++) {
        const order = got.filter((m) => m.Attributes?.MessageGroupId === `g${g}`).map(bodyN);
        expect(order).toEqual([...order].sort((a, b) => a - b));
      }
    }
  });

  it("delivers 2,000 messages sent while splitting exactly once between target and output", async () => {
    const original = await createQueue("busy");
    const target = await createQueue("busy-target");
    const output = await createQueue("busy-out");
    const s = splitter({
      originalQueueUrl: original,
      targetQueueUrl: target,
      decide: byTenant({ dev: { outputs: [output], toTarget: false } }, { outputs: [], toTarget: true }),
    });
    const items = numbered(0, 2_000, ["dev", "a", "b", "c"]);
    await Promise.all(
      [0, 1, 2, 3].map((k) =>
        send(
          original,
          items.filter((m) => m.n % 4 === k),
        ),
      ),
    );
    const [toTarget, toOutput] = await Promise.all([receiveAll(target, 1_500), receiveAll(output, 500)]);
    await s.stop();
    expect(toOutput.ns).toEqual(range(0, 2_000).filter((n) => n % 4 === 0));
    expect(toTarget.ns).toEqual(range(0, 2_000).filter((n) => n % 4 !== 0));
    expect(await counts(original)).toEqual({ visible: 0, inFlight: 0 });
  });

  it("loses and duplicates none across a stop in the middle and a new splitter", async () => {
    const original = await createQueue("handover");
    const target = await createQueue("handover-target");
    const output = await createQueue("handover-out");
    const registry = new Registry();
    const options = {
      originalQueueUrl: original,
      targetQueueUrl: target,
      visibilityTimeoutSeconds: 3,
      decide: byTenant({ dev: { outputs: [output], toTarget: false } }, { outputs: [], toTarget: true }),
    };
    const first = splitter({ ...options, metrics: new SplitterMetrics(registry) });
    const sending = send(original, numbered(0, 1_500, ["dev", "a", "b"]));
    await eventually("the first splitter to forward 300 messages", async () => {
      return (await metricValue(registry, "switchyard_queue_messages_read_total")) >= 300;
    });
    await first.stop();
    // Graceful: every message it received is forwarded and deleted, none left hidden.
    expect((await counts(original)).inFlight).toBe(0);
    const readByFirst = await metricValue(registry, "switchyard_queue_messages_read_total");
    // Stopped means stopped: nothing more is read.
    await new Promise((r) => setTimeout(r, 500));
    expect(await metricValue(registry, "switchyard_queue_messages_read_total")).toBe(readByFirst);
    expect(readByFirst).toBeLessThan(1_500);

    const second = splitter(options);
    await sending;
    const [toTarget, toOutput] = await Promise.all([receiveAll(target, 1_000), receiveAll(output, 500)]);
    await second.stop();
    expect(toOutput.ns).toEqual(range(0, 1_500).filter((n) => n % 3 === 0));
    expect(toTarget.ns).toEqual(range(0, 1_500).filter((n) => n % 3 !== 0));
  });

  it("keeps messages whose destination is gone, and delivers them once it is back or the decision changes", async () => {
    const original = await createQueue("lost-out");
    const target = await createQueue("lost-out-target");
    const outputName = "lost-out-session";
    let output = await createQueue(outputName);
    const registry = new Registry();
    const logs: string[] = [];
    let devTo: SplitDecision = { outputs: [output], toTarget: false };
    const s = splitter({
      originalQueueUrl: original,
      targetQueueUrl: target,
      visibilityTimeoutSeconds: 1,
      metrics: new SplitterMetrics(registry),
      logger: pino({ level: "info" }, { write: (l: string) => void logs.push(l) }),
      decide: (m) => (m.attributes.tenant === "tenant-dev-9c1" ? devTo : { outputs: [], toTarget: true }),
    });
    await sqs.send(new DeleteQueueCommand({ QueueUrl: output }));
    await send(original, numbered(0, 40, ["tenant-dev-9c1", "tenant-other"]));

    // The others reach the target; the session's stay in the original, counted as errors.
    expect((await receiveAll(target, 20)).ns).toEqual(range(0, 40).filter((n) => n % 2 === 1));
    await eventually("send errors counted", async () => {
      return (await metricValue(registry, "switchyard_queue_forward_errors_total", { stage: "send" })) >= 20;
    });
    const held = await counts(original);
    expect(held.visible + held.inFlight).toBe(20);

    // The output queue is made again (same URL): they arrive, once each.
    output = await createQueue(outputName);
    devTo = { outputs: [output], toTarget: false };
    expect((await receiveAll(output, 20)).ns).toEqual(range(0, 40).filter((n) => n % 2 === 0));

    // Gone again, and the decision changes instead: they go to the target.
    await sqs.send(new DeleteQueueCommand({ QueueUrl: output }));
    const errorsBefore = await metricValue(registry, "switchyard_queue_forward_errors_total", {
      stage: "send",
    });
    await send(original, numbered(100, 10, ["tenant-dev-9c1"]));
    await eventually("send errors counted again", async () => {
      return (
        (await metricValue(registry, "switchyard_queue_forward_errors_total", { stage: "send" })) >
        errorsBefore
      );
    });
    devTo = { outputs: [], toTarget: true };
    expect((await receiveAll(target, 10)).ns).toEqual(range(100, 10));
    await s.stop();
    expect(await counts(original)).toEqual({ visible: 0, inFlight: 0 });

    const warnings = logs.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(
      warnings.some((w) => w.msg === "forwarding messages failed; they stay in the original queue"),
    ).toBe(true);
    expect(warnings.find((w) => w.code)).toMatchObject({ code: "QueueDoesNotExist", destination: "session" });
    for (const l of logs) {
      expect(l).not.toContain("body-marker-7f3a");
      expect(l).not.toContain("tenant-dev-9c1");
      expect(l).not.toContain("tenant-other");
    }
  });
});
