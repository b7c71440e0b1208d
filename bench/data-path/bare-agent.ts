// An agent process for benchmarks, started straight from the source with no session, no
// API access and no control plane: the baseline "agent in the path" that mirror and steal
// figures are compared with.
import { freePorts } from "../../test/env/ports.js";
import { launch } from "../../test/support/launch.js";
import { onCpus } from "../support/cpu-pinning.js";

export interface BareAgent {
  pid: number;
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
  const listenUrl = `http://127.0.0.1:${listen}`;
  const proc = await launch({
    name: "bare-agent",
    ...onCpus(o.cpus, cmd),
    ready: async () => (await fetch(`${listenUrl}/healthz`)).ok,
    readyTimeoutMs: 30_000,
    readyIntervalMs: 100,
    echoStderr: true,
  });
  return {
    pid: proc.pid,
    listenUrl,
    trafficUrl: `http://${host}:${traffic}`,
    stop: () => proc.stop(Infinity),
  };
}
