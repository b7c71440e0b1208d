// A real Prometheus (Debian's package, see env/binaries.ts systemTool) scraping static targets
// every second on loopback, with its data in a directory of the caller's, started through the
// one launcher (recorded, so nothing outlives a killed test) and queried over its HTTP API.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import { systemTool } from "../../env/binaries.js";
import { freePorts } from "../../env/ports.js";
import { launch, type LaunchedProcess } from "../../support/launch.js";

/** One scrape job: its name becomes the `job` label, each target's host:port the `instance` label. */
export interface ScrapeJob {
  job: string;
  targets: string[];
}

export interface QueryResult {
  resultType: "vector" | "matrix" | "scalar" | "string";
  result: Array<{ metric: Record<string, string>; value?: [number, string] }> | [number, string];
}

/** Scrape interval, seconds: short, so rates have samples moments after the traffic. */
export const SCRAPE_INTERVAL_SECONDS = 1;

export class PrometheusServer {
  private constructor(
    readonly url: string,
    private readonly process: LaunchedProcess<unknown>,
  ) {}

  /** Starts Prometheus on a free loopback port with `jobs`, keeping its files under `dir`. */
  static async start(jobs: readonly ScrapeJob[], dir: string): Promise<PrometheusServer> {
    mkdirSync(dir, { recursive: true });
    const config = join(dir, "prometheus.yml");
    writeFileSync(
      config,
      stringify({
        global: {
          scrape_interval: `${SCRAPE_INTERVAL_SECONDS}s`,
          scrape_timeout: `${SCRAPE_INTERVAL_SECONDS}s`,
          evaluation_interval: `${SCRAPE_INTERVAL_SECONDS}s`,
        },
        scrape_configs: jobs.map((j) => ({ job_name: j.job, static_configs: [{ targets: j.targets }] })),
      }),
    );
    const [port] = await freePorts(1);
    const url = `http://127.0.0.1:${port}`;
    const process = await launch({
      name: "prometheus",
      command: systemTool("prometheus"),
      args: [
        `--config.file=${config}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        "--storage.tsdb.retention.time=1h",
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
      ],
      logFile: join(dir, "prometheus.log"),
      ready: async () => (await fetch(`${url}/-/ready`)).ok,
      readyIntervalMs: 200,
    });
    return new PrometheusServer(url, process);
  }

  /** An instant query at the current time; throws on a query Prometheus refuses. */
  async query(expr: string): Promise<QueryResult> {
    const r = await fetch(`${this.url}/api/v1/query`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ query: expr }),
    });
    const body = (await r.json()) as { status: string; data?: QueryResult; error?: string };
    if (body.status !== "success" || !body.data) throw new Error(`Prometheus refused ${expr}: ${body.error}`);
    return body.data;
  }

  /** Series a vector query returns (0 for scalars and strings). */
  async seriesCount(expr: string): Promise<number> {
    const data = await this.query(expr);
    return data.resultType === "vector" || data.resultType === "matrix" ? data.result.length : 0;
  }

  stop(): Promise<void> {
    return this.process.stop();
  }
}
