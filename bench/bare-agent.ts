// An agent process for benchmarks, started straight from the source with no session, no
// API access and no control plane: the baseline "agent in the path" that mirror and steal
// figures are compared with.
import { spawn, type ChildProcess } from "node:child_process";
import { freePorts } from "../test/env/ports.js";

export interface BareAgent {
  child: ChildProcess;
  /** Protocol endpoint (ws://…/v1/sessions/<id>, /healthz, /metrics). */
  listenUrl: string;
  /** Where the app's traffic enters (http://host:port). */
  trafficUrl: string;
  stop(): Promise<void>;
}

export interface BareAgentOptions {
  /** Address of the app and of the agent's traffic port (default 127.0.0.1). */
  host?: string;
  appPort: number;
  /** sha256 (hex) of the secret sessions must present (default: none can). */
  secretHash?: string;
  /** Run it on these CPUs (taskset list). */
  cpus?: string;
}

export async function startBareAgent(o: BareAgentOptions): Promise<BareAgent> {
  const host = o.host ?? "127.0.0.1";
  const [listen, traffic] = await freePorts(2);
  const cmd = [
    process.execPath,
    "--import",
    "tsx",
    "data-plane/agent/src/main.ts",
    `--listen=127.0.0.1:${listen}`,
    `--app-host=${host}`,
    `--traffic-host=${host}`,
    `--app-port=${o.appPort}:${traffic}`,
    `--secret-hash=${o.secretHash ?? "0".repeat(64)}`,
  ];
  const [bin, ...args] = o.cpus ? ["taskset", "-c", o.cpus, ...cmd] : cmd;
  const child = spawn(bin!, args, {
    cwd: new URL("..", import.meta.url).pathname,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const listenUrl = `http://127.0.0.1:${listen}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${listenUrl}/healthz`)).ok) break;
    } catch {
      /* not up yet */
    }
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`the bare agent did not start (exit ${child.exitCode})`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    child,
    listenUrl,
    trafficUrl: `http://${host}:${traffic}`,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
    },
  };
}
