// Runs one k6 script the way a user would (`k6 run`), with k6's built-in web dashboard
// exported as a self-contained HTML report (`bench/results/<name>.html`, the latest run)
// and the end-of-test summary exported as JSON (`bench/results/<name>-<time>.json`). The k6
// binary comes from test/env (built once with Go and cached, like the cluster binaries).
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinaries } from "../../test/env/binaries.js";
import { repoRoot } from "../../test/support/launch.js";

export const resultsDir = join(repoRoot, "bench/results");

/** One metric of k6's summary export: trend stats (ms or plain numbers), or count/rate. */
export type K6Metric = Record<string, number>;

export interface K6Run {
  /** Metrics by name; tagged sub-metrics appear as `name{tag:value}` (those with thresholds). */
  metrics: Record<string, K6Metric>;
  /** False when a threshold failed or k6 ended with an error. */
  passed: boolean;
  html: string;
  summary: string;
}

/** k6's trend statistics in the summary: p(99) is not among its defaults. */
const TREND_STATS = "avg,min,med,p(90),p(99),max,count";

export async function runK6(name: string, script: string, env: Record<string, string>): Promise<K6Run> {
  const { k6 } = await ensureBinaries(["k6"]);
  mkdirSync(resultsDir, { recursive: true });
  const html = join(resultsDir, `${name}.html`);
  const summary = join(resultsDir, `${name}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
  const args = ["run", "--quiet", "--summary-export", summary, "--summary-trend-stats", TREND_STATS];
  for (const [k, v] of Object.entries(env)) args.push("-e", `${k}=${v}`);
  args.push(join(repoRoot, script));
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(k6, args, {
      stdio: "inherit",
      env: {
        ...process.env,
        K6_WEB_DASHBOARD: "true",
        // No listening port (k6 would otherwise wait for open browser tabs before exiting).
        K6_WEB_DASHBOARD_PORT: "-1",
        K6_WEB_DASHBOARD_PERIOD: "1s",
        K6_WEB_DASHBOARD_EXPORT: html,
        K6_NO_USAGE_REPORT: "true",
      },
    });
    child.once("error", reject);
    child.once("exit", (c, signal) => resolve(c ?? (signal ? 128 : 1)));
  });
  let metrics: Record<string, K6Metric>;
  try {
    metrics = (JSON.parse(readFileSync(summary, "utf8")) as { metrics: Record<string, K6Metric> }).metrics;
  } catch (err) {
    throw new Error(`k6 ${name} exited with ${code} and wrote no summary (${(err as Error).message})`, {
      cause: err,
    });
  }
  // 99: thresholds failed (the summary is still complete); anything else is a broken run.
  if (code !== 0 && code !== 99) throw new Error(`k6 ${name} exited with ${code}`);
  return { metrics, passed: code === 0, html, summary };
}
