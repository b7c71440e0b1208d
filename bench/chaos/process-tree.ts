// The processes a command started, as this machine's /proc sees them, for the chaos bench's
// orphan count. What a process says its pid is cannot be trusted for that: under the
// transparent network the local app runs in a PID namespace of its own, where its pid (say
// 39) names some unrelated process out here (a kernel thread). So the bench takes the CLI's
// process tree from /proc before it kills the CLI — host pids, each with its start time so a
// reused pid does not count as the same process — and finds the app in it by the pid the app
// reports in its innermost namespace (the last field of `NSpid:`).
import { readdirSync, readFileSync } from "node:fs";
import { basename } from "node:path";

export interface HostProcess {
  pid: number;
  ppid: number;
  /** Start time in clock ticks since boot (field 22 of /proc/<pid>/stat). */
  startTicks: string;
  /** Its pid in its innermost PID namespace (the host pid outside any). */
  nsPid: number;
  argv: string[];
}

/** Fields of /proc/<pid>/stat after the parenthesised command name: state is [0], ppid [1]. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** The rest of what the report needs, for a process already found in the tree by its stat. */
function readProcess(pid: number, f: string[]): HostProcess | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const nsPids = /^NSpid:\s*(.+)$/m.exec(status)?.[1]?.trim().split(/\s+/) ?? [String(pid)];
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    if (argv.at(-1) === "") argv.pop();
    return { pid, ppid: Number(f[1]), startTicks: f[19]!, nsPid: Number(nsPids.at(-1)), argv };
  } catch {
    return undefined; // gone meanwhile
  }
}

/** Every process below `root` (not `root` itself), parents before children. */
export function descendants(root: number): HostProcess[] {
  // Every process's stat, for its parent; the rest is read for the tree's members only.
  const byParent = new Map<number, { pid: number; f: string[] }[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const f = statFields(Number(entry));
    if (!f) continue;
    const ppid = Number(f[1]);
    let children = byParent.get(ppid);
    if (!children) byParent.set(ppid, (children = []));
    children.push({ pid: Number(entry), f });
  }
  const out: HostProcess[] = [];
  const queue = [root];
  while (queue.length) {
    for (const child of byParent.get(queue.shift()!) ?? []) {
      const p = readProcess(child.pid, child.f);
      if (p) out.push(p);
      queue.push(child.pid);
    }
  }
  return out;
}

/** The same process (pid and start time) still runs, and is not a zombie waiting to be reaped. */
export function stillRunning(p: Pick<HostProcess, "pid" | "startTicks">): boolean {
  const f = statFields(p.pid);
  return f !== undefined && f[19] === p.startTicks && f[0] !== "Z" && f[0] !== "X";
}

/**
 * What a process of the CLI's tree is, for the report: the local app and its child by the pids
 * the app reported (in its own namespace), the CLI's watchdog by its `$0`, anything else by its
 * program and first argument.
 */
export function nameOf(p: HostProcess, reported: { app: number; child?: number }): string {
  const script = p.argv.some((a) => a.endsWith("local-app.mjs"));
  if (script && p.nsPid === reported.app) return "local app";
  if (reported.child !== undefined && p.nsPid === reported.child) return "local app's child";
  if (p.argv[3] === "switchyard-watchdog") return "CLI watchdog";
  return [basename(p.argv[0] ?? "?"), ...p.argv.slice(1, 2)].join(" ");
}
