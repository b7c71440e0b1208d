// The components' metrics, live: the embedded stack (real control planes, routers and agents as
// processes) carries a real `switchyard exec` session with stolen requests through east and west
// (and, before it, a session whose client sends a frame the router must refuse);
// then every component's /metrics must pass `promtool check metrics`, and a real Prometheus
// scraping all of them must return at least one series for every query of the chart's Grafana
// dashboard (variables as Grafana would fill them: All for $job/$instance, a rate window for
// $__rate_interval). Canaries prove both checks can fail: promtool refuses a badly named counter,
// and a query of a metric nobody exports returns nothing.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KubeSessions } from "../../../cli/src/sdk/kube/kube-sessions.js";
import { readOperator } from "../../../cli/src/sdk/kube/operator-info.js";
import { ErrorCode } from "../../../proto/error-codes.js";
import { sessionKey, sessionUrl } from "../../../proto/session-endpoint.js";
import { systemTool } from "../../env/binaries.js";
import { startEmbeddedStack, type EmbeddedStack } from "../../env/stack/embedded-stack.js";
import { chartDir } from "../../env/stack/helm.js";
import { launch, tsx, type LaunchedProcess } from "../../support/launch.js";
import { RawSessionClient } from "../../peers/raw-session-client.js";
import { eventually } from "../../support/poll.js";
import { PrometheusServer, SCRAPE_INTERVAL_SECONDS } from "./prometheus-server.js";
import { runTool } from "./run-tool.js";
import { stackMetricsTargets, type MetricsTarget } from "./stack-metrics.js";

/** What Grafana puts for $__rate_interval at this scrape interval (4 × the interval, and then some). */
const RATE_INTERVAL = `${15 * SCRAPE_INTERVAL_SECONDS}s`;
/** The dashboard's allValue for $job and $instance ("All"). */
const ALL = ".+";
const JOBS: Record<MetricsTarget["component"], string> = {
  "control-plane": "switchyard-control-plane",
  router: "switchyard-router",
  agent: "switchyard-agent",
};

interface DashboardQuery {
  panel: string;
  refId: string;
  expr: string;
}

/** Every target of every panel, with the dashboard's variables filled in. */
function dashboardQueries(): DashboardQuery[] {
  const dashboard = JSON.parse(readFileSync(join(chartDir, "dashboards/switchyard.json"), "utf8")) as {
    panels: { title: string; targets?: { refId: string; expr: string }[] }[];
  };
  return dashboard.panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({
      panel: p.title,
      refId: t.refId,
      expr: t.expr.replaceAll("$__rate_interval", RATE_INTERVAL).replace(/\$\{?(job|instance)\}?/g, ALL),
    })),
  );
}

let stack: EmbeddedStack;
let exec: LaunchedProcess<unknown> | undefined;
let local: Server | undefined;
let prometheus: PrometheusServer | undefined;
let dir: string;
let targets: MetricsTarget[];

/**
 * A client that sends a text frame on its session, which a router refuses and counts
 * (SWITCHYARD_FRAME_NOT_BINARY): the dashboard's "Rejected frames/s" has something to show.
 */
async function sendRejectedFrame(): Promise<void> {
  const kc = stack.developer.kubeConfig();
  const kube = new KubeSessions(kc);
  const session = await kube.create(
    { target: "deployment/demo", namespace: "default", ttlSeconds: 300 },
    await readOperator(kc),
  );
  try {
    const router = stack.primaryRouterUrls[0]!;
    const client = await eventually(
      "the Primary router to take the session",
      () =>
        RawSessionClient.connect(
          sessionUrl(router, sessionKey(session.namespace, session.id)),
          session.secret,
        ),
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    client.ws.send("not a frame");
    await eventually(
      "the router to count the rejected frame",
      async () =>
        (await (await fetch(`${stack.primaryRouterAdminUrls[0]}/metrics`)).text()).includes(
          `switchyard_router_bad_frames_total{source="client",code="${ErrorCode.FRAME_NOT_BINARY}"} 1`,
        ),
      { timeoutMs: 10_000, intervalMs: 100 },
    );
    client.ws.terminate();
  } finally {
    await kube.delete(session);
  }
}

/** One GET on a fresh connection (a stolen one is answered by the local process). */
function get(url: string): Promise<string | undefined> {
  return new Promise((resolvePromise, reject) => {
    const req = request(url, { agent: false }, (r) => {
      r.resume();
      r.on("end", () => resolvePromise(r.headers["x-served-by"] as string | undefined));
    });
    req.on("error", reject);
    req.end();
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-live-metrics-"));
  stack = await startEmbeddedStack();
  await sendRejectedFrame();
  // A developer's session: requests reaching east's and west's agents are stolen to a local
  // server (listening before the session starts, so no other socket can take its port), while
  // `switchyard exec` runs a command that only waits.
  local = createServer((_req, res) => {
    res.setHeader("x-served-by", "local");
    res.end("local\n");
  });
  await new Promise<void>((r) => local!.listen(0, "127.0.0.1", r));
  const localPort = (local.address() as AddressInfo).port;
  exec = await launch({
    name: "switchyard-exec",
    ...tsx("cli/src/main.ts", [
      "exec",
      ...stack.developerCliArgs,
      "--port",
      `8080:${localPort}`,
      "--steal",
      "--",
      process.execPath,
      "-e",
      'console.log("command ready"); setInterval(() => {}, 1 << 30)',
    ]),
    ready: (p) => p.output().includes("command ready"),
    readyTimeoutMs: 120_000,
    readyIntervalMs: 250,
  });
  for (const w of Object.values(stack.workloads)) {
    await eventually(
      `a request through ${w.name} answered by the local process`,
      async () => ((await get(`${w.trafficUrl}/orders`)) === "local" ? true : undefined),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    for (let i = 0; i < 20; i++) expect(await get(`${w.trafficUrl}/orders/${i}`)).toBe("local");
  }
  targets = stackMetricsTargets(stack);
  const jobs = Object.entries(JOBS).map(([component, job]) => ({
    job,
    targets: targets.filter((t) => t.component === component).map((t) => t.address),
  }));
  prometheus = await PrometheusServer.start(jobs, join(dir, "prometheus"));
  // Every target up, and enough scrapes for the rate windows.
  const p = prometheus;
  await eventually(
    "Prometheus to scrape every component several times",
    async () =>
      (await p.seriesCount(`count_over_time(up[${RATE_INTERVAL}]) >= 5 and up == 1`)) === targets.length,
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}, 240_000);

afterAll(async () => {
  await prometheus?.stop();
  if (exec) await exec.stop(10_000, "SIGINT");
  local?.closeAllConnections();
  local?.close();
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function scrape(t: MetricsTarget): Promise<string> {
  const r = await fetch(`http://${t.address}/metrics`);
  expect(r.status, `${t.name} /metrics`).toBe(200);
  return r.text();
}

const promtool = (exposition: string) =>
  runTool(systemTool("promtool"), ["check", "metrics"], { input: exposition });

describe("promtool check metrics", () => {
  it("finds nothing in the /metrics of any control plane, router or agent", async () => {
    expect(targets.filter((t) => t.component === "agent").length, "agents started").toBeGreaterThan(0);
    const problems: string[] = [];
    for (const t of targets) {
      const exposition = await scrape(t);
      expect(exposition, `${t.name} exports switchyard metrics`).toMatch(/^switchyard_/m);
      const r = await promtool(exposition);
      if (r.code !== 0 || r.stdout.trim() || r.stderr.trim())
        problems.push(`${t.name} (${t.address}), exit ${r.code}:\n${r.stdout}${r.stderr}`);
    }
    expect(problems.join("\n")).toBe("");
  });

  it("refuses a counter without the _total suffix (it checks what it is given)", async () => {
    const r = await promtool("# HELP things Things.\n# TYPE things counter\nthings 1\n");
    expect(r.code).not.toBe(0);
    expect(r.stdout + r.stderr).toMatch(/_total/);
  });
});

describe("the Grafana dashboard on a real Prometheus", () => {
  const queries = dashboardQueries();

  it("has queries to evaluate", () => {
    expect(queries.length).toBeGreaterThanOrEqual(20);
  });

  it("returns at least one series for every query of every panel", async () => {
    const empty: string[] = [];
    for (const q of queries) {
      if ((await prometheus!.seriesCount(q.expr)) === 0)
        empty.push(`panel "${q.panel}" (${q.refId}): ${q.expr}`);
    }
    expect(empty, "queries that returned no series after the traffic").toEqual([]);
  });

  it("returns nothing for a metric nobody exports (an empty query would fail the check above)", async () => {
    expect(
      await prometheus!.seriesCount(`sum by (job) (rate(switchyard_no_such_metric_total[${RATE_INTERVAL}]))`),
    ).toBe(0);
  });
});
