// Router capacity: how many active sessions one router replica serves at a fixed load per
// session before its p99 latency doubles, and whether two replicas serve twice as many (the
// premise of scaling routers with the HPA). The stack is capacity-stack.ts (real router
// processes with pushed routes, scripted agents, the load generator capacity-load.ts in its own
// process). A ladder steps the sessions up (`steps`, per replica), each step held `holdS`
// seconds; a step passes when its p99 is at most twice the first step's, at least 98 % of the
// offered requests were answered within 1 s, and no session failed (holds are repeated as
// capacity-hold.ts's holdStep says); the ladder stops at the first failure.
// Capacity = the largest passing step.
//
// Ladders: `single` — one router alone on its CPUs (a full core: the replica as the chart runs
// it, Node's one main thread); `reference` and `pair` — one router, then two, each held to
// `pairQuota` CPUs by a cgroup quota, so that two replicas fit the machine beside the load side.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { cpus, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { killChildren } from "../../test/env/processes.js";
import { shutdownOnSignals } from "../../test/env/stack/signal-shutdown.js";
import {
  startCapacityStack,
  place,
  BENCH_NICE,
  type CapacityStack,
  type RouterPlacement,
} from "./capacity-stack.js";
import { cpuIndices, hold, holdStep, post, say, sleep, type Sides } from "./capacity-hold.js";
import { COLUMNS, finish, printStep, row, type Ladder, type ProfileSummary } from "./capacity-report.js";
import { planPinning } from "../support/cpu-pinning.js";
import { summarizeCpuProfile } from "./cpu-profile-summary.js";
import { cpuQuotaUnavailable, sweepStaleQuotas } from "./cpu-quota.js";
import { writeResult } from "../support/stats-support.js";

export interface CapacityBenchOptions {
  /** Requests per second per session. */
  rate: number;
  request: "echo" | "ping";
  /** Sessions per replica at each step; the first is the baseline. */
  steps: number[];
  holdS: number;
  replicas: "1" | "2" | "both";
  /** Most sessions per replica (file descriptors: a router holds 4 sockets per session). */
  max: number;
  /** CPUs each replica gets in the two-replica comparison. */
  pairQuota: number;
  /** V8 CPU profile of the single router held at the knee. */
  profile: boolean;
}

export const defaultCapacityBench: CapacityBenchOptions = {
  rate: 10,
  request: "echo",
  steps: [100, 250, 500, 750, 1000, 1500, 2000, 2500, 3000, 4000],
  holdS: 10,
  replicas: "both",
  max: 4000,
  pairQuota: 0.5,
  profile: false,
};
export const quickCapacityBench: Partial<CapacityBenchOptions> = { steps: [100, 500, 1000, 2000], holdS: 4 };

/** Time given to freshly opened sessions before a hold. */
const SETTLE_MS = 2000;

async function runLadder(
  stack: CapacityStack,
  o: CapacityBenchOptions,
  sides: Sides,
  name: Ladder["name"],
  replicas: number,
  placement: RouterPlacement,
  steps: number[],
): Promise<Ladder> {
  const l: Ladder = { name, replicas, placement, steps: [], capacity: 0, capped: false };
  await stack.startRouters(replicas, placement);
  try {
    for (const perReplica of steps) {
      const n = perReplica * replicas;
      say(`${name}: ${n} sessions (${perReplica} per replica), ${o.rate} req/s each`);
      await stack.publish(n);
      await post(
        `${stack.loadUrl}/sessions`,
        Array.from({ length: n }, (_, i) => stack.session(i)),
      );
      await sleep(SETTLE_MS);
      const base = l.steps[0]?.load.rttMs.p99;
      const s = await holdStep(stack, o, sides, perReplica, base, name);
      l.steps.push(s);
      printStep(l, s);
      if (!s.pass) break;
      l.capacity = n;
    }
    l.capped = l.steps.every((s) => s.pass);
    return l;
  } finally {
    await post(`${stack.loadUrl}/close`);
    await stack.stopRouters();
  }
}

/** One router held at `perReplica` sessions with a CPU profile; the profile's top self time. */
async function profileAt(
  stack: CapacityStack,
  o: CapacityBenchOptions,
  sides: Sides,
  cpusList: string | undefined,
  n: number,
): Promise<ProfileSummary> {
  const dir = mkdtempSync(join(tmpdir(), "switchyard-capacity-prof-"));
  try {
    await stack.startRouters(1, { ...(cpusList ? { cpus: cpusList } : {}), profileDir: dir });
    say(`profile: ${n} sessions on one router with --cpu-prof`);
    await stack.publish(n);
    await post(
      `${stack.loadUrl}/sessions`,
      Array.from({ length: n }, (_, i) => stack.session(i)),
    );
    await sleep(SETTLE_MS);
    // Three holds' time, so that start-up and session opening weigh little in the profile.
    const step = await hold(stack, { holdS: 3 * o.holdS }, sides, n);
    await post(`${stack.loadUrl}/close`);
    await stack.stopRouters();
    const f = readdirSync(dir).find((x) => x.endsWith(".cpuprofile"));
    if (!f) throw new Error(`the router wrote no .cpuprofile into ${dir}`);
    const results = join(import.meta.dirname, "..", "results");
    mkdirSync(results, { recursive: true });
    const kept = join(
      results,
      `capacity-router-${new Date().toISOString().replace(/[:.]/g, "-")}.cpuprofile`,
    );
    copyFileSync(join(dir, f), kept);
    return { sessions: n, step, file: kept, ...summarizeCpuProfile(kept) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function runCapacityBench(o: CapacityBenchOptions): Promise<void> {
  sweepStaleQuotas();
  const steps = o.steps.filter((s) => s <= o.max);
  const fds = /Max open files\s+(\d+)/.exec(readFileSync("/proc/self/limits", "utf8"))?.[1];
  // A router holds 4 sockets per session (its client and 3 upstreams).
  if (fds && 4 * o.max + 500 > Number(fds))
    throw new Error(
      `--max ${o.max}: a router would need ${4 * o.max + 500} file descriptors, the limit is ${fds} (ulimit -n); lower --max`,
    );
  if (steps.length < 2)
    throw new Error(
      `--steps: need at least two steps at or below --max ${o.max} (the first is the baseline)`,
    );
  const plan = planPinning();
  const quotaWhy = o.replicas === "1" ? undefined : cpuQuotaUnavailable();
  let stack: CapacityStack | undefined;
  const shutdown = shutdownOnSignals({
    stop: async () => {
      await stack?.stop();
    },
    hurry: () => killChildren(),
  });
  const machine = `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`;
  console.log(machine);
  try {
    stack = await startCapacityStack({ rate: o.rate, request: o.request });
    const routerCpus = "unavailable" in plan ? undefined : plan.others;
    const sides: Sides = {
      routers: cpuIndices(routerCpus),
      loadSide: cpuIndices("unavailable" in plan ? undefined : plan.inCluster),
    };
    for (const p of [process.pid, stack.loadPid, ...stack.agentPids])
      place(p, "unavailable" in plan ? undefined : plan.inCluster);
    console.log(
      "unavailable" in plan
        ? `placement: not pinned (${plan.unavailable}): routers, load generator and agents share every CPU`
        : `placement: routers on CPU ${plan.others}; load generator, 3 agents and this harness on CPU ${plan.inCluster}`,
    );
    console.log(
      `priority: every bench process at nice ${BENCH_NICE} (root), so other work on the machine disturbs it less`,
    );
    console.log(
      `load: ${o.rate} req/s per session, open loop (random phase per session), ${o.request === "echo" ? "64-byte OUTGOING_TCP echo via the Default upstream" : "broadcast ping → merged pong over 3 upstreams"}; ` +
        `3 upstreams per session; ${o.holdS} s per step after ${SETTLE_MS / 1000} s settling`,
    );
    console.log(
      "columns: router = CPU of each router process; rCPU / lCPU = busy share of the routers' / the load side's " +
        "CPUs (softirq included); load, agents = CPU of the load generator and of the agents' process; late99 = " +
        "p99 ms the load generator sent behind schedule; sirq = CPUs in softirq (loopback TCP); other = CPUs used by " +
        "processes outside this bench",
    );
    console.log(`\n${row(COLUMNS.map(([h]) => h))}  verdict`);
    const ladders: Ladder[] = [];
    if (o.replicas !== "2")
      ladders.push(
        await runLadder(stack, o, sides, "single", 1, { ...(routerCpus ? { cpus: routerCpus } : {}) }, steps),
      );
    let pairWhy = quotaWhy;
    if (o.replicas !== "1" && quotaWhy === undefined) {
      const placement = { ...(routerCpus ? { cpus: routerCpus } : {}), quota: o.pairQuota };
      try {
        ladders.push(await runLadder(stack, o, sides, "reference", 1, placement, steps));
        // The same steps per replica: twice the sessions in all.
        ladders.push(await runLadder(stack, o, sides, "pair", 2, placement, steps));
      } catch (err) {
        // The single replica's figures stand on their own: report them with this failure.
        if (shutdown.stopping) throw err;
        pairWhy = `failed: ${(err as Error).message}`;
        say(`two replicas: ${pairWhy}`);
      }
    }
    const single = ladders.find((l) => l.name === "single");
    const knee = single?.steps.find((s) => !s.pass) ?? single?.steps.at(-1);
    const profile =
      o.profile && single && knee ? await profileAt(stack, o, sides, routerCpus, knee.perReplica) : undefined;
    const report = finish(o, machine, plan, pairWhy, ladders, profile);
    console.log(`\nwrote ${writeResult("capacity", report.json)}`);
    for (const line of report.goals) console.log(line);
  } catch (err) {
    if (shutdown.stopping) return shutdown.stopped;
    throw err;
  } finally {
    if (!shutdown.stopping) await stack?.stop();
  }
}
