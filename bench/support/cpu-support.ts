// Where the CPU goes during a benchmark phase: user+system time of every descendant process
// of this one (from /proc), so a slow data path can be attributed to agent, router or CLI.
import { readFileSync, readdirSync } from "node:fs";

const TICKS_PER_SECOND = 100;

export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(d));
      children.set(ppid, list);
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(root);
  return out;
}

function name(pid: number): string {
  const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  const script = args.find((a) => /\.(ts|mts|js)$/.test(a) && !a.includes("node_modules"));
  const sub = args.find((a) => a.startsWith("--mode=") || a === "exec" || a.startsWith("--cluster-name="));
  return [script ? script.replace(/^.*\/work\/main\//, "") : args[0], sub].filter(Boolean).join(" ");
}

/** CPU seconds used so far by each descendant (and this process), keyed by pid. */
export function cpuSnapshot(): Map<number, { name: string; seconds: number }> {
  const snap = new Map<number, { name: string; seconds: number }>();
  for (const pid of [process.pid, ...descendants(process.pid)]) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      snap.set(pid, {
        name: pid === process.pid ? "bench harness (load generator)" : name(pid),
        seconds: (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND,
      });
    } catch {
      /* exited meanwhile */
    }
  }
  return snap;
}

/** The `top` processes by CPU seconds used between two snapshots. */
export function cpuDelta(
  before: ReturnType<typeof cpuSnapshot>,
  after: ReturnType<typeof cpuSnapshot>,
  top = 6,
) {
  return [...after.entries()]
    .map(([pid, a]) => ({
      pid,
      name: a.name,
      cpuSeconds: Number((a.seconds - (before.get(pid)?.seconds ?? 0)).toFixed(2)),
    }))
    .sort((x, y) => y.cpuSeconds - x.cpuSeconds)
    .slice(0, top);
}
