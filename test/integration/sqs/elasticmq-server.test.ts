// The SQS server of the test environment (test/env/sqs): two ElasticMQ servers at once, as two
// workload clusters have, driven by the AWS SDK over the AWS JSON protocol — queues with
// attributes and tags, batches with message attributes, FIFO groups and deduplication, batch
// deletes, visibility changes — and what `stop()` and a SIGKILLed owner leave behind (nothing).
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ListQueuesCommand,
  ListQueueTagsCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  TagQueueCommand,
  UntagQueueCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPortListening } from "../../env/ports.js";
import { isSameProcessAlive, processStartTime, sweepOrphans } from "../../env/processes.js";
import { sqsClientFor, startElasticmq, type ElasticmqServer } from "../../env/sqs/elasticmq-server.js";
import { eventually } from "../../support/poll.js";

const root = new URL("../../..", import.meta.url).pathname;
const servers: ElasticmqServer[] = [];
const clients: SQSClient[] = [];
let east: ElasticmqServer;
let west: ElasticmqServer;
let onEast: SQSClient;
let onWest: SQSClient;

beforeAll(async () => {
  // Both started at once; one that started is stopped even when the other failed.
  const started = await Promise.allSettled([
    startElasticmq({ name: "east" }),
    startElasticmq({ name: "west", region: "eu-west-2" }),
  ]);
  for (const s of started) if (s.status === "fulfilled") servers.push(s.value);
  for (const s of started) if (s.status === "rejected") throw s.reason;
  [east, west] = servers as [ElasticmqServer, ElasticmqServer];
  onEast = sqsClientFor(east);
  onWest = sqsClientFor(west);
  clients.push(onEast, onWest);
}, 120_000);

afterAll(async () => {
  for (const c of clients) c.destroy();
  await Promise.all(servers.map((s) => s.stop()));
});

/** Pids of the processes whose command line names a path in `dir` (the server's JVM). */
function processesNaming(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (
        readFileSync(`/proc/${entry}/cmdline`, "utf8")
          .split("\0")
          .some((a) => a.includes(`${dir}/`))
      )
        pids.push(Number(entry));
    } catch {
      /* gone meanwhile */
    }
  }
  return pids;
}

/**
 * Receives until `count` messages arrived; each stays invisible for the queue's visibility timeout,
 * or with `remove` is deleted at once (a FIFO group's next message comes only after that).
 */
async function receive(
  client: SQSClient,
  QueueUrl: string,
  count: number,
  remove = false,
): Promise<Message[]> {
  const got: Message[] = [];
  await eventually(
    `${count} messages from ${QueueUrl}`,
    async () => {
      const r = await client.send(
        new ReceiveMessageCommand({
          QueueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageAttributeNames: ["All"],
          MessageSystemAttributeNames: ["All"],
        }),
      );
      const messages = r.Messages ?? [];
      got.push(...messages);
      if (remove && messages.length > 0)
        await client.send(
          new DeleteMessageBatchCommand({
            QueueUrl,
            Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
          }),
        );
      return got.length >= count;
    },
    { timeoutMs: 15_000, intervalMs: 0 },
  );
  return got;
}

async function queueCounts(client: SQSClient, QueueUrl: string): Promise<[string, string]> {
  const { Attributes: a } = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }),
  );
  return [a?.ApproximateNumberOfMessages ?? "", a?.ApproximateNumberOfMessagesNotVisible ?? ""];
}

/** MD5OfMessageAttributes as SQS defines it (what SDKs of other languages verify on receive). */
function md5OfMessageAttributes(attributes: Record<string, MessageAttributeValue>): string {
  const parts: Buffer[] = [];
  const withLength = (b: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(b.length);
    parts.push(length, b);
  };
  for (const name of Object.keys(attributes).sort()) {
    const v = attributes[name]!;
    withLength(Buffer.from(name));
    withLength(Buffer.from(v.DataType!));
    if (v.BinaryValue) {
      parts.push(Buffer.from([2]));
      withLength(Buffer.from(v.BinaryValue));
    } else {
      parts.push(Buffer.from([1]));
      withLength(Buffer.from(v.StringValue!));
    }
  }
  return createHash("md5").update(Buffer.concat(parts)).digest("hex");
}

describe("ElasticMQ servers of the test environment", () => {
  it("gives every server its own loopback endpoint, directory, region and queue URLs", async () => {
    expect(east.endpoint).toBe(`http://127.0.0.1:${east.port}`);
    expect(west.port).not.toBe(east.port);
    expect(east.dir).not.toBe(west.dir);
    expect(east.dir).toMatch(/\/set-sqs-east-\d+-[0-9a-f]{8}$/);
    const { QueueUrl } = await onWest.send(new CreateQueueCommand({ QueueName: "where" }));
    expect(QueueUrl).toBe(`${west.endpoint}/000000000000/where`);
    const { Attributes } = await onWest.send(
      new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["QueueArn"] }),
    );
    expect(Attributes?.QueueArn).toBe("arn:aws:sqs:eu-west-2:000000000000:where");
  });

  it("creates a queue with attributes and tags, and answers for both", async () => {
    const tags = { team: "payments", "switchyard.dev/session": "s-1" };
    const attributes = { VisibilityTimeout: "45", DelaySeconds: "0", ReceiveMessageWaitTimeSeconds: "1" };
    const { QueueUrl } = await onEast.send(
      new CreateQueueCommand({ QueueName: "orders", Attributes: attributes, tags }),
    );
    expect(QueueUrl).toBe(`${east.endpoint}/000000000000/orders`);
    expect((await onEast.send(new ListQueueTagsCommand({ QueueUrl }))).Tags).toEqual(tags);
    const { Attributes } = await onEast.send(
      new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ["All"] }),
    );
    expect(Attributes).toMatchObject({
      ...attributes,
      QueueArn: "arn:aws:sqs:us-east-1:000000000000:orders",
      ApproximateNumberOfMessages: "0",
    });
    // Creating it again with the same attributes is a no-op; with others it is refused.
    expect(
      (await onEast.send(new CreateQueueCommand({ QueueName: "orders", Attributes: attributes }))).QueueUrl,
    ).toBe(QueueUrl);
    await expect(
      onEast.send(new CreateQueueCommand({ QueueName: "orders", Attributes: { VisibilityTimeout: "46" } })),
    ).rejects.toMatchObject({ name: "QueueNameExists" });
    await onEast.send(new TagQueueCommand({ QueueUrl, Tags: { added: "1" } }));
    await onEast.send(new UntagQueueCommand({ QueueUrl, TagKeys: ["team"] }));
    expect((await onEast.send(new ListQueueTagsCommand({ QueueUrl }))).Tags).toEqual({
      "switchyard.dev/session": "s-1",
      added: "1",
    });
    expect((await onEast.send(new GetQueueUrlCommand({ QueueName: "orders" }))).QueueUrl).toBe(QueueUrl);
  });

  it("sends a batch with String, Number and Binary message attributes and receives every attribute", async () => {
    const { QueueUrl } = await onEast.send(new CreateQueueCommand({ QueueName: "batch" }));
    const attributes = (tenant: string): Record<string, MessageAttributeValue> => ({
      tenant: { DataType: "String", StringValue: tenant },
      priority: { DataType: "Number", StringValue: "3.50" },
      region: { DataType: "String.custom", StringValue: "zürich" },
      digest: { DataType: "Binary", BinaryValue: new Uint8Array([0, 255, 7]) },
    });
    const sent = await onEast.send(
      new SendMessageBatchCommand({
        QueueUrl,
        Entries: [
          { Id: "t7", MessageBody: "order 1", MessageAttributes: attributes("7") },
          { Id: "t8", MessageBody: "order 2", MessageAttributes: attributes("8") },
          { Id: "plain", MessageBody: "order 3" },
          // One bad entry fails on its own; the others are sent.
          { Id: "bad", MessageBody: "nul \u0000 is not allowed" },
        ],
      }),
    );
    expect(sent.Successful?.map((s) => s.Id).sort()).toEqual(["plain", "t7", "t8"]);
    expect(sent.Failed).toEqual([expect.objectContaining({ Id: "bad", SenderFault: true })]);
    const t7 = sent.Successful!.find((s) => s.Id === "t7")!;
    expect(t7.MD5OfMessageAttributes).toBe(md5OfMessageAttributes(attributes("7")));

    const messages = await receive(onEast, QueueUrl!, 3);
    expect(messages.map((m) => m.Body).sort()).toEqual(["order 1", "order 2", "order 3"]);
    const first = messages.find((m) => m.Body === "order 1")!;
    expect(first.MessageId).toBe(t7.MessageId);
    expect(first.MessageAttributes).toEqual(attributes("7"));
    expect(first.MD5OfMessageAttributes).toBe(md5OfMessageAttributes(attributes("7")));
    expect(first.Attributes).toMatchObject({ ApproximateReceiveCount: "1", SenderId: "127.0.0.1" });
    expect(Number(first.Attributes?.SentTimestamp)).toBeGreaterThan(Date.now() - 60_000);
    expect(Number(first.Attributes?.ApproximateFirstReceiveTimestamp)).toBeGreaterThanOrEqual(
      Number(first.Attributes?.SentTimestamp),
    );
    expect(messages.find((m) => m.Body === "order 3")!.MessageAttributes).toBeUndefined();

    // A malformed batch fails as a whole.
    await expect(
      onEast.send(
        new SendMessageBatchCommand({
          QueueUrl,
          Entries: [
            { Id: "same", MessageBody: "a" },
            { Id: "same", MessageBody: "b" },
          ],
        }),
      ),
    ).rejects.toMatchObject({ name: "BatchEntryIdsNotDistinct" });
    await expect(
      onEast.send(
        new SendMessageBatchCommand({
          QueueUrl,
          Entries: Array.from({ length: 11 }, (_, i) => ({ Id: `m${i}`, MessageBody: "x" })),
        }),
      ),
    ).rejects.toMatchObject({ name: "TooManyEntriesInBatchRequest" });
    expect(await queueCounts(onEast, QueueUrl!)).toEqual(["0", "3"]);
  });

  it("keeps FIFO order within a group and drops a repeated MessageDeduplicationId", async () => {
    const { QueueUrl } = await onEast.send(
      new CreateQueueCommand({
        QueueName: "orders.fifo",
        Attributes: { FifoQueue: "true" },
        tags: { kind: "fifo" },
      }),
    );
    expect((await onEast.send(new ListQueueTagsCommand({ QueueUrl }))).Tags).toEqual({ kind: "fifo" });
    const sent = await onEast.send(
      new SendMessageBatchCommand({
        QueueUrl,
        Entries: [
          { Id: "a1", MessageBody: "a-1", MessageGroupId: "a", MessageDeduplicationId: "d-a1" },
          { Id: "a2", MessageBody: "a-2", MessageGroupId: "a", MessageDeduplicationId: "d-a2" },
          { Id: "b1", MessageBody: "b-1", MessageGroupId: "b", MessageDeduplicationId: "d-b1" },
          { Id: "again", MessageBody: "a-1 again", MessageGroupId: "a", MessageDeduplicationId: "d-a1" },
          { Id: "nogroup", MessageBody: "x", MessageDeduplicationId: "d-x" },
        ],
      }),
    );
    // The duplicate is accepted and answered with the first message's id, not delivered again.
    const id = (entry: string) => sent.Successful!.find((s) => s.Id === entry)?.MessageId;
    expect(id("again")).toBe(id("a1"));
    expect(sent.Failed).toEqual([expect.objectContaining({ Id: "nogroup", Code: "MissingParameter" })]);
    await onEast.send(
      new SendMessageCommand({
        QueueUrl,
        MessageBody: "a-3",
        MessageGroupId: "a",
        MessageDeduplicationId: "d-a3",
      }),
    );

    const messages = await receive(onEast, QueueUrl!, 4, true);
    expect(messages.filter((m) => m.Attributes?.MessageGroupId === "a").map((m) => m.Body)).toEqual([
      "a-1",
      "a-2",
      "a-3",
    ]);
    expect(messages.map((m) => m.Body).sort()).toEqual(["a-1", "a-2", "a-3", "b-1"]);
    const a1 = messages.find((m) => m.Body === "a-1")!;
    expect(a1.Attributes).toMatchObject({ MessageGroupId: "a", MessageDeduplicationId: "d-a1" });
    const sequence = (body: string) =>
      BigInt(messages.find((m) => m.Body === body)!.Attributes!.SequenceNumber!);
    expect(sequence("a-1") < sequence("a-2") && sequence("a-2") < sequence("a-3")).toBe(true);
  });

  it("deletes a batch and reports each bad receipt handle on its own", async () => {
    const { QueueUrl } = await onEast.send(new CreateQueueCommand({ QueueName: "deletes" }));
    await onEast.send(
      new SendMessageBatchCommand({
        QueueUrl,
        Entries: ["1", "2", "3"].map((n) => ({ Id: n, MessageBody: `m${n}` })),
      }),
    );
    const messages = await receive(onEast, QueueUrl!, 3);
    const deleted = await onEast.send(
      new DeleteMessageBatchCommand({
        QueueUrl,
        Entries: [
          ...messages.map((m, i) => ({ Id: `ok${i}`, ReceiptHandle: m.ReceiptHandle! })),
          { Id: "garbage", ReceiptHandle: "not-a-receipt-handle" },
        ],
      }),
    );
    expect(deleted.Successful?.map((s) => s.Id).sort()).toEqual(["ok0", "ok1", "ok2"]);
    expect(deleted.Failed).toEqual([
      expect.objectContaining({ Id: "garbage", Code: "ReceiptHandleIsInvalid", SenderFault: true }),
    ]);
    expect(await queueCounts(onEast, QueueUrl!)).toEqual(["0", "0"]);
  });

  it("changes a message's visibility", async () => {
    const { QueueUrl } = await onEast.send(
      new CreateQueueCommand({ QueueName: "visibility", Attributes: { VisibilityTimeout: "60" } }),
    );
    await onEast.send(new SendMessageCommand({ QueueUrl, MessageBody: "work" }));
    const [first] = await receive(onEast, QueueUrl!, 1);
    expect(await queueCounts(onEast, QueueUrl!)).toEqual(["0", "1"]);
    // Back at once, received a second time with a new receipt handle.
    await onEast.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl,
        ReceiptHandle: first!.ReceiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    const [second] = await receive(onEast, QueueUrl!, 1);
    expect(second!.MessageId).toBe(first!.MessageId);
    expect(second!.Attributes?.ApproximateReceiveCount).toBe("2");
    expect(second!.ReceiptHandle).not.toBe(first!.ReceiptHandle);
    // ElasticMQ refuses the older handle (SQS would accept it and do nothing).
    await expect(
      onEast.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl,
          ReceiptHandle: first!.ReceiptHandle,
          VisibilityTimeout: 0,
        }),
      ),
    ).rejects.toMatchObject({ name: "ReceiptHandleIsInvalid" });
    // Back after a second.
    await onEast.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl,
        ReceiptHandle: second!.ReceiptHandle,
        VisibilityTimeout: 1,
      }),
    );
    const hidden = Date.now();
    const [third] = await receive(onEast, QueueUrl!, 1);
    expect(Date.now() - hidden).toBeGreaterThanOrEqual(900);
    expect(third!.Attributes?.ApproximateReceiveCount).toBe("3");
  });

  it("keeps the two servers' queues apart", async () => {
    const [onE, onW] = await Promise.all(
      [onEast, onWest].map((c) => c.send(new CreateQueueCommand({ QueueName: "shared" }))),
    );
    expect(onE!.QueueUrl).toBe(`${east.endpoint}/000000000000/shared`);
    expect(onW!.QueueUrl).toBe(`${west.endpoint}/000000000000/shared`);
    await onEast.send(new SendMessageCommand({ QueueUrl: onE!.QueueUrl, MessageBody: "east only" }));
    expect(await queueCounts(onEast, onE!.QueueUrl!)).toEqual(["1", "0"]);
    expect(await queueCounts(onWest, onW!.QueueUrl!)).toEqual(["0", "0"]);
    const r = await onWest.send(new ReceiveMessageCommand({ QueueUrl: onW!.QueueUrl, WaitTimeSeconds: 0 }));
    expect(r.Messages ?? []).toEqual([]);
    await expect(onWest.send(new GetQueueUrlCommand({ QueueName: "orders" }))).rejects.toMatchObject({
      name: "QueueDoesNotExist",
    });
    const eastQueues = (await onEast.send(new ListQueuesCommand({}))).QueueUrls ?? [];
    const westQueues = (await onWest.send(new ListQueuesCommand({}))).QueueUrls ?? [];
    expect(eastQueues.every((u) => u.startsWith(`${east.endpoint}/`))).toBe(true);
    expect(westQueues.map((u) => u.slice(west.endpoint.length)).sort()).toEqual([
      "/000000000000/shared",
      "/000000000000/where",
    ]);
  });

  it("refuses a region or a name it could not use, naming the option", async () => {
    await expect(startElasticmq({ region: "elasticmq" })).rejects.toThrow(/region "elasticmq"/);
    await expect(startElasticmq({ name: "../x" })).rejects.toThrow(/name "\.\.\/x"/);
  });

  it("stop() closes the port, removes the directory and leaves no java process", async () => {
    const server = await startElasticmq({ name: "stopped" });
    const jvms = processesNaming(server.dir);
    expect(jvms).toHaveLength(1);
    expect(readFileSync(`/proc/${jvms[0]}/cmdline`, "utf8")).toContain("org.elasticmq.server.Main");
    const start = processStartTime(jvms[0]!)!;
    expect(await isPortListening(server.port)).toBe(true);
    await server.stop();
    await server.stop(); // idempotent
    expect(isSameProcessAlive(jvms[0]!, start)).toBe(false);
    expect(processesNaming(server.dir)).toEqual([]);
    expect(existsSync(server.dir)).toBe(false);
    expect(await isPortListening(server.port)).toBe(false);
  });

  it("a SIGKILLed owner's server is killed and removed by the next sweep", async () => {
    const owner = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "--input-type=module",
        "-e",
        `const { startElasticmq } = await import("./test/env/sqs/elasticmq-server.ts");
         const s = await startElasticmq({ name: "orphan" });
         console.log(JSON.stringify({ dir: s.dir, port: s.port }));
         setInterval(() => {}, 1000);`,
      ],
      { cwd: root, stdio: ["ignore", "pipe", "pipe"] },
    );
    let output = "";
    const started = await new Promise<{ dir: string; port: number }>((resolve, reject) => {
      owner.stdout.on("data", (b: Buffer) => {
        output += b.toString();
        const line = output.split("\n").find((l) => l.startsWith("{"));
        if (line) resolve(JSON.parse(line) as { dir: string; port: number });
      });
      owner.stderr.on("data", (b: Buffer) => (output += b.toString()));
      owner.on("exit", (code) =>
        reject(new Error(`the owner exited (${code}) before its server was up:\n${output}`)),
      );
    });
    const [jvm] = processesNaming(started.dir);
    expect(jvm, `no java process names ${started.dir}`).toBeDefined();
    const start = processStartTime(jvm!)!;
    owner.kill("SIGKILL");
    await new Promise((resolve) => owner.once("exit", resolve));
    expect(isSameProcessAlive(jvm!, start)).toBe(true); // no hook ran: an orphan now
    await sweepOrphans();
    // A sweep running in parallel elsewhere may take it first: what counts is that it goes.
    await eventually("the orphaned ElasticMQ to be gone", () => !isSameProcessAlive(jvm!, start), {
      timeoutMs: 15_000,
    });
    await eventually("its directory to be removed", () => !existsSync(started.dir), { timeoutMs: 15_000 });
    // A SIGKILLed JVM's threads finish exiting (and its socket closes) a moment after its main thread.
    await eventually("its port to close", async () => !(await isPortListening(started.port)), {
      timeoutMs: 15_000,
    });
  });
});
