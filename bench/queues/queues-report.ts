// The figures of `bench -- queues`: medians of the alternating throughput runs, the latency
// percentiles, where each receive loop's time went (per SQS call), the JSON result file and
// the GOAL lines.
import type { CommandTimes } from "./queues-support.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { pct, round, writeResult } from "../support/stats-support.js";

/** direct: consumer on the original; split: consumer on the output, the splitter between; alone: the splitter, no consumer. */
export const ARMS = ["direct", "split", "alone"] as const;
export type Arm = (typeof ARMS)[number];
export type LatencyArm = Exclude<Arm, "alone">;

export interface ThroughputRun {
  arm: Arm;
  seconds: number;
  perSecond: number;
  duplicates: number;
  /** CPU seconds per 1 000 messages: this process (consumer and splitter), the ElasticMQ JVM. */
  benchCpuPer1k: number;
  serverCpuPer1k: number;
  /** CPUs each kept busy on average over the run (CPU seconds / wall seconds). */
  benchCpuShare: number;
  serverCpuShare: number;
  /** CPUs busy with anything else on the machine (other processes, the kernel). */
  otherCpuShare: number;
  /** SQS calls by command, until the last message was in. */
  splitter: Record<string, CommandTimes>;
  consumer: Record<string, CommandTimes>;
}

const GOAL_RATIO = 0.8;
const GOAL_ADDED_P50_MS = 20;

const READS: Record<Arm, string> = {
  direct: "original",
  split: "output (splitter)",
  alone: "— (splitter alone)",
};

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const row = (cells: readonly (string | number)[]) => `| ${cells.join(" | ")} |`;

/** Per command: calls per 1k messages, mean ms, messages per call, loops inside it on average. */
function where(runs: readonly ThroughputRun[], who: "splitter" | "consumer", messages: number): string[] {
  const sum = new Map<string, CommandTimes>();
  for (const r of runs)
    for (const [name, t] of Object.entries(r[who])) {
      const s = sum.get(name) ?? { calls: 0, ms: 0, messages: 0 };
      s.calls += t.calls;
      s.ms += t.ms;
      s.messages += t.messages;
      sum.set(name, s);
    }
  const wallMs = runs.reduce((a, r) => a + r.seconds * 1000, 0);
  const arm = runs[0]?.arm ?? "";
  return [...sum].map(([name, t]) =>
    row([
      arm,
      who,
      name.replace(/Command$/, ""),
      ((t.calls * 1000) / (messages * runs.length)).toFixed(0),
      (t.ms / t.calls).toFixed(1),
      (t.messages / t.calls).toFixed(1),
      (t.ms / wallMs).toFixed(2),
    ]),
  );
}

/** Prints the tables and writes the result file; returns the GOAL lines. */
export function report(
  o: { messages: number; consumers: number; rate: number; seconds: number },
  machine: string,
  runs: readonly ThroughputRun[],
  latencies: Record<LatencyArm, number[]>,
): string[] {
  const of = (arm: Arm) => runs.filter((r) => r.arm === arm);
  const rate = (arm: Arm) => median(of(arm).map((r) => r.perSecond));
  const mid = (
    arm: Arm,
    k: "benchCpuPer1k" | "serverCpuPer1k" | "benchCpuShare" | "serverCpuShare" | "otherCpuShare",
  ) => round(median(of(arm).map((r) => r[k])), 2);
  const ratio = rate("split") / rate("direct");
  const lat = (arm: LatencyArm) => ({
    p50: round(pct(latencies[arm], 50), 1),
    p99: round(pct(latencies[arm], 99), 1),
  });
  const added = {
    p50: round(lat("split").p50 - lat("direct").p50, 1),
    p99: round(lat("split").p99 - lat("direct").p99, 1),
  };

  console.log("");
  console.log(
    row([
      "arm",
      "consumer reads",
      "msg/s (median)",
      "runs, msg/s",
      "CPU s / 1k msgs: bench, ElasticMQ",
      "CPUs busy: bench, ElasticMQ, other",
      `latency p50 / p99 at ${o.rate}/s (ms)`,
    ]),
  );
  console.log(row(["---", "---", "---:", "---", "---", "---", "---"]));
  for (const arm of ARMS)
    console.log(
      row([
        arm,
        READS[arm],
        rate(arm),
        of(arm)
          .map((r) => r.perSecond)
          .join(", "),
        `${mid(arm, "benchCpuPer1k")}, ${mid(arm, "serverCpuPer1k")}`,
        `${mid(arm, "benchCpuShare")}, ${mid(arm, "serverCpuShare")}, ${mid(arm, "otherCpuShare")}`,
        arm === "alone" ? "—" : `${lat(arm).p50} / ${lat(arm).p99}`,
      ]),
    );
  console.log(
    `split / direct throughput ${ratio.toFixed(2)}x (splitter alone / direct ${(rate("alone") / rate("direct")).toFixed(2)}x); ` +
      `added latency p50 ${added.p50} ms, p99 ${added.p99} ms`,
  );
  console.log("");
  console.log("where the loops' time goes (throughput runs, until the last message was in):");
  console.log(row(["arm", "who", "call", "calls / 1k msgs", "ms / call", "msgs / call", "loops in it"]));
  console.log(row(["---", "---", "---", "---:", "---:", "---:", "---:"]));
  for (const [arm, who] of [
    ["direct", "consumer"],
    ["split", "splitter"],
    ["split", "consumer"],
    ["alone", "splitter"],
  ] as const)
    for (const line of where(of(arm), who, o.messages)) console.log(line);

  const file = writeResult("queues", {
    at: new Date().toISOString(),
    machine,
    options: o,
    throughput: {
      direct: rate("direct"),
      split: rate("split"),
      alone: rate("alone"),
      ratio: round(ratio),
      runs,
    },
    latencyMs: { direct: lat("direct"), split: lat("split"), added },
  });
  console.log(`written ${file}`);
  const goals: Goal[] = [
    { name: "queues-throughput", value: ratio, op: ">=", target: GOAL_RATIO, unit: "x" },
    {
      name: "queues-added-p50",
      // Decided unrounded (support/goal.ts): the split arm's p50 minus the direct arm's.
      value: pct(latencies.split, 50) - pct(latencies.direct, 50),
      op: "<=",
      target: GOAL_ADDED_P50_MS,
      unit: "ms",
      digits: 1,
    },
  ];
  return goals.map((g) => decideGoal(g).line);
}
