// Measures the test environment: warm start time of a cluster set (all API servers
// ready and each controller manager acting) and its resident memory, over several runs.
// Usage: npm run bench:env -- [runs=3] [clusters=primary,east,west]
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinaries } from "../../test/env/binaries.js";
import { startClusterSet } from "../../test/env/clusters/cluster-set.js";

const runs = Number(process.argv[2] ?? 3);
const clusters = (process.argv[3] ?? "primary,east,west").split(",");

function rssMiB(dir: string): number {
  const owner = JSON.parse(readFileSync(join(dir, "owner.json"), "utf8")) as { processes: { pid: number }[] };
  let kib = 0;
  for (const p of owner.processes) {
    const status = readFileSync(`/proc/${p.pid}/status`, "utf8");
    kib += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  }
  return kib / 1024;
}

await ensureBinaries();
const starts: number[] = [];
const memory: number[] = [];
for (let i = 0; i < runs; i++) {
  const t0 = performance.now();
  const set = await startClusterSet({ clusters });
  starts.push((performance.now() - t0) / 1000);
  await new Promise((r) => setTimeout(r, 5000)); // let start-up allocations settle
  memory.push(rssMiB(set.dir));
  await set.stop();
}
const sorted = [...starts].sort((a, b) => a - b);
const result = {
  clusters,
  runs,
  startSeconds: starts.map((s) => Number(s.toFixed(2))),
  startSecondsMedian: Number(sorted[Math.floor(sorted.length / 2)]!.toFixed(2)),
  rssMiB: memory.map((m) => Math.round(m)),
};
console.log(JSON.stringify(result, null, 2));
mkdirSync(new URL("../results", import.meta.url), { recursive: true });
writeFileSync(
  new URL(`../results/env-startup-${Date.now()}.json`, import.meta.url),
  JSON.stringify(result, null, 2),
);
