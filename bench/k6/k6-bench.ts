// `npm run bench -- k6`: the k6 scenarios as a user runs them, against one stack
// (bench/k6/k6-stack.ts: scripted agents in their own processes, a router fed by a real
// RouteDiscovery server, a no-logic relay):
//   fanout   k6/router-fanout.js  broadcast ping → merged pong with 1, 2, 4, 8 upstreams;
//   rate     k6/routed-rate.js    small frames/s through one session: direct, relay, router;
//   setup    k6/session-setup.js  new session (pushed, acknowledged) → first merged reply.
// Each writes k6's HTML report to bench/results/k6-<scenario>.html and its summary as JSON;
// this prints the figures side by side and one GOAL line per goal.
import { cpus } from "node:os";
import { runK6, type K6Metric } from "./k6-runner.js";
import { AGENT_SECRET, CLIENT_SECRET, startK6Stack } from "./k6-stack.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { writeResult } from "../support/stats-support.js";

export const K6_SCENARIOS = ["fanout", "rate", "setup"] as const;
export type K6Scenario = (typeof K6_SCENARIOS)[number];

export interface K6BenchOptions {
  scenarios: readonly K6Scenario[];
  /** Cluster counts of the fan-out stages. */
  fanoutClusters: number[];
  /** Length of each stage, s. */
  stageSeconds: number;
  /** Sessions set up at once in the set-up scenario, and the clusters of each. */
  setupVus: number;
  setupClusters: number;
}

export const defaultK6Bench: K6BenchOptions = {
  scenarios: K6_SCENARIOS,
  fanoutClusters: [1, 2, 4, 8],
  stageSeconds: 15,
  setupVus: 2,
  setupClusters: 2,
};

const stat = (m: K6Metric | undefined, k: string) => m?.[k] ?? Number.NaN;

export async function runK6Bench(o: K6BenchOptions = defaultK6Bench): Promise<void> {
  const stack = await startK6Stack(Math.max(...o.fanoutClusters, o.setupClusters));
  const goals: Goal[] = [];
  const results: Record<string, unknown> = {};
  const reports: string[] = [];
  const failed: string[] = [];
  try {
    if (o.scenarios.includes("fanout")) {
      for (const n of o.fanoutClusters) await stack.addSession(`k6-fanout-${n}`, stack.agents.slice(0, n));
      const run = await runK6("k6-fanout", "bench/k6/router-fanout.js", {
        ROUTER: stack.routerUrl(""),
        SECRET: CLIENT_SECRET,
        CLUSTERS: o.fanoutClusters.join(","),
        STAGE: `${o.stageSeconds}s`,
      });
      reports.push(run.html);
      if (!run.passed) failed.push("fanout");
      const rows = o.fanoutClusters.map((n) => {
        const m = run.metrics[`fanout_${n}_clusters_ms`];
        return { clusters: n, p50Ms: stat(m, "med"), p99Ms: stat(m, "p(99)"), batches: stat(m, "count") };
      });
      results.fanout = rows;
      console.log("\nfan-out: ping → merged pong (mean of batches of 100), ms");
      console.log(
        `${"clusters".padStart(8)} ${"p50".padStart(7)} ${"p99".padStart(7)} ${"batches".padStart(8)}`,
      );
      for (const r of rows)
        console.log(
          `${String(r.clusters).padStart(8)} ${r.p50Ms.toFixed(3).padStart(7)} ${r.p99Ms.toFixed(3).padStart(7)} ${String(r.batches).padStart(8)}`,
        );
      const one = rows.find((r) => r.clusters === 1);
      // The router sends one buffer to every upstream and waits for the slowest: more
      // clusters should cost a little, not a round trip each.
      const targets: Record<number, number> = { 2: 1.3, 4: 1.3, 8: 1.5 };
      for (const r of rows)
        if (one && targets[r.clusters] !== undefined) {
          const v = r.p50Ms / one.p50Ms;
          goals.push({
            name: `fanout-${r.clusters}v1-p50`,
            value: v,
            unit: "x",
            op: "<=",
            target: targets[r.clusters]!,
            requires: { "k6 thresholds": run.passed },
          });
        }
    }

    if (o.scenarios.includes("rate")) {
      await stack.addSession("k6-rate", [stack.agents[0]!]);
      const run = await runK6("k6-rate", "bench/k6/routed-rate.js", {
        DIRECT_URL: stack.agentUrl(stack.agents[0]!, "k6-direct"),
        RELAY_URL: stack.relayUrl,
        ROUTER_URL: stack.routerUrl("k6-rate"),
        AGENT_SECRET,
        SECRET: CLIENT_SECRET,
        STAGE: `${Math.max(5, Math.round(o.stageSeconds / 3))}s`,
        ROUNDS: o.stageSeconds >= 15 ? "3" : "1",
      });
      reports.push(run.html);
      if (!run.passed) failed.push("rate");
      const fps = (path: string) => stat(run.metrics[`frames_per_s_${path}`], "med");
      const rate = { direct: fps("direct"), relay: fps("relay"), router: fps("router") };
      results.rate = rate;
      console.log(
        "\nrouted message rate: 64-byte frames echoed per second, one session (median of 1 s samples)",
      );
      for (const [k, v] of Object.entries(rate)) console.log(`${k.padStart(8)} ${v.toFixed(0).padStart(8)}`);
      const v = rate.router / rate.relay;
      goals.push({
        name: "routed-rate-router-vs-relay",
        value: v,
        unit: "x",
        op: ">=",
        target: 0.8,
        requires: { "k6 thresholds": run.passed },
      });
    }

    if (o.scenarios.includes("setup")) {
      const run = await runK6("k6-setup", "bench/k6/session-setup.js", {
        CONTROL_URL: stack.controlUrl,
        CLUSTERS: String(o.setupClusters),
        VUS: String(o.setupVus),
        STAGE: `${o.stageSeconds}s`,
      });
      reports.push(run.html);
      if (!run.passed) failed.push("setup");
      const phases = ["create", "connect", "upstreams", "first_pong", "total"].map((p) => {
        const m = run.metrics[`setup_${p}_ms`];
        return { phase: p, p50Ms: stat(m, "med"), p99Ms: stat(m, "p(99)"), n: stat(m, "count") };
      });
      results.setup = { clusters: o.setupClusters, concurrent: o.setupVus, sessions: stack.created, phases };
      console.log(
        `\nsession set-up: ${stack.created} sessions over ${o.setupClusters} clusters, ${o.setupVus} at a time, ms`,
      );
      console.log(`${"phase".padStart(10)} ${"p50".padStart(6)} ${"p99".padStart(6)}`);
      for (const p of phases)
        console.log(
          `${p.phase.padStart(10)} ${p.p50Ms.toFixed(0).padStart(6)} ${p.p99Ms.toFixed(0).padStart(6)}`,
        );
      const all = phases.find((p) => p.phase === "total")!;
      for (const [name, value, target] of [
        ["session-setup-p50", all.p50Ms, 100],
        ["session-setup-p99", all.p99Ms, 250],
      ] as const)
        goals.push({
          name,
          value,
          unit: "ms",
          op: "<=",
          target,
          digits: 0,
          requires: { "k6 thresholds": run.passed },
        });
    }
  } finally {
    await stack.stop();
  }

  const verdicts = goals.map(decideGoal);
  const file = writeResult("k6", {
    benchmark: "k6",
    at: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    options: o,
    results,
    reports,
    goals: verdicts,
  });
  console.log(`\nHTML reports: ${reports.join(", ")}\nwrote ${file}\n`);
  if (failed.length) console.log(`k6 thresholds failed in: ${failed.join(", ")} (see the reports)\n`);
  for (const v of verdicts) console.log(v.line);
}
