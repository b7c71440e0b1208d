// `npm run bench -- queues`: what SQS queue splitting (DESIGN §7) costs the consumer, against
// a real ElasticMQ started here (and stopped however the run ends, Ctrl-C included). The same
// consumer — K receive loops of ReceiveMessage(10, WaitTimeSeconds 1) + DeleteMessageBatch —
// in every arm, which take turns:
//   - direct: the consumer reads the original queue;
//   - split: a real QueueSplitter (the product's defaults; `decide` built as the splitter
//     registry builds it, from compileSplitFilter and split-routing's decide, with one steal
//     session whose filter `tenant: ^dev` matches every message) moves the original queue's
//     messages to the session's output queue, and the consumer reads that;
//   - alone: the splitter with no consumer (until it has deleted every original): its own rate.
// Throughput: N preloaded messages, time until the consumer has received all of them, `runs`
// times, medians compared. Added latency: a producer sending at a fixed rate, each body
// carrying its send time; receive time − send time, p50/p99, direct vs split.
// All arms use ONE ElasticMQ server, fresh queues per measurement: in the product the
// temporary and output queues live on the original's SQS, so the splitter's receive, send and
// delete land on the server the consumer uses — per message five requests' work instead of
// two — and only one arm runs at a time, so a second JVM would only idle.
import { cpus, totalmem } from "node:os";
import { CreateQueueCommand, DeleteQueueCommand } from "@aws-sdk/client-sqs";
import { pino } from "pino";
import { compileSplitFilter, ParsedMessage } from "../../control-plane/src/queues/queue-filter.js";
import { SplitterMetrics } from "../../control-plane/src/queues/queue-metrics.js";
import { decide, type SplitSession } from "../../control-plane/src/queues/split-routing.js";
import { QueueSplitter } from "../../control-plane/src/queues/splitter.js";
import { SqsClients } from "../../control-plane/src/queues/sqs-clients.js";
import {
  ELASTICMQ_ACCOUNT_ID,
  ELASTICMQ_CREDENTIALS,
  sqsClientFor,
  startElasticmq,
  type ElasticmqServer,
} from "../../test/env/sqs/elasticmq-server.js";
import { killChildren, sweepOrphans } from "../../test/env/processes.js";
import { shutdownOnSignals } from "../../test/env/stack/signal-shutdown.js";
import { requireWholeNumbers } from "../support/pod-stack-run.js";
import {
  cpuSeconds,
  jvmPid,
  parseBody,
  preload,
  producePaced,
  startConsumer,
  timeCommands,
} from "./queues-support.js";
import { ARMS, report, type Arm, type LatencyArm, type ThroughputRun } from "./queues-report.js";
import { round } from "../support/stats-support.js";

export interface QueuesBenchOptions {
  /** Messages preloaded per throughput measurement. */
  messages: number;
  /** Throughput measurements per arm (alternating). */
  runs: number;
  /** The consumer's receive loops (K), the same in both arms. */
  consumers: number;
  /** Latency part: messages per second the producer sends, and for how long (s). */
  rate: number;
  seconds: number;
  /** Messages each arm moves once before measuring (JIT of the JVM and of Node); 0: none. */
  warmup: number;
  /** The splitter's receive loops; undefined: the product's default. */
  splitterLoops?: number;
}

export const defaultQueuesBench: QueuesBenchOptions = {
  messages: 20_000,
  runs: 3,
  consumers: 2,
  rate: 200,
  seconds: 15,
  warmup: 2_000,
};

export const quickQueuesBench: QueuesBenchOptions = {
  messages: 3_000,
  runs: 1,
  consumers: 2,
  rate: 200,
  seconds: 5,
  warmup: 500,
};

export async function runQueuesBench(o: QueuesBenchOptions): Promise<void> {
  requireWholeNumbers([
    ["--messages", o.messages],
    ["--runs", o.runs],
    ["--consumers", o.consumers],
    ["--rate", o.rate],
    ["--seconds", o.seconds],
    ...(o.splitterLoops !== undefined ? [["--splitter-loops", o.splitterLoops] as const] : []),
  ]);
  let server: ElasticmqServer | undefined;
  const shutdown = shutdownOnSignals({
    stop: async () => {
      try {
        await server?.stop();
      } finally {
        killChildren();
        await sweepOrphans({ mine: true });
      }
    },
    hurry: () => killChildren(),
  });
  let closing: string[];
  try {
    server = await startElasticmq({ name: "bench-queues" });
    closing = await measure(server, o);
  } catch (err) {
    // A signal stops the server under the run's feet: its failures are expected.
    if (shutdown.stopping) return shutdown.stopped;
    throw err;
  } finally {
    if (!shutdown.stopping) await server?.stop();
  }
  for (const line of closing) console.log(line);
}

async function measure(server: ElasticmqServer, o: QueuesBenchOptions): Promise<string[]> {
  const jvm = jvmPid(server.dir);
  const admin = sqsClientFor(server);
  const consumerClient = sqsClientFor(server);
  const clients = new SqsClients({
    region: server.region,
    endpoint: server.endpoint,
    credentials: ELASTICMQ_CREDENTIALS,
  });
  const splitterTimes = timeCommands(clients.forQueue(`${server.endpoint}/${ELASTICMQ_ACCOUNT_ID}/any`));
  const consumerTimes = timeCommands(consumerClient);
  const metrics = new SplitterMetrics();
  const logger = pino({ level: "warn" });
  const filter = compileSplitFilter({ messageFilter: { tenant: "^dev" } });
  let queueSeq = 0;

  const createQueue = async (name: string) =>
    (await admin.send(new CreateQueueCommand({ QueueName: `${name}-${++queueSeq}` }))).QueueUrl!;

  /** The queues of one measurement, and the splitter between them in the split arm. */
  const setUp = async (arm: Arm) => {
    const original = await createQueue("bench-original");
    if (arm === "direct")
      return { original, read: original, start: () => {}, stop: async () => {}, queues: [original] };
    const target = await createQueue("sy-t-bench-original");
    const output = await createQueue("sy-o-bench-original");
    const routes: SplitSession[] = [{ key: "bench:session", admittedAt: 0, mode: "steal", filter, output }];
    const splitter = new QueueSplitter({
      clients,
      originalQueueUrl: original,
      targetQueueUrl: target,
      decide: (m) => decide(routes, new ParsedMessage(m.attributes, m.body)),
      metrics,
      logger,
      ...(o.splitterLoops !== undefined ? { concurrency: o.splitterLoops } : {}),
    });
    return {
      original,
      read: output,
      start: () => splitter.start(),
      stop: () => splitter.stop(),
      queues: [original, target, output],
    };
  };
  const tearDown = (queues: string[]) =>
    Promise.all(queues.map((q) => admin.send(new DeleteQueueCommand({ QueueUrl: q }))));

  const throughput = async (arm: Arm, n: number): Promise<ThroughputRun> => {
    const q = await setUp(arm);
    await preload(admin, q.original, n);
    const seen = new Uint8Array(n);
    let count = 0;
    let duplicates = 0;
    let allIn!: () => void;
    const done = new Promise<void>((r) => (allIn = r));
    splitterTimes.reset();
    consumerTimes.reset();
    const cpu0 = cpuSeconds(jvm);
    const t0 = performance.now();
    q.start();
    const consumer =
      arm === "alone"
        ? undefined
        : startConsumer(consumerClient, q.read, o.consumers, (m) => {
            const { n: i } = parseBody(m);
            if (seen[i]) {
              duplicates++;
              return;
            }
            seen[i] = 1;
            if (++count === n) allIn();
          });
    // Alone: done once the splitter has deleted every message from the original (all forwarded).
    const moved = () => splitterTimes.times.get("DeleteMessageBatchCommand")?.messages ?? 0;
    const poll = arm === "alone" ? setInterval(() => moved() >= n && allIn(), 5) : undefined;
    let timer: NodeJS.Timeout | undefined;
    const timeoutMs = 120_000 + n * 10;
    try {
      await Promise.race([
        done,
        ...(consumer ? [consumer.failed] : []),
        new Promise((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new Error(`${arm}: ${consumer ? count : moved()} of ${n} messages in ${timeoutMs / 1000} s`),
              ),
            timeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
      clearInterval(poll);
    }
    const seconds = (performance.now() - t0) / 1000;
    const cpu1 = cpuSeconds(jvm);
    const splitter = structuredClone(Object.fromEntries(splitterTimes.times));
    const consumed = structuredClone(Object.fromEntries(consumerTimes.times));
    await consumer?.stop();
    await q.stop();
    await tearDown(q.queues);
    const bench = cpu1.bench - cpu0.bench;
    const srv = cpu1.server - cpu0.server;
    return {
      arm,
      seconds: round(seconds),
      perSecond: Math.round(n / seconds),
      duplicates,
      benchCpuPer1k: round((bench * 1000) / n),
      serverCpuPer1k: round((srv * 1000) / n),
      benchCpuShare: round(bench / seconds, 2),
      serverCpuShare: round(srv / seconds, 2),
      otherCpuShare: round(Math.max(0, cpu1.machine - cpu0.machine - bench - srv) / seconds, 2),
      splitter,
      consumer: consumed,
    };
  };

  const latency = async (arm: LatencyArm): Promise<number[]> => {
    const q = await setUp(arm);
    const first = new Map<number, number>();
    splitterTimes.reset();
    q.start();
    const consumer = startConsumer(consumerClient, q.read, o.consumers, (m, at) => {
      const { n, sentAt } = parseBody(m);
      if (!first.has(n)) first.set(n, at - sentAt);
    });
    await new Promise((r) => setTimeout(r, 500)); // every loop polling
    const cpu0 = cpuSeconds(jvm);
    const t0 = performance.now();
    const sent = await producePaced(admin, q.original, o.rate, o.seconds);
    const deadline = Date.now() + 30_000;
    while (first.size < sent && Date.now() < deadline)
      await Promise.race([new Promise((r) => setTimeout(r, 50)), consumer.failed]);
    const cpu1 = cpuSeconds(jvm);
    const wall = (performance.now() - t0) / 1000;
    const busy = (x: number) => (x / wall).toFixed(2);
    const bench = cpu1.bench - cpu0.bench;
    const srv = cpu1.server - cpu0.server;
    const receives = splitterTimes.times.get("ReceiveMessageCommand");
    console.log(
      `latency ${arm}: ${sent} messages at ${o.rate}/s; CPUs busy: bench ${busy(bench)}, ElasticMQ ${busy(srv)}, ` +
        `other ${busy(Math.max(0, cpu1.machine - cpu0.machine - bench - srv))}` +
        (receives ? `; splitter ${(receives.messages / receives.calls).toFixed(1)} msgs per receive` : ""),
    );
    await consumer.stop();
    await q.stop();
    await tearDown(q.queues);
    if (first.size < sent) throw new Error(`${arm}: ${first.size} of ${sent} paced messages arrived in 30 s`);
    return [...first.values()];
  };

  const machine =
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ` +
    `Node ${process.version}, ElasticMQ ${server.version} (one JVM for both arms, as test/env starts it)`;
  console.log(machine);
  console.log(
    `throughput: ${o.messages} messages, consumer ${o.consumers} loops, splitter ` +
      `${o.splitterLoops ?? "default"} loops, ${o.runs} runs per arm`,
  );
  try {
    if (o.warmup > 0) {
      for (const arm of ARMS) await throughput(arm, o.warmup);
      console.log(`warm-up: ${o.warmup} messages through each arm`);
    }
    const runs: ThroughputRun[] = [];
    for (let i = 0; i < o.runs; i++) {
      const order = ARMS.map((_, j) => ARMS[(i + j) % ARMS.length]!);
      for (const arm of order) {
        const r = await throughput(arm, o.messages);
        runs.push(r);
        console.log(
          `run ${i + 1}/${o.runs} ${arm.padEnd(6)} ${String(r.perSecond).padStart(6)} msg/s ` +
            `(${r.seconds} s; CPU s per 1k msgs: bench ${r.benchCpuPer1k}, ElasticMQ ${r.serverCpuPer1k}; ` +
            `CPUs busy: bench ${r.benchCpuShare}, ElasticMQ ${r.serverCpuShare}, other ${r.otherCpuShare}; ` +
            `duplicates ${r.duplicates})`,
        );
      }
    }
    const latencies: Record<LatencyArm, number[]> = { direct: [], split: [] };
    for (const arm of ["direct", "split"] as const) latencies[arm] = await latency(arm);
    return report(o, machine, runs, latencies);
  } finally {
    clients.destroy();
    admin.destroy();
    consumerClient.destroy();
  }
}
