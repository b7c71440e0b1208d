// Test harness: runs the real agent process (data-plane/agent/src/main.ts under tsx) and
// learns its ports from its own "agent listening" log line. Output is kept for asserts
// (e.g. that no secret is ever logged).
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";

export class AgentProcess {
  port = 0;
  trafficPorts: Record<string, number> = {};

  private constructor(private readonly proc: LaunchedProcess<LogLine>) {
    this.port = proc.ready.port as number;
    this.trafficPorts = (proc.ready.trafficPorts as Record<string, number> | undefined) ?? {};
  }

  /** @param env variables set over the inherited environment (undefined: unset). */
  static async start(args: string[], env: Record<string, string | undefined> = {}): Promise<AgentProcess> {
    const proc = await launch({
      name: "agent",
      ...tsx("data-plane/agent/src/main.ts", ["--listen", "127.0.0.1:0", ...args]),
      env: { KUBERNETES_SERVICE_HOST: "", ...env },
      ready: (p) => p.logs.find((l) => l.msg === "agent listening"),
      readyTimeoutMs: 30_000,
    });
    return new AgentProcess(proc);
  }

  /** Everything the agent printed (stdout and stderr). */
  output(): string {
    return this.proc.output();
  }

  url(sessionId: string): string {
    return `ws://127.0.0.1:${this.port}/v1/sessions/${sessionId}`;
  }

  stop(): Promise<void> {
    return this.proc.stop();
  }
}
