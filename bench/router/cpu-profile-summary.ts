// Reads a V8 CPU profile (`node --cpu-prof`, .cpuprofile JSON) and lists the functions with the
// most self time: where the process spent its CPU, one row per function (name, file:line).
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface SelfTimeRow {
  fn: string;
  where: string;
  selfMs: number;
  /** Percent of the busy time (idle excluded). */
  pct: number;
}

function where(url: string, line: number): string {
  if (!url) return "";
  const path = url.replace(/^file:\/\//, "");
  const nm = path.lastIndexOf("/node_modules/");
  const short = nm >= 0 ? path.slice(nm + 1) : path.replace(/^.*?\/(data-plane|proto|lib|test)\//, "$1/");
  return `${short}:${line + 1}`;
}

export function summarizeCpuProfile(file: string, top = 15) {
  const p = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<string, { fn: string; where: string; us: number }>();
  let idleUs = 0;
  let totalUs = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const n = byId.get(p.samples[i]!);
    const dt = p.timeDeltas[i + 1] ?? 0;
    if (!n) continue;
    totalUs += dt;
    const fn = n.callFrame.functionName || "(anonymous)";
    if (fn === "(idle)") {
      idleUs += dt;
      continue;
    }
    const w = where(n.callFrame.url, n.callFrame.lineNumber);
    const key = `${fn} ${w}`;
    const row = self.get(key) ?? { fn, where: w, us: 0 };
    row.us += dt;
    self.set(key, row);
  }
  const busyUs = totalUs - idleUs;
  const rows: SelfTimeRow[] = [...self.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, top)
    .map((r) => ({
      fn: r.fn,
      where: r.where,
      selfMs: Number((r.us / 1000).toFixed(1)),
      pct: Number(((100 * r.us) / busyUs).toFixed(1)),
    }));
  return {
    seconds: Number((totalUs / 1e6).toFixed(1)),
    busyPct: Number(((100 * busyUs) / totalUs).toFixed(1)),
    top: rows,
  };
}
