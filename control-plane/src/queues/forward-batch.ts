// One batch's trip from a queue to another, as both the splitter and the drain of a
// temporary queue make it: receive (every message attribute and system attribute), forward
// faithfully, delete what was forwarded. A forward keeps the body, every message attribute
// (String/Number/Binary, custom DataType kept), the AWSTraceHeader system attribute, and on a
// FIFO destination the message group and the original's deduplication id (else its
// MessageId), so a re-forward after a crash is dropped by SQS within its 5-minute window. On
// a standard destination the forward has DelaySeconds 0: the message has already waited out
// its delay on the queue it came from (a FIFO queue takes no per-message delay, so its own
// DelaySeconds applies again). Entries whose send failed are retried (bounded, with backoff)
// while the failure is transient; a message refused for itself (too large, bad attribute) is
// reported at once. Nothing here deletes a message whose forward did not succeed.
import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type Message,
  type MessageAttributeValue,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { retry, type BackoffPolicy } from "../../../lib/backoff.js";
import { describeSqsError, isTransient, shapeName } from "./sqs-errors.js";

/** A message that was not forwarded (or not deleted), by its index in the batch given. */
export interface BatchFailure {
  index: number;
  code: string;
  message: string;
  /** SQS refused the message itself: sending it again will not help. */
  senderFault: boolean;
}

/** SQS's limit on one SendMessageBatch request (the sum of its messages), bytes. */
const MAX_BATCH_BYTES = 262_144;
const RETRY: BackoffPolicy = { initialMs: 100, maxMs: 2_000, jitter: 0.2 };
const ATTEMPTS = 4;

class EntriesFailed extends Error {}

export interface ReceiveOptions {
  /** Long-poll wait, s (0–20). */
  waitTimeSeconds: number;
  /** How long received messages stay hidden from other receivers, s. */
  visibilityTimeoutSeconds: number;
}

/**
 * Up to 10 messages with all their attributes. Never cut short: a long poll abandoned by its
 * client still takes the messages that arrive meanwhile (ElasticMQ does, and SQS may), hiding
 * them for their visibility timeout, so a stop waits for the poll to end instead.
 */
export async function receiveBatch(client: SQSClient, url: string, o: ReceiveOptions): Promise<Message[]> {
  const out = await client.send(
    new ReceiveMessageCommand({
      QueueUrl: url,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: o.waitTimeSeconds,
      VisibilityTimeout: o.visibilityTimeoutSeconds,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["All"],
    }),
  );
  return out.Messages ?? [];
}

/** The SendMessageBatch entry that forwards `m` as it was sent. */
export function forwardEntry(m: Message, id: string, fifoDestination: boolean): SendMessageBatchRequestEntry {
  const e: SendMessageBatchRequestEntry = { Id: id, MessageBody: m.Body ?? "" };
  const attrs = Object.entries(m.MessageAttributes ?? {});
  if (attrs.length > 0)
    e.MessageAttributes = Object.fromEntries(attrs.map(([k, v]) => [k, attributeCopy(v)]));
  const trace = m.Attributes?.AWSTraceHeader;
  if (trace) e.MessageSystemAttributes = { AWSTraceHeader: { DataType: "String", StringValue: trace } };
  if (fifoDestination) {
    e.MessageGroupId = m.Attributes?.MessageGroupId ?? m.MessageId;
    e.MessageDeduplicationId = m.Attributes?.MessageDeduplicationId ?? m.MessageId;
  } else {
    e.DelaySeconds = 0;
  }
  return e;
}

function attributeCopy(v: MessageAttributeValue): MessageAttributeValue {
  const c: MessageAttributeValue = { DataType: v.DataType };
  if (v.StringValue !== undefined) c.StringValue = v.StringValue;
  if (v.BinaryValue !== undefined) c.BinaryValue = v.BinaryValue;
  return c;
}

/** Bytes SQS counts for an entry: body, and each attribute's name, type and value. */
function entryBytes(e: SendMessageBatchRequestEntry): number {
  let n = Buffer.byteLength(e.MessageBody ?? "");
  for (const [k, v] of Object.entries(e.MessageAttributes ?? {})) {
    n += Buffer.byteLength(k) + Buffer.byteLength(v.DataType ?? "");
    n += v.StringValue !== undefined ? Buffer.byteLength(v.StringValue) : (v.BinaryValue?.byteLength ?? 0);
  }
  return n;
}

/**
 * Sends `messages` to `toUrl`, in order, in as many requests as SQS's batch size limit needs.
 * Resolves with the messages that were not sent (none: all were); never rejects.
 */
export async function forwardBatch(
  client: SQSClient,
  toUrl: string,
  messages: readonly Message[],
  fifoDestination: boolean,
): Promise<BatchFailure[]> {
  const failures: BatchFailure[] = [];
  let chunk: { index: number; entry: SendMessageBatchRequestEntry }[] = [];
  let bytes = 0;
  for (const [index, m] of messages.entries()) {
    const entry = forwardEntry(m, `m${index}`, fifoDestination);
    const size = entryBytes(entry);
    if (chunk.length > 0 && (chunk.length === 10 || bytes + size > MAX_BATCH_BYTES)) {
      await sendEntries(client, toUrl, chunk, failures);
      chunk = [];
      bytes = 0;
    }
    chunk.push({ index, entry });
    bytes += size;
  }
  if (chunk.length > 0) await sendEntries(client, toUrl, chunk, failures);
  return failures.sort((a, b) => a.index - b.index);
}

async function sendEntries(
  client: SQSClient,
  url: string,
  entries: { index: number; entry: SendMessageBatchRequestEntry }[],
  failures: BatchFailure[],
): Promise<void> {
  const byId = new Map(entries.map((e) => [e.entry.Id!, e]));
  const failed = await batchWithRetry(
    entries.map((e) => ({ id: e.entry.Id!, index: e.index })),
    (ids) =>
      client.send(
        new SendMessageBatchCommand({ QueueUrl: url, Entries: ids.map((id) => byId.get(id)!.entry) }),
      ),
  );
  failures.push(...failed);
}

/** Deletes the messages by receipt handle; resolves with those that were not deleted, never rejects. */
export async function deleteBatch(
  client: SQSClient,
  url: string,
  messages: readonly Message[],
): Promise<BatchFailure[]> {
  if (messages.length === 0) return [];
  const failed = await batchWithRetry(
    messages.map((_, index) => ({ id: `d${index}`, index })),
    (ids) =>
      client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: ids.map((id) => ({ Id: id, ReceiptHandle: messages[Number(id.slice(1))]!.ReceiptHandle })),
        }),
      ),
  );
  return failed.sort((a, b) => a.index - b.index);
}

interface BatchResult {
  Successful?: { Id: string | undefined }[] | undefined;
  Failed?:
    | {
        Id: string | undefined;
        Code?: string | undefined;
        Message?: string | undefined;
        SenderFault?: boolean | undefined;
      }[]
    | undefined;
}

/**
 * Runs a batch call until every entry succeeded, an entry failed for itself (SenderFault), or
 * the attempts ran out; the call is retried for the entries still pending when it failed as a
 * whole with a transient error or partly with server faults. Resolves with the failures.
 */
async function batchWithRetry(
  entries: readonly { id: string; index: number }[],
  call: (ids: string[]) => Promise<BatchResult>,
): Promise<BatchFailure[]> {
  const failures: BatchFailure[] = [];
  let pending = entries;
  const last = new Map<string, BatchFailure>();
  try {
    await retry({
      policy: RETRY,
      maxAttempts: ATTEMPTS,
      isFatal: (err) => !(err instanceof EntriesFailed) && !isTransient(err),
      attempt: async () => {
        const out = await call(pending.map((p) => p.id));
        const done = new Set((out.Successful ?? []).map((s) => s.Id));
        const failed = new Map((out.Failed ?? []).map((f) => [f.Id, f]));
        const again: (typeof pending)[number][] = [];
        for (const p of pending) {
          if (done.has(p.id)) continue;
          const f = failed.get(p.id);
          const failure: BatchFailure = {
            index: p.index,
            code: f?.Code ? shapeName(f.Code) : "NotInResponse",
            message: f?.Message ?? "SQS reported the entry neither done nor failed",
            senderFault: f?.SenderFault ?? false,
          };
          if (failure.senderFault) failures.push(failure);
          else {
            again.push(p);
            last.set(p.id, failure);
          }
        }
        pending = again;
        if (again.length > 0) throw new EntriesFailed();
      },
    });
  } catch (err) {
    const whole = err instanceof EntriesFailed ? undefined : describeSqsError(err);
    for (const p of pending)
      failures.push(whole ? { index: p.index, ...whole, senderFault: false } : last.get(p.id)!);
  }
  return failures;
}
