// The SQS side of temporary queues (DESIGN §7): their names, making one as a clone of the
// original, finding them again by tag, draining one back into the original, deleting it.
//
// Names are `sy-<role>-<8 random hex>-<original name, truncated>` (≤ 80 characters, `.fifo`
// kept): random, because SQS refuses for 60 s to make a queue of a name just deleted, and
// the prefix is how ListQueues finds our queues. What a queue is for is in its tags
// (queue-refs.ts), so a restarted control plane finds leftovers by tag, never by name.
//
// A clone copies the original's attributes that shape how messages behave, so the deployed
// consumers and the local one see the queue they were written for: DelaySeconds,
// MaximumMessageSize, MessageRetentionPeriod, ReceiveMessageWaitTimeSeconds,
// VisibilityTimeout, RedrivePolicy (poison messages still reach the original's dead-letter
// queue), FifoQueue, ContentBasedDeduplication, DeduplicationScope, FifoThroughputLimit,
// and the encryption (KmsMasterKeyId, KmsDataKeyReusePeriodSeconds, SqsManagedSseEnabled —
// messages at rest stay as protected as in the original). Never the Policy (it grants
// senders access to the original's ARN; only the splitter writes a temporary queue, with
// this cluster's own credentials), RedriveAllowPolicy (who may use it as a dead-letter
// queue), the ARN, counters or timestamps. Tags: the original's, then ours (ours win; the
// original's are dropped first when the 50-tag limit would be passed).
import { randomBytes } from "node:crypto";
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ListQueuesCommand,
  ListQueueTagsCommand,
  type QueueAttributeName,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { deleteBatch, forwardBatch, receiveBatch } from "./forward-batch.js";
import { describeSqsError, isQueueMissing } from "./sqs-errors.js";
import { isFifo, queueNameOf, type SqsClients } from "./sqs-clients.js";

export const TEMP_QUEUE_PREFIX = "sy-";
const MAX_NAME = 80;
const MAX_TAGS = 50;

const COPIED: readonly QueueAttributeName[] = [
  "DelaySeconds",
  "MaximumMessageSize",
  "MessageRetentionPeriod",
  "ReceiveMessageWaitTimeSeconds",
  "VisibilityTimeout",
  "RedrivePolicy",
  "FifoQueue",
  "ContentBasedDeduplication",
  "DeduplicationScope",
  "FifoThroughputLimit",
  "KmsMasterKeyId",
  "KmsDataKeyReusePeriodSeconds",
  "SqsManagedSseEnabled",
];
// Settable on FIFO queues only: a standard queue's CreateQueue refuses them.
const FIFO_ONLY = new Set<string>([
  "FifoQueue",
  "ContentBasedDeduplication",
  "DeduplicationScope",
  "FifoThroughputLimit",
]);

/** `sy-<role>-<8 hex>-<original>` within 80 characters; a FIFO original's name keeps `.fifo`. */
export function tempQueueName(role: "t" | "o", originalName: string): string {
  const fifo = originalName.endsWith(".fifo");
  const base = fifo ? originalName.slice(0, -".fifo".length) : originalName;
  const prefix = `${TEMP_QUEUE_PREFIX}${role}-${randomBytes(4).toString("hex")}-`;
  const suffix = fifo ? ".fifo" : "";
  return prefix + base.slice(0, MAX_NAME - prefix.length - suffix.length) + suffix;
}

/** The attributes a clone is made with, from the original's (see the header for why these). */
export function copiedAttributes(original: Partial<Record<string, string>>): Record<string, string> {
  const fifo = original.FifoQueue === "true";
  const out: Record<string, string> = {};
  for (const name of COPIED) {
    const v = original[name];
    if (v === undefined || v === "") continue;
    if (FIFO_ONLY.has(name) && !fifo) continue;
    // A queue is encrypted by its KMS key or by SQS-managed keys, never both.
    if (name === "SqsManagedSseEnabled" && original.KmsMasterKeyId) continue;
    out[name] = v;
  }
  return out;
}

/** Makes queue `name` next to the original, with its attributes and tags plus `tags`; resolves with its URL. */
export async function cloneQueue(
  clients: SqsClients,
  originalUrl: string,
  name: string,
  tags: Record<string, string>,
): Promise<string> {
  if (isFifo(originalUrl) !== isFifo(name))
    throw new Error(
      `temporary queue ${name} must ${isFifo(originalUrl) ? "" : "not "}end in .fifo like ${queueNameOf(originalUrl)}`,
    );
  const client = clients.forQueue(originalUrl);
  const [attrs, originalTags] = await Promise.all([
    client.send(new GetQueueAttributesCommand({ QueueUrl: originalUrl, AttributeNames: ["All"] })),
    client.send(new ListQueueTagsCommand({ QueueUrl: originalUrl })),
  ]);
  const kept = Object.entries(originalTags.Tags ?? {}).filter(([k]) => !(k in tags));
  const merged = {
    ...Object.fromEntries(kept.slice(0, Math.max(0, MAX_TAGS - Object.keys(tags).length))),
    ...tags,
  };
  const out = await client.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: copiedAttributes(attrs.Attributes ?? {}),
      tags: merged,
    }),
  );
  if (!out.QueueUrl) throw new Error(`SQS returned no URL for the new queue ${name}`);
  return out.QueueUrl;
}

/** Our queues (`sy-` names) on this SQS whose tags include every entry of `match`. */
export async function findTempQueues(
  client: SQSClient,
  match: Record<string, string>,
): Promise<{ url: string; tags: Record<string, string> }[]> {
  const urls: string[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(
      new ListQueuesCommand({
        QueueNamePrefix: TEMP_QUEUE_PREFIX,
        MaxResults: 1000,
        ...(token ? { NextToken: token } : {}),
      }),
    );
    urls.push(...(page.QueueUrls ?? []));
    token = page.NextToken;
  } while (token);
  const found: { url: string; tags: Record<string, string> }[] = [];
  // A few at a time: one ListQueueTags per queue, and SQS throttles bursts.
  for (let i = 0; i < urls.length; i += 8) {
    const tagged = await Promise.all(
      urls.slice(i, i + 8).map(async (url) => {
        try {
          const out = await client.send(new ListQueueTagsCommand({ QueueUrl: url }));
          return { url, tags: out.Tags ?? {} };
        } catch (err) {
          if (isQueueMissing(err)) return undefined; // deleted since it was listed
          throw err;
        }
      }),
    );
    for (const q of tagged) if (q && Object.entries(match).every(([k, v]) => q.tags[k] === v)) found.push(q);
  }
  return found;
}

export interface MoveOptions {
  /**
   * Stops the move before `from` is drained: the batch in hand is still forwarded and deleted
   * (a poll running ends within a second), then the call rejects with the signal's reason.
   */
  signal?: AbortSignal;
  /** How long `from` must return nothing before its counts are checked, ms (default 1 500). */
  untilEmptyForMs?: number;
  /** How long a received message stays hidden, s (default 30): when one that failed is tried again. */
  visibilityTimeoutSeconds?: number;
}

/** Some messages could not be moved: they stay in the source queue. */
export class MoveMessagesError extends Error {
  override readonly name = "MoveMessagesError";
  readonly code = "SWITCHYARD_QUEUE_MOVE_FAILED";
  constructor(
    readonly failed: number,
    readonly lastCode: string,
    from: string,
    to: string,
  ) {
    super(
      `${failed} message(s) of ${from} could not be forwarded to ${to} (last error ${lastCode}); they stay in ${from} and are moved by the next attempt`,
    );
  }
}

/**
 * Moves every message of `fromUrl` to `toUrl` (faithful forwards, each deleted from `from`
 * only once sent) until `from` returned nothing for `untilEmptyForMs` and SQS counts no
 * message in it, visible, in flight or delayed. Resolves with the count moved (so a caller
 * may delete `from` then); rejects with the signal's reason when aborted first, and with
 * MoveMessagesError when some could not be moved, once the rest is moved or one of those
 * comes round again (its visibility timeout passed): they stay in `from` for the next call.
 */
export async function moveMessages(
  clients: SqsClients,
  fromUrl: string,
  toUrl: string,
  opts: MoveOptions = {},
): Promise<number> {
  const from = clients.forQueue(fromUrl);
  const to = clients.forQueue(toUrl);
  const quietMs = opts.untilEmptyForMs ?? 1_500;
  const fifo = isFifo(toUrl);
  let moved = 0;
  const failedIds = new Set<string>();
  let lastCode = "";
  let emptySince: number | undefined;
  const giveUp = () => new MoveMessagesError(failedIds.size, lastCode, fromUrl, toUrl);
  for (;;) {
    opts.signal?.throwIfAborted();
    const batch = await receiveBatch(from, fromUrl, {
      waitTimeSeconds: 1,
      visibilityTimeoutSeconds: opts.visibilityTimeoutSeconds ?? 30,
    });
    if (batch.length === 0) {
      emptySince ??= Date.now();
      if (Date.now() - emptySince < quietMs) continue;
      if (failedIds.size > 0) throw giveUp();
      if (await isEmpty(from, fromUrl)) break;
      continue;
    }
    emptySince = undefined;
    // One that failed is back: this pass has been round every message it can take.
    if (batch.some((m) => failedIds.has(m.MessageId ?? ""))) throw giveUp();
    const sendFailures = await forwardBatch(to, toUrl, batch, fifo);
    const notSent = new Set(sendFailures.map((f) => f.index));
    const sent = batch.filter((_, i) => !notSent.has(i));
    const deleteFailures = await deleteBatch(from, fromUrl, sent);
    moved += sent.length - deleteFailures.length;
    for (const f of sendFailures) failedIds.add(batch[f.index]!.MessageId ?? "");
    lastCode = sendFailures.at(-1)?.code ?? lastCode;
  }
  return moved;
}

async function isEmpty(client: SQSClient, url: string): Promise<boolean> {
  const out = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
      ],
    }),
  );
  const a = out.Attributes ?? {};
  return [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
  ].every((k) => Number(a[k as QueueAttributeName] ?? "0") === 0);
}

/** Deletes the queue; one already gone is success. */
export async function deleteQueue(clients: SqsClients, url: string): Promise<void> {
  try {
    await clients.forQueue(url).send(new DeleteQueueCommand({ QueueUrl: url }));
  } catch (err) {
    if (!isQueueMissing(err))
      throw new Error(`failed to delete queue ${url}: ${describeSqsError(err).message}`, { cause: err });
  }
}

/**
 * Drains `fromUrl` into `toUrl` and deletes it: how a temporary queue is put away. A `from`
 * that is already gone is done (an earlier pass put it away); a missing `to` is an error and
 * `from` is kept, with its messages.
 */
export async function drainAndDelete(
  clients: SqsClients,
  fromUrl: string,
  toUrl: string,
  opts: MoveOptions = {},
): Promise<number> {
  try {
    await clients
      .forQueue(fromUrl)
      .send(new GetQueueAttributesCommand({ QueueUrl: fromUrl, AttributeNames: ["QueueArn"] }));
  } catch (err) {
    if (isQueueMissing(err)) return 0;
    throw err;
  }
  const moved = await moveMessages(clients, fromUrl, toUrl, opts);
  await deleteQueue(clients, fromUrl);
  return moved;
}
