// One step of the capacity bench, measured: the load generator's figures for a hold of
// `holdS` seconds plus what /proc says about the processes and CPUs meanwhile (each router,
// the agents, this harness, every CPU's busy and softirq time, and what processes outside the
// bench used), judged against the ladder's baseline. `holdStep` repeats holds as the judgement
// needs (see there).
import { cpus } from "node:os";
import { readFileSync } from "node:fs";
import type { CapacityStack } from "./capacity-stack.js";

const TICKS = 100;

export interface LoadFigures {
  sessions: number;
  offeredPerSec: number;
  sentPerSec: number;
  answeredPerSec: number;
  timeouts: number;
  errors: number;
  rttMs: { p50: number; p90: number; p99: number; max: number };
  latenessMs: { p99: number; max: number };
  cpu: number;
}

export interface Step {
  perReplica: number;
  sessions: number;
  load: LoadFigures;
  /** CPUs busy per router, agents (all three) and this harness during the hold. */
  routerCpu: number[];
  routerRssMiB: number[];
  agentsCpu: number;
  harnessCpu: number;
  /** Busy share (0–1) of the routers' CPUs and of the load side's, softirq included. */
  cpuBusy: { routers: number; loadSide: number };
  /** CPUs busy in softirq (the loopback network stack, not charged to any process). */
  softirqCpu: number;
  /** CPUs busy with other processes on the machine (not this bench's). */
  otherCpu: number;
  pass: boolean;
  why: string[];
  /** Holds measured for this step (see holdStep). */
  holds: number;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const r2 = (x: number) => Number(x.toFixed(2));

function ticks(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8");
    const x = f.slice(f.lastIndexOf(")") + 2).split(" ");
    return Number(x[11]) + Number(x[12]);
  } catch {
    return 0;
  }
}

/** Busy and softirq ticks per CPU, from /proc/stat. */
function cpuTicks(): Map<number, { busy: number; softirq: number }> {
  const m = new Map<number, { busy: number; softirq: number }>();
  for (const line of readFileSync("/proc/stat", "utf8").split("\n")) {
    const x = /^cpu(\d+)\s+(.*)$/.exec(line);
    if (!x) continue;
    // user nice system idle iowait irq softirq steal
    const f = x[2]!.split(/\s+/).map(Number);
    m.set(Number(x[1]), { busy: f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!, softirq: f[6]! });
  }
  return m;
}

/** CPU indices of a taskset list ("1", "0-3", "0,2"); every CPU when undefined. */
export function cpuIndices(list: string | undefined): number[] {
  if (list === undefined) return cpus().map((_, i) => i);
  return list.split(",").flatMap((part) => {
    const [a, b] = part.split("-").map(Number);
    return Array.from({ length: (b ?? a!) - a! + 1 }, (_, i) => a! + i);
  });
}

function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? r2(Number(m[1]) / 1024) : 0;
  } catch {
    return 0;
  }
}

export async function post<T>(url: string, body?: unknown): Promise<T> {
  const res = await fetch(url, { method: "POST", ...(body ? { body: JSON.stringify(body) } : {}) });
  if (!res.ok) throw new Error(`POST ${url}: HTTP ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** CPU indices of the routers' side and of the load side (the same when not pinned). */
export interface Sides {
  routers: number[];
  loadSide: number[];
}

export async function hold(
  stack: CapacityStack,
  o: { holdS: number },
  sides: Sides,
  perReplica: number,
  baseP99?: number,
): Promise<Step> {
  const pids = stack.routers.map((r) => r.pid);
  const others = [...stack.agentPids, process.pid];
  const before = [...pids, ...others].map(ticks);
  const machine0 = cpuTicks();
  const load0 = ticks(stack.loadPid);
  const t0 = performance.now();
  const figures = post<LoadFigures>(`${stack.loadUrl}/measure?seconds=${o.holdS}`);
  // Awaited below; a stop meanwhile (Ctrl-C) must not end the process as an unhandled rejection.
  figures.catch(() => {});
  await sleep(o.holdS * 1000);
  const secs = (performance.now() - t0) / 1000;
  const cpu = [...pids, ...others].map((p, i) => r2((ticks(p) - before[i]!) / TICKS / secs));
  const loadCpu = (ticks(stack.loadPid) - load0) / TICKS / secs;
  const machine1 = cpuTicks();
  const delta = (ix: number[], k: "busy" | "softirq") =>
    ix.reduce((a, i) => a + (machine1.get(i)?.[k] ?? 0) - (machine0.get(i)?.[k] ?? 0), 0) / TICKS / secs;
  const all = [...machine1.keys()];
  const softirqCpu = delta(all, "softirq");
  const otherCpu = delta(all, "busy") - softirqCpu - loadCpu - cpu.reduce((a, b) => a + b, 0);
  const share = (ix: number[]) => r2(delta(ix, "busy") / ix.length);
  const load = await figures;
  const why: string[] = [];
  if (load.errors > 0) why.push(`${load.errors} errors`);
  if (load.timeouts > 0) why.push(`${load.timeouts} timeouts`);
  if (load.answeredPerSec < 0.98 * load.offeredPerSec)
    why.push(`answered ${((100 * load.answeredPerSec) / load.offeredPerSec).toFixed(1)}% of offered`);
  if (baseP99 !== undefined && load.rttMs.p99 > 2 * baseP99)
    why.push(`p99 ${(load.rttMs.p99 / baseP99).toFixed(2)}x baseline`);
  const agentsCpu = cpu.slice(pids.length, pids.length + stack.agentPids.length).reduce((a, b) => a + b, 0);
  return {
    perReplica,
    sessions: perReplica * pids.length,
    load,
    routerCpu: cpu.slice(0, pids.length),
    routerRssMiB: pids.map(rssMiB),
    agentsCpu: r2(agentsCpu),
    harnessCpu: cpu.at(-1)!,
    cpuBusy: { routers: share(sides.routers), loadSide: share(sides.loadSide) },
    softirqCpu: r2(softirqCpu),
    otherCpu: r2(Math.max(0, otherCpu)),
    pass: why.length === 0,
    why,
    holds: 1,
  };
}

export const say = (s: string) => process.stderr.write(`${s}\n`);

export const pc = (x: number) => `${Math.round(x * 100)}%`;

/** A hold counts as quiet when processes outside the bench used at most this many CPUs. */
const QUIET_OTHER_CPU = 0.2;

/**
 * A step judged on the median of its holds, never the best: up to three holds, and the step
 * passes when two of them pass (the first two agreeing settle it). The figures reported are
 * the agreeing holds' worse one (higher p99); undefined while the median is still open.
 */
export function medianOfHolds(holds: Step[]): Step | undefined {
  const passed = holds.filter((h) => h.pass);
  const failed = holds.filter((h) => !h.pass);
  const majority = passed.length >= 2 ? passed : failed.length >= 2 ? failed : undefined;
  if (!majority) return undefined;
  const worse = majority.reduce((a, b) => (b.load.rttMs.p99 > a.load.rttMs.p99 ? b : a));
  return {
    ...worse,
    holds: holds.length,
    why: majority === failed ? [...new Set(failed.flatMap((h) => h.why))] : [],
  };
}

/**
 * Holds a step until it can be judged. The baseline is held until two holds were quiet (at most
 * 4), keeping the lowest p99: one disturbed hold would set a bar every later step clears (a
 * lower bar only makes the later steps harder). A later step is judged on the median of its
 * holds (`medianOfHolds`): every hold counts, not the best one.
 */
export async function holdStep(
  stack: CapacityStack,
  o: { holdS: number },
  sides: Sides,
  perReplica: number,
  base: number | undefined,
  name: string,
): Promise<Step> {
  const holds: Step[] = [];
  const lowest = (xs: Step[]) => xs.reduce((a, b) => (b.load.rttMs.p99 < a.load.rttMs.p99 ? b : a));
  for (;;) {
    const s = await hold(stack, o, sides, perReplica, base);
    holds.push(s);
    const quiet = holds.filter((h) => h.otherCpu <= QUIET_OTHER_CPU);
    if (base === undefined) {
      if (quiet.length >= 2 || holds.length >= 4)
        return { ...lowest(quiet.length > 0 ? quiet : holds), holds: holds.length };
    } else {
      const judged = medianOfHolds(holds);
      if (judged) return judged;
    }
    say(
      `${name}: ${perReplica} per replica, hold ${holds.length}: ${s.why.join(", ") || "baseline"}` +
        ` (other processes ${pc(s.otherCpu)} CPU); holding again`,
    );
  }
}
