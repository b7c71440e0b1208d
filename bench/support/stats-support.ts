// Small numeric helpers shared by the session and data-path benchmarks: percentiles,
// rounding, and the JSON result file convention of bench/results/.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export function pct(xs: readonly number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

export const round = (x: number, digits = 3) => Number(x.toFixed(digits));

export function summary(xs: readonly number[]) {
  return { n: xs.length, p50: round(pct(xs, 50)), p99: round(pct(xs, 99)), max: round(Math.max(...xs)) };
}

/** Writes `bench/results/<name>-<timestamp>.json` and returns its path. */
export function writeResult(name: string, result: unknown): string {
  const dir = join(import.meta.dirname, "..", "results");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
  writeFileSync(file, JSON.stringify(result, null, 2));
  return file;
}
