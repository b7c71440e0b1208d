// Switchyard on real pods (test/env/stack/pod-stack.ts: a management-only Primary, east — the
// Default — and west on real nodes, the chart installed, a two-replica demo Deployment behind
// a NodePort Service in each workload cluster), with the real CLI as a developer runs it:
//   1. sessions without rollouts (pods-linger.ts): rounds of a cold session (the agent
//      injected), the app's req/s with no agent and with the idle agent, a warm session on the
//      lingering agent, and the removal; exec → the first stolen request in both clusters and
//      the rollouts each costs, counted from the Deployments' revisions;
//   2. working-set memory of every agent, router and control-plane container while a session
//      is active (the kubelets' summary API, pod-memory.ts);
//   3. sequential GETs on one kept-alive connection to east's NodePort, answered by the app
//      (no session) versus stolen through the pod's agent, both routers and the CLI.
// Numbers only; nothing here asserts speed. One stack per invocation; it needs root and the
// node packages, like the pod suites.
import { existsSync } from "node:fs";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { eventually } from "../../test/support/poll.js";
import { onPodStack, requireWholeNumbers } from "../support/pod-stack-run.js";
import {
  AGENT,
  kc,
  msUntil,
  rolledOut,
  sequential,
  startExec,
  stolenOnce,
  stopExec,
  WAIT,
} from "./pods-support.js";
import { containerMemory, type ContainerMemory } from "./pod-memory.js";
import { sessionsWithoutRollouts } from "./pods-linger.js";
import { bornSessions } from "./pods-born.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { pct, round, summary, writeResult } from "../support/stats-support.js";

export interface PodsBenchOptions {
  /** Rounds of cold session, idle agent, warm session and removal (pods-linger.ts). */
  runs: number;
  /** GETs per req/s measurement, with no agent and with an idle one. */
  rpsRequests: number;
  /** Sequential GETs per side of the direct vs stolen comparison (after a warm-up). */
  requests: number;
  /**
   * Another build's bin (e.g. an earlier commit's `dist/bin/switchyard.mjs`): each warm and
   * born round also runs it, in turns with this build's, so both are measured side by side.
   */
  baselineCli?: string;
}

export const defaultPodsBench: PodsBenchOptions = { runs: 5, rpsRequests: 3000, requests: 300 };

/** Goals (bench/pods/README.md says where each comes from). */
const GOAL_EXEC_READY_S = 8;
const GOAL_WARM_S = 1;
const GOAL_IDLE_RPS_RATIO = 0.9;
const GOAL_AGENT_MIB = 64;
const GOAL_STEAL_P50_MS = 25;

/** Agents of the demo pods, routers and control planes of every cluster. */
async function switchyardMemory(stack: PodStack): Promise<ContainerMemory[]> {
  const all: ContainerMemory[] = [];
  for (const cluster of ["primary", ...Object.keys(stack.workloads)])
    all.push(
      ...(await containerMemory(
        cluster,
        kc(stack, cluster),
        (ns, _pod, container) => ns === "switchyard" || (ns === "default" && container === AGENT),
      )),
    );
  return all;
}

function printMemory(rows: ContainerMemory[]): void {
  console.log("working set while a session is active (kubelet stats/summary):");
  console.log(
    `  ${"cluster".padEnd(8)} ${"container".padEnd(17)} ${"pod".padEnd(42)} working set MiB   (rss MiB)`,
  );
  const order = (c: ContainerMemory) => (c.container === AGENT ? 0 : c.container === "router" ? 1 : 2);
  for (const r of [...rows].sort((a, b) => order(a) - order(b) || a.cluster.localeCompare(b.cluster)))
    console.log(
      `  ${r.cluster.padEnd(8)} ${r.container.padEnd(17)} ${r.pod.padEnd(42)} ${r.workingSetMiB.toFixed(1).padStart(15)}   (${r.rssMiB.toFixed(1)})`,
    );
}

/** Parts 2 and 3: direct GETs, then a steal session: stolen GETs and memory. */
async function latencyAndMemory(stack: PodStack, requests: number) {
  const east = stack.workloads.east!;
  const direct = await sequential(east.demoUrl, requests, (by) => by.startsWith("app-"));
  const e = await startExec(stack);
  try {
    for (const c of Object.keys(stack.workloads)) {
      await msUntil(
        e,
        `a stolen request through ${c}'s NodePort`,
        () => stolenOnce(stack.workloads[c]!.demoUrl),
        100,
      );
      await eventually(`${c}'s demo rolled out with the agent`, () => rolledOut(kc(stack, c), true), WAIT);
    }
    const stolen = await sequential(east.demoUrl, requests, (by) => by === "local");
    const memory = await switchyardMemory(stack);
    return { direct, stolen, memory };
  } catch (err) {
    (err as Error).message += `\nswitchyard exec output:\n${e.proc.output().slice(-3000)}`;
    throw err;
  } finally {
    await stopExec(e);
  }
}

async function measure(stack: PodStack, o: PodsBenchOptions) {
  const linger = await sessionsWithoutRollouts(stack, o.runs, o.rpsRequests, o.baselineCli);
  console.log(`exec → stolen in both clusters (s, ${o.runs} rounds)   p50     p90`);
  console.log(
    `  cold (the agent injected, a rollout)     ${linger.coldS.p50.toFixed(2)}  ${linger.coldS.p90.toFixed(2)}`,
  );
  console.log(
    `  warm (the agent lingering, no rollout)   ${linger.warmS.p50.toFixed(2)}  ${linger.warmS.p90.toFixed(2)}`,
  );
  const phases = (p: Record<string, number>) =>
    `session created ${p.created!.toFixed(2)}, Ready ${p.ready!.toFixed(2)}, local app ${p.appReady!.toFixed(2)}, stolen ${p.stolen!.toFixed(2)}`;
  console.log(`  p50 by phase, cold: ${phases(linger.coldPhasesS)}`);
  console.log(`  p50 by phase, warm: ${phases(linger.warmPhasesS)}`);
  if (linger.baseline)
    console.log(
      `  warm with the baseline CLI (${linger.baseline.cli}): p50 ${linger.baseline.warmS.p50.toFixed(2)}, ` +
        `p90 ${linger.baseline.warmS.p90.toFixed(2)}; by phase: ${phases(linger.baseline.warmPhasesS)}`,
    );
  console.log(
    `rollouts per cluster: cold session's agent ${linger.coldRollouts.min}–${linger.coldRollouts.max} ` +
      `(injection + restore), warm session ${linger.warmRollouts.min}–${linger.warmRollouts.max}`,
  );
  console.log(
    `app req/s through east's NodePort (${o.rpsRequests} GETs, 8 connections, median of ${o.runs}): ` +
      `no agent ${linger.rps.noAgent}, idle agent ${linger.rps.idleAgent} (${linger.rps.ratio.toFixed(2)}x)`,
  );
  const born = await bornSessions(stack, o.runs, o.baselineCli);
  console.log(
    `first session on a target born with the agent (s, ${o.runs} rounds): p50 ${born.stolenS.p50.toFixed(2)}, ` +
      `p90 ${born.stolenS.p90.toFixed(2)}; rollouts or restarts ${born.rollouts}`,
  );
  if (born.baseline)
    console.log(
      `  with the baseline CLI: p50 ${born.baseline.stolenS.p50.toFixed(2)}, p90 ${born.baseline.stolenS.p90.toFixed(2)}; ` +
        `by phase: ${phases(born.baseline.phasesS)}`,
    );
  const { direct, stolen, memory } = await latencyAndMemory(stack, o.requests);
  printMemory(memory);
  const agents = memory.filter((m) => m.container === AGENT);
  if (agents.length === 0)
    throw new Error("the kubelets report no memory for any switchyard-agent container");
  const agentMaxMiB = Math.max(...agents.map((m) => m.workingSetMiB));
  const latency = {
    requests: o.requests,
    direct: { ...summary(direct.ms), reusedConnection: direct.reused },
    stolen: { ...summary(stolen.ms), reusedConnection: stolen.reused },
    p50Ratio: round(pct(stolen.ms, 50) / pct(direct.ms, 50), 2),
    p99Ratio: round(pct(stolen.ms, 99) / pct(direct.ms, 99), 2),
  };
  console.log(`east's demo NodePort, ${o.requests} sequential GETs on one kept-alive connection (ms):`);
  console.log(`  answered by the app:              p50 ${latency.direct.p50}, p99 ${latency.direct.p99}`);
  console.log(`  stolen (agent → 2 routers → CLI): p50 ${latency.stolen.p50}, p99 ${latency.stolen.p99}`);
  console.log(`  stolen / direct: p50 ${latency.p50Ratio}x, p99 ${latency.p99Ratio}x`);
  return {
    linger,
    born,
    memory: memory.map((m) => ({
      ...m,
      workingSetMiB: round(m.workingSetMiB, 1),
      rssMiB: round(m.rssMiB, 1),
    })),
    agentMaxMiB,
    latency,
  };
}

export async function runPodsBench(o: PodsBenchOptions = defaultPodsBench): Promise<void> {
  requireWholeNumbers([
    ["--runs", o.runs],
    ["--requests", o.requests],
    ["--rps-requests", o.rpsRequests],
  ]);
  if (o.baselineCli && !existsSync(o.baselineCli))
    throw new Error(
      `--baseline-cli ${o.baselineCli}: no such file; build the other commit first ` +
        "(git worktree add /tmp/base REV && cd /tmp/base && npm ci && npm run build) and pass its dist/bin/switchyard.mjs",
    );
  await onPodStack(
    "pods",
    async (stack) => {
      const result = {
        when: new Date().toISOString(),
        node: process.version,
        options: o,
        ...(await measure(stack, o)),
      };
      console.log(`written ${writeResult("pods", result)}`);
      const { coldS, warmS, coldRollouts, warmRollouts, rps } = result.linger;
      const { born } = result;
      const stealP50 = result.latency.stolen.p50;
      const goals: Goal[] = [
        {
          name: "pods-cold-exec-stolen-p50",
          value: coldS.p50,
          op: "<=",
          target: GOAL_EXEC_READY_S,
          unit: "s",
        },
        { name: "pods-warm-exec-stolen-p50", value: warmS.p50, op: "<=", target: GOAL_WARM_S, unit: "s" },
        // Every cold round rolls out twice (injected, then restored): the fewest and the most.
        {
          name: "pods-cold-rollouts",
          value: coldRollouts.max,
          op: "==",
          target: 2,
          digits: 0,
          requires: { "every round 2": coldRollouts.min === 2 },
        },
        { name: "pods-warm-rollouts", value: warmRollouts.max, op: "==", target: 0, digits: 0 },
        {
          name: "pods-born-first-session-stolen-p50",
          value: born.stolenS.p50,
          op: "<=",
          target: GOAL_WARM_S,
          unit: "s",
        },
        { name: "pods-born-rollouts", value: born.rollouts, op: "==", target: 0, digits: 0 },
        { name: "pods-idle-agent-rps", value: rps.ratio, op: ">=", target: GOAL_IDLE_RPS_RATIO, unit: "x" },
        {
          name: "pods-agent-memory",
          value: result.agentMaxMiB,
          op: "<=",
          target: GOAL_AGENT_MIB,
          unit: "MiB",
          digits: 1,
        },
        { name: "pods-steal-latency-p50", value: stealP50, op: "<=", target: GOAL_STEAL_P50_MS, unit: "ms" },
      ];
      return goals.map((g) => decideGoal(g).line);
    },
    // The members' admission webhook: the born-with-agent rounds' target.
    { injection: true },
  );
}
