// Splits this machine's CPUs between the "in-cluster side" and everything else, so that a
// benchmark on one small machine can measure what a feature costs the workload's own
// node instead of what every component of the local stack costs together. The in-cluster
// side is this process (the load generator and the demo apps) plus the agents named;
// every other descendant (control planes, routers, API servers, etcd, the CLI and its
// command) gets the remaining CPUs. Linux only (taskset from util-linux).
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { descendants } from "./cpu-support.js";

export interface Pinning {
  inCluster: string;
  others: string;
}

/** The CPU split, or why there is none (fewer than 2 CPUs, no taskset). */
export function planPinning(): Pinning | { unavailable: string } {
  const cpus = availableParallelism();
  if (cpus < 2) return { unavailable: `needs at least 2 CPUs, this machine has ${cpus}` };
  try {
    execFileSync("taskset", ["-V"], { stdio: "ignore" });
  } catch {
    return { unavailable: "taskset (util-linux) is not installed" };
  }
  const half = Math.floor(cpus / 2);
  const range = (a: number, b: number) => (a === b ? `${a}` : `${a}-${b}`);
  return { inCluster: range(0, half - 1), others: range(half, cpus - 1) };
}

function pin(pid: number, cpus: string): void {
  try {
    // -a: every thread (libuv's pool, V8's helpers), not only the main one.
    execFileSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: "ignore" });
  } catch {
    /* exited meanwhile */
  }
}

/** `cmd` (command and arguments) run on `cpus` (a taskset list) when given. */
export function onCpus(cpus: string | undefined, cmd: string[]): { command: string; args: string[] } {
  const [command, ...args] = cpus ? ["taskset", "-c", cpus, ...cmd] : cmd;
  return { command: command!, args };
}

/** Applies `p` now (call again after processes start: new ones inherit their parent's CPUs). */
export function applyPinning(p: Pinning, inClusterPids: readonly number[]): void {
  const inCluster = new Set([process.pid, ...inClusterPids]);
  for (const pid of descendants(process.pid)) if (!inCluster.has(pid)) pin(pid, p.others);
  for (const pid of inCluster) pin(pid, p.inCluster);
}
