// Runs bench/k6/router-fanout.js against a real router with 3 scripted agents (see
// bench/README.md). Needs the k6 binary built by `npm run binaries` (test/env/binaries.ts).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { binaryPath } from "../test/env/binaries.js";
import { hashSecret } from "../proto/session-auth.js";
import { spawnTs, stopProc, type Proc } from "./router-bench.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");

export async function runK6Fanout(): Promise<void> {
  const k6 = binaryPath("k6");
  if (!existsSync(k6)) {
    console.log(`k6 scenario skipped: ${k6} is missing; build it with \`npm run binaries\``);
    return;
  }
  const procs: Proc[] = [];
  try {
    const agents = await spawnTs(
      "test/peers/scripted-agents-main.ts",
      ["--agents", "east,west,north", "--secret", "k6-agent"],
      (l) => "agents" in l,
    );
    procs.push(agents);
    const ports = agents.ready.agents as Record<string, number>;
    const dir = mkdtempSync(join(tmpdir(), "switchyard-k6-"));
    const routesFile = join(dir, "routes.json");
    const route = (id: string, names: string[]) => ({
      sessionId: id,
      clientKeyHash: hashSecret("k6-client"),
      state: "SESSION_STATE_READY",
      upstreams: names.map((n, i) => ({
        cluster: n,
        url: `ws://127.0.0.1:${ports[n]}/v1/sessions/${id}`,
        secret: "k6-agent",
        isDefault: i === 0,
      })),
    });
    writeFileSync(
      routesFile,
      JSON.stringify([route("k6-1", ["east"]), route("k6-3", ["east", "west", "north"])]),
    );
    const router = await spawnTs(
      "data-plane/router/src/main.ts",
      ["--listen", "127.0.0.1:0", "--routes-file", routesFile, "--log-level", "info"],
      (l) => l.msg === "router listening",
    );
    procs.push(router);
    const resultsDir = join(repo, "bench/results");
    mkdirSync(resultsDir, { recursive: true });
    for (const session of ["k6-1", "k6-3"]) {
      const summary = join(
        resultsDir,
        `k6-router-fanout-${session}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
      );
      await new Promise<void>((res, rej) => {
        const child = spawn(
          k6,
          [
            "run",
            "--quiet",
            "--summary-export",
            summary,
            "-e",
            `ROUTER_URL=ws://127.0.0.1:${router.ready.port as number}/v1/sessions/${session}`,
            "-e",
            "SECRET=k6-client",
            join(repo, "bench/k6/router-fanout.js"),
          ],
          { stdio: "inherit" },
        );
        child.once("exit", (code) => (code === 0 ? res() : rej(new Error(`k6 exited with ${code}`))));
      });
      console.log(`k6 ${session}: summary in ${summary}`);
    }
  } finally {
    for (const p of procs.reverse()) await stopProc(p);
  }
}
