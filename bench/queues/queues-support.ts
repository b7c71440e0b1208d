// The parts of `bench -- queues` that talk to SQS: the consumer (the same code reads the
// original queue and a session's output queue), the preload and the paced producer, bodies
// that carry their number and send time, and per-command timing of an SQS client (where a
// receive loop's time goes: waiting in receives, sending, deleting). Also the CPU seconds of
// this process and of the ElasticMQ JVM, to tell which of the two bounds a run.
import { readdirSync, readFileSync } from "node:fs";
import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from "@aws-sdk/client-sqs";

/** What every bench message says: its number and when it was sent (this process's performance.now()). */
export interface BenchBody {
  n: number;
  sentAt: number;
}

const PAD = "x".repeat(120);

/** A ~200-byte JSON body. */
export function benchBody(n: number, sentAt: number): string {
  return JSON.stringify({ n, sentAt, kind: "order.created", customer: `c-${n % 997}`, note: PAD });
}

/** The two attributes every bench message carries; `tenant` is what the steal filter reads. */
export function benchAttributes(n: number): Record<string, MessageAttributeValue> {
  return {
    tenant: { DataType: "String", StringValue: `dev-${n % 7}` },
    priority: { DataType: "Number", StringValue: String(n % 3) },
  };
}

export function parseBody(m: Message): BenchBody {
  return JSON.parse(m.Body ?? "") as BenchBody;
}

/** Sends messages 0..n-1 in batches of 10, `inFlight` batches at a time (not timed). */
export async function preload(client: SQSClient, url: string, n: number, inFlight = 8): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const from = next;
      next = Math.min(n, next + 10);
      const out = await client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: Array.from({ length: next - from }, (_, i) => ({
            Id: `e${i}`,
            MessageBody: benchBody(from + i, 0),
            MessageAttributes: benchAttributes(from + i),
          })),
        }),
      );
      if ((out.Failed ?? []).length > 0)
        throw new Error(`preload: ${out.Failed!.length} messages refused (${out.Failed![0]!.Code})`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

export interface Consumer {
  /** No new receives; resolves once the polls running ended and their messages are deleted. */
  stop(): Promise<void>;
  /** Rejects when a loop fails (an SQS error, a delete refused); never resolves. */
  failed: Promise<never>;
}

/**
 * The deployed consumer as the bench plays it: `loops` receive loops, each ReceiveMessage(10,
 * WaitTimeSeconds 1, every attribute) then DeleteMessageBatch of what came. `onMessage` sees
 * each message with the time its receive answered. Polls are never abandoned (a stop lets them end).
 */
export function startConsumer(
  client: SQSClient,
  url: string,
  loops: number,
  onMessage: (m: Message, receivedAt: number) => void,
): Consumer {
  let stopping = false;
  const loop = async () => {
    while (!stopping) {
      const out = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageAttributeNames: ["All"],
        }),
      );
      const receivedAt = performance.now();
      const batch = out.Messages ?? [];
      if (batch.length === 0) continue;
      for (const m of batch) onMessage(m, receivedAt);
      const del = await client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: batch.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle })),
        }),
      );
      if ((del.Failed ?? []).length > 0)
        throw new Error(`consumer: ${del.Failed!.length} deletes failed (${del.Failed![0]!.Code})`);
    }
  };
  const running = Array.from({ length: loops }, loop);
  const failed = new Promise<never>((_, reject) => {
    for (const r of running) r.catch(reject);
  });
  failed.catch(() => {}); // also reported by stop()
  return {
    stop: async () => {
      stopping = true;
      await Promise.all(running);
    },
    failed,
  };
}

/**
 * Sends `rate` messages a second for `seconds`, one SendMessage each, on a fixed schedule that
 * does not wait for earlier sends (open loop); each body carries the time its send was issued.
 * Resolves once every send answered, with how many there were.
 */
export async function producePaced(
  client: SQSClient,
  url: string,
  rate: number,
  seconds: number,
): Promise<number> {
  const total = Math.round(rate * seconds);
  const start = performance.now();
  const sends: Promise<unknown>[] = [];
  for (let n = 0; n < total; n++) {
    const due = start + (n * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const sentAt = performance.now();
    sends.push(
      client.send(
        new SendMessageCommand({
          QueueUrl: url,
          MessageBody: benchBody(n, sentAt),
          MessageAttributes: benchAttributes(n),
        }),
      ),
    );
  }
  await Promise.all(sends);
  return total;
}

export interface CommandTimes {
  calls: number;
  /** Summed time from the call to its answer, ms. */
  ms: number;
  /** Messages its answers carried (receives) or its entries (batches). */
  messages: number;
}

/** Per command name, the calls `client` makes from now on; `reset()` starts counting again. */
export function timeCommands(client: SQSClient): { times: Map<string, CommandTimes>; reset(): void } {
  const times = new Map<string, CommandTimes>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const started = performance.now();
      const out = await next(args);
      const t = times.get(context.commandName ?? "?") ?? { calls: 0, ms: 0, messages: 0 };
      t.calls++;
      t.ms += performance.now() - started;
      const output = out.output as { Messages?: unknown[]; Successful?: unknown[] };
      t.messages += output.Messages?.length ?? output.Successful?.length ?? 0;
      times.set(context.commandName ?? "?", t);
      return out;
    },
    { step: "initialize", name: "benchCommandTiming" },
  );
  return { times, reset: () => times.clear() };
}

const TICKS_PER_SECOND = 100;

/** The pid of the ElasticMQ JVM whose directory is `dir` (its -Djava.io.tmpdir names it). */
export function jvmPid(dir: string): number {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, "utf8").includes(`-Djava.io.tmpdir=${dir}/`)) return Number(d);
    } catch {
      /* exited meanwhile */
    }
  }
  throw new Error(`no ElasticMQ process runs in ${dir}`);
}

/** CPU seconds used so far by this process, by `pid`, and by the whole machine (every CPU, not idle). */
export function cpuSeconds(pid: number): { bench: number; server: number; machine: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const u = process.cpuUsage();
  // /proc/stat's first line: cpu user nice system idle iowait irq softirq steal …
  const all = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  const busy = all.reduce((a, b) => a + b, 0) - all[3]! - all[4]!;
  return {
    bench: (u.user + u.system) / 1e6,
    server: (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND,
    machine: busy / TICKS_PER_SECOND,
  };
}
