// Test harness: runs the real router process (data-plane/router/src/main.ts under tsx)
// with a static routes file, and builds routes for scripted agents. The router's ports (the
// session port and the admin port of /metrics and /debug/*) come from its own "router
// listening" log line; reloading routes rewrites the file and sends SIGHUP, the same path
// an operator would use.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hashSecret } from "../../../proto/session-auth.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";

export type { LogLine };

export interface UpstreamSpec {
  cluster: string;
  url: string;
  secret: string;
  isDefault?: boolean;
  /** PEM CA verifying a wss:// upstream. */
  caPem?: string;
  /** Name the upstream's certificate is verified against instead of the URL's host. */
  serverName?: string;
  /** A gateway router: carry the session on the shared multiplexed connection. */
  mux?: boolean;
}

export interface RouteSpec {
  sessionId: string;
  secret: string;
  state?: "SESSION_STATE_READY" | "SESSION_STATE_CREATING";
  upstreams: UpstreamSpec[];
}

/** A SessionRoute in protobuf JSON form, as the routes file holds it. */
export function routeJson(r: RouteSpec): Record<string, unknown> {
  return {
    sessionId: r.sessionId,
    clientKeyHash: hashSecret(r.secret),
    state: r.state ?? "SESSION_STATE_READY",
    upstreams: r.upstreams.map((u) => ({
      cluster: u.cluster,
      url: u.url,
      secret: u.secret,
      isDefault: u.isDefault ?? false,
      ...(u.caPem ? { caPem: u.caPem } : {}),
      ...(u.serverName ? { serverName: u.serverName } : {}),
      ...(u.mux ? { mux: true } : {}),
    })),
  };
}

export class RouterProcess {
  port = 0;
  /** The admin listener's port (/metrics, /debug/*). */
  adminPort = 0;

  private constructor(
    private readonly proc: LaunchedProcess<LogLine>,
    private readonly dir: string,
    private readonly routesFile: string,
    /** True when started with --tls-cert: URLs use wss://. */
    readonly tls: boolean,
  ) {
    this.port = proc.ready.port as number;
    this.adminPort = proc.ready.adminPort as number;
  }

  /** `routes` null: no routes file (the table comes from --control-plane). */
  static async start(
    routes: RouteSpec[] | null,
    extraArgs: string[] = [],
    env: Record<string, string> = {},
  ): Promise<RouterProcess> {
    const dir = mkdtempSync(join(tmpdir(), "switchyard-router-"));
    const routesFile = join(dir, "routes.json");
    if (routes) writeFileSync(routesFile, JSON.stringify(routes.map(routeJson)));
    const args = [
      "--listen",
      "127.0.0.1:0",
      "--admin-listen",
      "127.0.0.1:0",
      ...(routes ? ["--routes-file", routesFile] : []),
      "--log-level",
      "debug",
      ...extraArgs,
    ];
    try {
      // A log level that hides the line makes this time out (and kill the router), never hang.
      const proc = await launch({
        name: "router",
        ...tsx("data-plane/router/src/main.ts", args),
        env,
        ready: (p) => p.logs.find((l) => l.msg === "router listening"),
        readyTimeoutMs: 30_000,
      });
      return new RouterProcess(proc, dir, routesFile, extraArgs.includes("--tls-cert"));
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** JSON log lines the router printed, oldest first. */
  get logs(): LogLine[] {
    return this.proc.logs;
  }

  /** The session port over plain HTTP (probes, refusals). */
  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The admin port: /metrics, /healthz, /readyz, /debug/routes, /debug/memory. */
  get adminBase(): string {
    return `http://127.0.0.1:${this.adminPort}`;
  }

  sessionUrl(sessionId: string): string {
    return `${this.tls ? "wss" : "ws"}://127.0.0.1:${this.port}/v1/sessions/${sessionId}`;
  }

  /** Rewrites the routes file (raw content or routes) and makes the router reload it. */
  reload(routes: RouteSpec[] | string): void {
    writeFileSync(
      this.routesFile,
      typeof routes === "string" ? routes : JSON.stringify(routes.map(routeJson)),
    );
    this.proc.kill("SIGHUP");
  }

  /** Waits for a log line matching `pred` (already logged or future). */
  waitForLog(pred: (l: LogLine) => boolean, timeoutMs = 5000): Promise<LogLine> {
    return this.proc.waitForLog(pred, timeoutMs, "an expected router log line");
  }

  async metrics(): Promise<string> {
    return (await fetch(`${this.adminBase}/metrics`)).text();
  }

  /** The value of one metric sample, e.g. metric('switchyard_router_bad_frames_total', {code: 'X'}). */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const text = await this.metrics();
    let total = 0;
    for (const line of text.split("\n")) {
      if (!line.startsWith(name)) continue;
      const m = /^([^{ ]+)(\{[^}]*\})? (.+)$/.exec(line);
      if (!m || m[1] !== name) continue;
      const l = m[2] ?? "";
      if (Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) total += Number(m[3]);
    }
    return total;
  }

  get pid(): number {
    return this.proc.pid;
  }

  async stop(): Promise<void> {
    await this.proc.stop(5000);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
