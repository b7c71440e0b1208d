// The queue splitter (DESIGN §7): consumes an original queue and forwards each message to the
// deployed consumers' temporary queue, to sessions' output queues, or both, as `decide` says.
// Per batch: receive up to 10 (every attribute), decide each, one SendMessageBatch per
// destination, then delete from the original each message all of whose forwards succeeded.
//
// The splitting is at least once, never lost: a message is deleted from the original only
// after every forward of it succeeded, so a failed forward (network, throttling, a
// destination gone) leaves it there to come back after its visibility timeout, and a crash
// or failed delete between forward and delete forwards it again — a FIFO destination drops
// that copy (the original's deduplication id, within SQS's 5-minute window), a standard one
// delivers it twice. Errors are logged (codes and queue URLs, never bodies or attribute
// values), counted and backed off; the loops keep going until `stop()`, which starts no new
// receive and resolves once the polls running have ended (within `waitTimeSeconds`) and
// what they brought is forwarded and deleted. A poll is never abandoned: SQS implementations
// hand messages to a poll whose client went away, hiding them for their visibility timeout.
import type { Message } from "@aws-sdk/client-sqs";
import type { Logger } from "pino";
import { sleep } from "../../../lib/abortable-sleep.js";
import { Backoff } from "../../../lib/backoff.js";
import { integerIn, OptionError } from "../../../lib/option-error.js";
import { deleteBatch, forwardBatch, receiveBatch, type BatchFailure } from "./forward-batch.js";
import type { SplitDestination, SplitErrorStage, SplitterMetrics } from "./queue-metrics.js";
import { describeSqsError } from "./sqs-errors.js";
import { isFifo, targetOf, type SqsClients } from "./sqs-clients.js";

export interface SplitMessage {
  messageId: string;
  body: string;
  /** Message attributes: a String's value, a Number's as a string, a Binary's as base64. */
  attributes: Readonly<Record<string, string>>;
}

export interface SplitDecision {
  /** Session output queue URLs the message goes to. */
  outputs: readonly string[];
  /** Also (or only) to the deployed consumers' queue. No outputs counts as true. */
  toTarget: boolean;
}

export interface QueueSplitterOptions {
  clients: SqsClients;
  originalQueueUrl: string;
  /** The deployed consumers' temporary queue. */
  targetQueueUrl: string;
  /** Called per message; may answer differently from one batch to the next. */
  decide: (m: SplitMessage) => SplitDecision;
  metrics?: SplitterMetrics;
  logger?: Logger;
  /** Long-poll wait of each receive, s (0–20, default 1): also about how long a stop waits for the polls running. */
  waitTimeSeconds?: number;
  /** How long a received message stays hidden, s (default 30): when a failed forward is tried again. */
  visibilityTimeoutSeconds?: number;
  /** Receive loops running in parallel (1–50, default 2). */
  concurrency?: number;
}

const LOG_EVERY_MS = 10_000;

export class QueueSplitter {
  readonly #o: QueueSplitterOptions;
  readonly #wait: number;
  readonly #visibility: number;
  readonly #concurrency: number;
  readonly #fifoTarget: boolean;
  #abort: AbortController | undefined;
  #loops: Promise<void>[] = [];
  /** Last time each kind of failure was logged, and how many were not logged since. */
  readonly #logged = new Map<string, { at: number; suppressed: number }>();

  constructor(o: QueueSplitterOptions) {
    for (const field of ["originalQueueUrl", "targetQueueUrl"] as const) {
      try {
        targetOf(o[field], undefined);
      } catch (err) {
        throw new OptionError(field, (err as Error).message, { cause: err });
      }
    }
    if (o.originalQueueUrl === o.targetQueueUrl)
      throw new OptionError("targetQueueUrl", "must be the temporary queue, not the original queue itself");
    this.#o = o;
    this.#wait = integerIn("waitTimeSeconds", o.waitTimeSeconds, 1, 0, 20);
    this.#visibility = integerIn("visibilityTimeoutSeconds", o.visibilityTimeoutSeconds, 30, 0, 43_200);
    this.#concurrency = integerIn("concurrency", o.concurrency, 2, 1, 50);
    this.#fifoTarget = isFifo(o.targetQueueUrl);
  }

  /** Starts the receive loops (again after a stop); a running splitter is left as it is. */
  start(): void {
    if (this.#abort && !this.#abort.signal.aborted) return;
    const abort = new AbortController();
    this.#abort = abort;
    this.#loops = Array.from({ length: this.#concurrency }, () => this.#loop(abort.signal));
  }

  /** No new receives; resolves once the polls running ended and their batches are forwarded and deleted. */
  async stop(): Promise<void> {
    this.#abort?.abort();
    await Promise.all(this.#loops);
  }

  async #loop(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff({ initialMs: 200, maxMs: 5_000, jitter: 0.2 });
    const url = this.#o.originalQueueUrl;
    while (!signal.aborted) {
      let batch: Message[];
      try {
        batch = await receiveBatch(this.#o.clients.forQueue(url), url, {
          waitTimeSeconds: this.#wait,
          visibilityTimeoutSeconds: this.#visibility,
        });
      } catch (err) {
        this.#o.metrics?.errors("receive", 1);
        this.#warn(
          "receive",
          { queue: url, ...describeSqsError(err) },
          "receiving from the original queue failed",
        );
        await sleep(backoff.next(), signal);
        continue;
      }
      if (batch.length === 0) continue;
      const started = performance.now();
      let allFailed: boolean;
      try {
        allFailed = await this.#split(batch);
      } catch (err) {
        // Not an SQS failure (those are results): nothing was deleted, the batch comes back.
        this.#o.logger?.error({ err }, "splitting a batch failed");
        allFailed = true;
      }
      this.#o.metrics?.batchDone((performance.now() - started) / 1000);
      if (!allFailed) backoff.reset();
      else await sleep(backoff.next(), signal);
    }
  }

  /** Forwards and deletes one batch; true when no message of it could be moved on. */
  async #split(batch: readonly Message[]): Promise<boolean> {
    const o = this.#o;
    o.metrics?.read(batch.length);
    const byDestination = new Map<string, number[]>();
    const add = (url: string, i: number) => {
      const list = byDestination.get(url);
      if (list) list.push(i);
      else byDestination.set(url, [i]);
    };
    const notDone = new Set<number>();
    let unmatched = 0;
    for (const [i, m] of batch.entries()) {
      let d: SplitDecision;
      try {
        d = o.decide(splitMessage(m));
      } catch (err) {
        notDone.add(i);
        this.#count(
          "decide",
          1,
          { messageId: m.MessageId, error: (err as Error).name },
          "deciding a message's destination failed",
        );
        continue;
      }
      const outputs = [...new Set(d.outputs)].filter((u) => u !== o.targetQueueUrl);
      if (outputs.length === 0) unmatched++;
      if (d.toTarget || outputs.length === 0) add(o.targetQueueUrl, i);
      for (const url of outputs) add(url, i);
    }
    o.metrics?.unmatched(unmatched);

    await Promise.all(
      [...byDestination].map(async ([url, indexes]) => {
        const destination: SplitDestination = url === o.targetQueueUrl ? "target" : "session";
        const failures = await this.#forward(
          url,
          indexes.map((i) => batch[i]!),
        );
        for (const f of failures) notDone.add(indexes[f.index]!);
        o.metrics?.forwarded(destination, indexes.length - failures.length);
        if (failures.length > 0) {
          const { code, message } = failures.at(-1)!;
          this.#count(
            "send",
            failures.length,
            { destination, queue: url, failed: failures.length, code, message },
            "forwarding messages failed; they stay in the original queue",
          );
        }
      }),
    );

    const done = batch.filter((_, i) => !notDone.has(i));
    const notDeleted = await deleteBatch(o.clients.forQueue(o.originalQueueUrl), o.originalQueueUrl, done);
    if (notDeleted.length > 0) {
      const { code, message } = notDeleted.at(-1)!;
      this.#count(
        "delete",
        notDeleted.length,
        { queue: o.originalQueueUrl, failed: notDeleted.length, code, message },
        "deleting forwarded messages failed; they will be forwarded again",
      );
    }
    return done.length === 0;
  }

  async #forward(url: string, messages: readonly Message[]): Promise<BatchFailure[]> {
    let client;
    try {
      client = this.#o.clients.forQueue(url);
    } catch (err) {
      return messages.map((_, index) => ({
        index,
        code: "InvalidQueueUrl",
        message: (err as Error).message,
        senderFault: true,
      }));
    }
    const fifo = url === this.#o.targetQueueUrl ? this.#fifoTarget : isFifo(url);
    return forwardBatch(client, url, messages, fifo);
  }

  #count(stage: SplitErrorStage, n: number, fields: Record<string, unknown>, msg: string): void {
    this.#o.metrics?.errors(stage, n);
    this.#warn(`${stage} ${String(fields.queue ?? "")} ${String(fields.code ?? "")}`, fields, msg);
  }

  /** Logs a kind of failure at most once per 10 s, with how many were not logged meanwhile. */
  #warn(key: string, fields: Record<string, unknown>, msg: string): void {
    const now = Date.now();
    const last = this.#logged.get(key);
    if (last && now - last.at < LOG_EVERY_MS) {
      last.suppressed++;
      return;
    }
    this.#logged.set(key, { at: now, suppressed: 0 });
    this.#o.logger?.warn(
      { ...fields, ...(last?.suppressed ? { notLoggedSince: last.suppressed } : {}) },
      msg,
    );
  }
}

/** A received message as `decide` sees it. */
export function splitMessage(m: Message): SplitMessage {
  const attributes: Record<string, string> = {};
  for (const [name, v] of Object.entries(m.MessageAttributes ?? {})) {
    if (v.DataType?.startsWith("Binary"))
      attributes[name] = v.BinaryValue ? Buffer.from(v.BinaryValue).toString("base64") : "";
    else attributes[name] = v.StringValue ?? "";
  }
  return { messageId: m.MessageId ?? "", body: m.Body ?? "", attributes };
}
