// Temporary queues (control-plane/src/queues/temp-queues.ts) against a real ElasticMQ: a clone
// has the original's attributes and tags plus ours (FIFO too), leftovers are found by tag, a
// drain moves every message with its attributes (FIFO: group and deduplication id), a drain
// to a missing queue keeps the messages, and deleting a queue twice is fine.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ListQueueTagsCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { forwardBatch } from "../../../control-plane/src/queues/forward-batch.js";
import { SqsClients } from "../../../control-plane/src/queues/sqs-clients.js";
import {
  cloneQueue,
  copiedAttributes,
  deleteQueue,
  findTempQueues,
  moveMessages,
  MoveMessagesError,
  tempQueueName,
} from "../../../control-plane/src/queues/temp-queues.js";
import { eventually } from "../../support/poll.js";
import {
  ELASTICMQ_CREDENTIALS,
  sqsClientFor,
  startElasticmq,
  type ElasticmqServer,
} from "../../env/sqs/elasticmq-server.js";

let server: ElasticmqServer;
let sqs: SQSClient;
let clients: SqsClients;

beforeAll(async () => {
  server = await startElasticmq({ name: "temp-queues" });
  sqs = sqsClientFor(server);
  clients = new SqsClients({
    region: server.region,
    endpoint: server.endpoint,
    credentials: ELASTICMQ_CREDENTIALS,
  });
});

afterAll(async () => {
  clients?.destroy();
  sqs?.destroy();
  await server?.stop();
});

async function createQueue(
  name: string,
  attributes: Record<string, string> = {},
  tags?: Record<string, string>,
) {
  const out = await sqs.send(
    new CreateQueueCommand({ QueueName: name, Attributes: attributes, ...(tags ? { tags } : {}) }),
  );
  return out.QueueUrl!;
}

async function attributesOf(url: string) {
  return (
    (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["All"] }))).Attributes ??
    {}
  );
}

/** Sends messages `from`..`from+count-1`, each with String, Number and Binary attributes. */
async function sendNumbered(
  url: string,
  from: number,
  count: number,
  fifo?: (n: number) => { group: string; dedup: string },
) {
  for (let i = 0; i < count; i += 10) {
    const ns = Array.from({ length: Math.min(10, count - i) }, (_, k) => from + i + k);
    const out = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: ns.map((n) => ({
          Id: `e${n}`,
          MessageBody: JSON.stringify({ n, text: "ünïcode ✓" }),
          MessageAttributes: attributesFor(n),
          MessageSystemAttributes: {
            AWSTraceHeader: {
              DataType: "String",
              StringValue: `Root=1-00000000-${String(n).padStart(24, "0")}`,
            },
          },
          ...(fifo ? { MessageGroupId: fifo(n).group, MessageDeduplicationId: fifo(n).dedup } : {}),
        })),
      }),
    );
    expect(out.Failed ?? []).toEqual([]);
  }
}

function attributesFor(n: number): Record<string, MessageAttributeValue> {
  return {
    tenant: { DataType: "String", StringValue: `t${n % 3}` },
    seq: { DataType: "Number", StringValue: String(n) },
    weight: { DataType: "Number.float", StringValue: `${n}.5` },
    raw: { DataType: "Binary", BinaryValue: Uint8Array.from([n % 256, 0, 255]) },
  };
}

/** Receives (and deletes) until `count` messages came and the queue then stays empty for a second. */
async function receiveAll(url: string, count: number, timeoutMs = 30_000): Promise<Message[]> {
  const got: Message[] = [];
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
    got.push(...batch);
    if (batch.length > 0) await deleteAll(url, batch);
    if (batch.length === 0 && got.length >= count) return got;
    if (Date.now() > deadline) throw new Error(`received ${got.length} of ${count} messages from ${url}`);
  }
}

async function deleteAll(url: string, batch: Message[]) {
  await sqs.send(
    new DeleteMessageBatchCommand({
      QueueUrl: url,
      Entries: batch.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
    }),
  );
}

const bodyN = (m: Message) => (JSON.parse(m.Body!) as { n: number }).n;

describe("cloneQueue", () => {
  it("copies the original's attributes and tags, adds ours (ours win), and leaves out the rest", async () => {
    const dlq = await createQueue("orders-dlq");
    const dlqArn = (await attributesOf(dlq)).QueueArn!;
    const redrive = JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: "4" });
    const original = await createQueue(
      "orders",
      {
        DelaySeconds: "2",
        MaximumMessageSize: "2048",
        MessageRetentionPeriod: "600",
        ReceiveMessageWaitTimeSeconds: "3",
        VisibilityTimeout: "45",
        RedrivePolicy: redrive,
      },
      { team: "payments", "switchyard.dev/role": "not-ours" },
    );
    const name = tempQueueName("t", "orders");
    const url = await cloneQueue(clients, original, name, {
      "switchyard.dev/role": "target",
      "switchyard.dev/owner": "east",
    });

    expect(url.endsWith(`/${name}`)).toBe(true);
    const a = await attributesOf(url);
    expect(a).toMatchObject({
      DelaySeconds: "2",
      ReceiveMessageWaitTimeSeconds: "3",
      VisibilityTimeout: "45",
    });
    // ElasticMQ keeps only some attributes (not MaximumMessageSize, MessageRetentionPeriod, the
    // encryption): whatever of the copied ones the original reports, the clone reports alike.
    const o = await attributesOf(original);
    for (const k of Object.keys(copiedAttributes(o)))
      expect([k, a[k as keyof typeof a]]).toEqual([k, o[k as keyof typeof o]]);
    expect(JSON.parse(a.RedrivePolicy!)).toMatchObject({ deadLetterTargetArn: dlqArn });
    expect(a.QueueArn).not.toBe((await attributesOf(original)).QueueArn);
    const tags = (await sqs.send(new ListQueueTagsCommand({ QueueUrl: url }))).Tags;
    expect(tags).toEqual({
      team: "payments",
      "switchyard.dev/role": "target",
      "switchyard.dev/owner": "east",
    });
  });

  it("clones a FIFO queue as FIFO, with its deduplication settings", async () => {
    const original = await createQueue("payments.fifo", {
      FifoQueue: "true",
      ContentBasedDeduplication: "true",
    });
    const name = tempQueueName("o", "payments.fifo");
    const url = await cloneQueue(clients, original, name, { "switchyard.dev/role": "output" });
    expect(name.endsWith(".fifo")).toBe(true);
    expect(await attributesOf(url)).toMatchObject({ FifoQueue: "true", ContentBasedDeduplication: "true" });
  });

  it("refuses a name whose kind differs from the original's", async () => {
    const original = await createQueue("kinds.fifo", { FifoQueue: "true" });
    await expect(cloneQueue(clients, original, "sy-t-00000000-kinds", {})).rejects.toThrow(
      /must end in \.fifo/,
    );
  });
});

describe("findTempQueues", () => {
  it("finds our queues by every tag asked, never a queue without our prefix", async () => {
    const original = await createQueue("inventory");
    const tags = (role: string, consumer: string) => ({
      "switchyard.dev/owner": "east",
      "switchyard.dev/role": role,
      "switchyard.dev/consumer": consumer,
    });
    const t1 = await cloneQueue(
      clients,
      original,
      tempQueueName("t", "inventory"),
      tags("target", "shop/deployment/api/q"),
    );
    const t2 = await cloneQueue(
      clients,
      original,
      tempQueueName("t", "inventory"),
      tags("target", "shop/deployment/api/q"),
    );
    await cloneQueue(
      clients,
      original,
      tempQueueName("t", "inventory"),
      tags("target", "shop/deployment/other/q"),
    );
    await cloneQueue(
      clients,
      original,
      tempQueueName("o", "inventory"),
      tags("output", "shop/deployment/api/q"),
    );
    await createQueue("not-ours", {}, tags("target", "shop/deployment/api/q"));

    const found = await findTempQueues(clients.local(), {
      "switchyard.dev/owner": "east",
      "switchyard.dev/role": "target",
      "switchyard.dev/consumer": "shop/deployment/api/q",
    });
    expect(found.map((f) => f.url).sort()).toEqual([t1, t2].sort());
    expect(found[0]!.tags["switchyard.dev/role"]).toBe("target");
    expect(await findTempQueues(clients.local(), { "switchyard.dev/owner": "west" })).toEqual([]);
  });
});

describe("moveMessages", () => {
  it("drains every message into the destination with body and attributes intact", async () => {
    const from = await createQueue("drain-from");
    const to = await createQueue("drain-to");
    await sendNumbered(from, 0, 250);

    expect(await moveMessages(clients, from, to)).toBe(250);
    const got = await receiveAll(to, 250);
    expect(got.map(bodyN).sort((a, b) => a - b)).toEqual(Array.from({ length: 250 }, (_, i) => i));
    for (const m of got) {
      const n = bodyN(m);
      expect(JSON.parse(m.Body!)).toEqual({ n, text: "ünïcode ✓" });
      const attrs = m.MessageAttributes!;
      expect(Object.keys(attrs).sort()).toEqual(["raw", "seq", "tenant", "weight"]);
      expect(attrs.tenant).toMatchObject({ DataType: "String", StringValue: `t${n % 3}` });
      expect(attrs.seq).toMatchObject({ DataType: "Number", StringValue: String(n) });
      expect(attrs.weight).toMatchObject({ DataType: "Number.float", StringValue: `${n}.5` });
      expect(attrs.raw!.DataType).toBe("Binary");
      expect([...attrs.raw!.BinaryValue!]).toEqual([n % 256, 0, 255]);
      expect(m.Attributes?.AWSTraceHeader).toBe(`Root=1-00000000-${String(n).padStart(24, "0")}`);
    }
    const a = await attributesOf(from);
    expect([a.ApproximateNumberOfMessages, a.ApproximateNumberOfMessagesNotVisible]).toEqual(["0", "0"]);
  });

  it("keeps FIFO groups, their order and the original deduplication ids", async () => {
    const from = await createQueue("drain-from.fifo", { FifoQueue: "true" });
    const to = await createQueue("drain-to.fifo", { FifoQueue: "true" });
    const fifo = (n: number) => ({ group: `g${n % 4}`, dedup: `order-${n}` });
    await sendNumbered(from, 0, 80, fifo);

    expect(await moveMessages(clients, from, to)).toBe(80);
    const got = await receiveAll(to, 80);
    expect(got).toHaveLength(80);
    for (const m of got) {
      expect(m.Attributes?.MessageGroupId).toBe(fifo(bodyN(m)).group);
      expect(m.Attributes?.MessageDeduplicationId).toBe(fifo(bodyN(m)).dedup);
    }
    for (let g = 0; g < 4; g++) {
      const order = got.filter((m) => m.Attributes?.MessageGroupId === `g${g}`).map(bodyN);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
    // A forward whose delete never happened (a crash in between) is forwarded again later:
    // the destination drops the second copy (same deduplication id, within SQS's window).
    const again = (n: number) => ({ group: "again", dedup: `again-${n}` });
    await sendNumbered(from, 100, 10, again);
    const first = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: from,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 1,
        MessageAttributeNames: ["All"],
        MessageSystemAttributeNames: ["All"],
      }),
    );
    expect(first.Messages?.length).toBeGreaterThan(0);
    expect(await forwardBatch(clients.forQueue(to), to, first.Messages!, true)).toEqual([]);
    await new Promise((r) => setTimeout(r, 1_200));
    expect(await moveMessages(clients, from, to)).toBe(10);
    expect((await receiveAll(to, 10)).map(bodyN).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 10 }, (_, i) => 100 + i),
    );
  });

  it("keeps the messages in the source when the destination is missing, and says so", async () => {
    const from = await createQueue("drain-stuck");
    await sendNumbered(from, 0, 15);
    const missing = `${server.endpoint}/000000000000/no-such-queue`;
    const err: unknown = await moveMessages(clients, from, missing, { visibilityTimeoutSeconds: 1 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(MoveMessagesError);
    expect(err).toMatchObject({ code: "SWITCHYARD_QUEUE_MOVE_FAILED", failed: 15 });
    const to = await createQueue("drain-unstuck");
    expect(await moveMessages(clients, from, to)).toBe(15); // once their visibility timeout passed
    expect(await receiveAll(to, 15)).toHaveLength(15);
  });

  it("rejects when aborted before the source is drained, leaving the rest there", async () => {
    const from = await createQueue("drain-aborted");
    const to = await createQueue("drain-aborted-to");
    await sendNumbered(from, 0, 5);
    const stopped = new Error("control plane stopping");
    await expect(moveMessages(clients, from, to, { signal: AbortSignal.abort(stopped) })).rejects.toBe(
      stopped,
    );
    expect((await attributesOf(from)).ApproximateNumberOfMessages).toBe("5");

    // Aborted mid-way: what was moved is gone from the source, the rest stays, none is hidden.
    await sendNumbered(from, 5, 995);
    const abort = new AbortController();
    const moving = moveMessages(clients, from, to, { signal: abort.signal });
    await eventually(
      "some messages moved",
      async () => Number((await attributesOf(to)).ApproximateNumberOfMessages) >= 100,
    );
    abort.abort(stopped);
    await expect(moving).rejects.toBe(stopped);
    const [left, arrived] = [await attributesOf(from), await attributesOf(to)];
    expect(left.ApproximateNumberOfMessagesNotVisible).toBe("0");
    expect(Number(left.ApproximateNumberOfMessages)).toBeGreaterThan(0);
    expect(Number(left.ApproximateNumberOfMessages) + Number(arrived.ApproximateNumberOfMessages)).toBe(
      1_000,
    );
  });
});

describe("deleteQueue", () => {
  it("deletes, and a second delete of the same queue is fine", async () => {
    const url = await createQueue(tempQueueName("t", "gone"));
    await deleteQueue(clients, url);
    await deleteQueue(clients, url);
    await expect(attributesOf(url)).rejects.toMatchObject({ name: "QueueDoesNotExist" });
  });
});
