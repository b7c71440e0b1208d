// Test harness: runs the real agent process (data-plane/agent/src/main.ts under tsx) and
// learns its ports from its own "agent listening" log line. Output is kept for asserts
// (e.g. that no secret is ever logged).
import { spawn, type ChildProcess } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const agentMain = join(repo, "data-plane/agent/src/main.ts");

export class AgentProcess {
  readonly output: string[] = [];
  port = 0;
  trafficPorts: Record<string, number> = {};
  private readonly exited: Promise<number | null>;

  private constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((r) => child.once("exit", (code) => r(code)));
  }

  static async start(args: string[]): Promise<AgentProcess> {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", agentMain, "--listen", "127.0.0.1:0", ...args],
      {
        cwd: repo,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, KUBERNETES_SERVICE_HOST: "" },
      },
    );
    const p = new AgentProcess(child);
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString();
      p.output.push(d.toString());
    });
    const lines = createInterface({ input: child.stdout! });
    await new Promise<void>((resolveUp, reject) => {
      const t = setTimeout(() => reject(new Error(`agent did not start within 30 s: ${stderr}`)), 30_000);
      child.once("exit", (code) => {
        clearTimeout(t);
        reject(new Error(`agent exited with ${code}: ${stderr}`));
      });
      lines.on("line", (line) => {
        p.output.push(line);
        try {
          const j = JSON.parse(line) as {
            msg?: string;
            port?: number;
            trafficPorts?: Record<string, number>;
          };
          if (j.msg === "agent listening") {
            p.port = j.port!;
            p.trafficPorts = j.trafficPorts ?? {};
            clearTimeout(t);
            resolveUp();
          }
        } catch {
          // not a log line
        }
      });
    });
    return p;
  }

  url(sessionId: string): string {
    return `ws://127.0.0.1:${this.port}/v1/sessions/${sessionId}`;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) this.child.kill("SIGTERM");
    await this.exited;
  }
}
