// Test harness: runs the real router process (data-plane/router/src/main.ts under tsx)
// with a static routes file, and builds routes for test agents. The router's port comes
// from its own "router listening" log line; reloading routes rewrites the file and
// sends SIGHUP, the same path an operator would use.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { hashSecret } from "../../../data-plane/router/src/client-auth.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const routerMain = join(repo, "data-plane/router/src/main.ts");

export interface UpstreamSpec {
  cluster: string;
  url: string;
  secret: string;
  isDefault?: boolean;
  /** PEM CA verifying a wss:// upstream. */
  caPem?: string;
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
    })),
  };
}

export interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

export class RouterProcess {
  readonly logs: LogLine[] = [];
  port = 0;
  private exited: Promise<number | null>;

  private constructor(
    private readonly child: ChildProcess,
    private readonly dir: string,
    private readonly routesFile: string,
  ) {
    this.exited = new Promise((r) => child.once("exit", (code) => r(code)));
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
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        routerMain,
        "--listen",
        "127.0.0.1:0",
        ...(routes ? ["--routes-file", routesFile] : []),
        "--log-level",
        "debug",
        ...extraArgs,
      ],
      { cwd: repo, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } },
    );
    const rp = new RouterProcess(child, dir, routesFile);
    let stderr = "";
    child.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
    const lines = createInterface({ input: child.stdout! });
    const listening = new Promise<number>((resolvePort, reject) => {
      lines.on("line", (line) => {
        try {
          const l = JSON.parse(line) as LogLine;
          rp.logs.push(l);
          if (l.msg === "router listening") resolvePort(l.port as number);
        } catch {
          // not a log line
        }
      });
      child.once("exit", (code) => reject(new Error(`router exited (${code}) before listening: ${stderr}`)));
    });
    // Never leave an orphan router behind when it does not come up (e.g. a log level that hides the line).
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    try {
      rp.port = await listening;
    } catch (err) {
      child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
      throw err;
    } finally {
      clearTimeout(timer);
    }
    rp.tls = extraArgs.includes("--tls-cert");
    return rp;
  }

  get base(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** True when started with --tls-cert: URLs use wss://. */
  tls = false;

  sessionUrl(sessionId: string): string {
    return `${this.tls ? "wss" : "ws"}://127.0.0.1:${this.port}/v1/sessions/${sessionId}`;
  }

  /** Rewrites the routes file (raw content or routes) and makes the router reload it. */
  reload(routes: RouteSpec[] | string): void {
    writeFileSync(
      this.routesFile,
      typeof routes === "string" ? routes : JSON.stringify(routes.map(routeJson)),
    );
    this.child.kill("SIGHUP");
  }

  /** Waits for a log line matching `pred` (already logged or future). */
  async waitForLog(pred: (l: LogLine) => boolean, timeoutMs = 5000): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.logs.find(pred);
      if (found) return found;
      if (Date.now() > deadline) throw new Error("expected router log line did not appear");
      await new Promise((r) => this.child.stdout!.once("data", r).once("end", r));
    }
  }

  async metrics(): Promise<string> {
    return (await fetch(`${this.base}/metrics`)).text();
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
    return this.child.pid!;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 5000);
    await this.exited;
    clearTimeout(timer);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
