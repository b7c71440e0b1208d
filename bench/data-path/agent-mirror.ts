// What mirroring costs the agent itself, away from the rest of the stack: one agent process
// in front of a trivial app process, a closed loop of keep-alive requests through the
// agent's traffic port, measured with no session and with one session mirroring the port
// (a real WebSocket client that reads every copy). Rounds alternate so drift hits both
// alike. The figure is the agent's CPU time per request (from /proc), which does not depend
// on how the machine's CPUs are shared; req/s is reported alongside. With `cpus`, every
// process of the measurement runs on those CPUs (taskset), like a pod with a CPU limit.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { AgentClient } from "../../test/peers/agent-client.js";
import { freePorts } from "../../test/env/ports.js";
import { launch } from "../../test/support/launch.js";
import { startBareAgent } from "./bare-agent.js";
import { onCpus } from "../support/cpu-pinning.js";
import { closedLoop } from "./load-support.js";
import { pct, round, writeResult } from "../support/stats-support.js";

export interface AgentMirrorBenchOptions {
  requests: number;
  concurrency: number;
  rounds: number;
  /** taskset CPU list for this process, the app and the agent (default: no pinning). */
  cpus?: string;
}

export const defaultAgentMirrorBench: AgentMirrorBenchOptions = {
  requests: 20_000,
  concurrency: 16,
  rounds: 3,
};

const SECRET = "bench-agent-mirror";

function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, clock ticks
}

export async function runAgentMirrorBench(
  o: AgentMirrorBenchOptions = defaultAgentMirrorBench,
): Promise<void> {
  if (o.cpus) execFileSync("taskset", ["-a", "-p", "-c", o.cpus, String(process.pid)], { stdio: "ignore" });
  const [appPort] = await freePorts(1);
  const app = await launch({
    name: "app",
    ...onCpus(o.cpus, [
      process.execPath,
      "-e",
      `require("http").createServer((q,r)=>{if(q.url==="/healthz")return r.end("ok");q.resume();q.on("end",()=>r.end("ok"))}).listen(${appPort},"127.0.0.1")`,
    ]),
    ready: async () => (await fetch(`http://127.0.0.1:${appPort}/healthz`)).ok,
    readyTimeoutMs: 30_000,
    readyIntervalMs: 100,
    echoStderr: true,
  });
  const target = await startBareAgent({
    appPort: appPort!,
    secretHash: createHash("sha256").update(SECRET).digest("hex"),
    ...(o.cpus ? { cpus: o.cpus } : {}),
  }).catch(async (err: unknown) => {
    await app.stop();
    throw err;
  });
  const agentPid = target.pid;
  let client: AgentClient | undefined;
  try {
    const via = target.trafficUrl;
    const measure = async () => {
      const c0 = cpuSeconds(agentPid);
      const r = await closedLoop(`${via}/m`, o.concurrency, o.requests);
      return {
        reqPerSec: r.reqPerSec,
        agentUsPerRequest: ((cpuSeconds(agentPid) - c0) / o.requests) * 1e6,
      };
    };
    await closedLoop(`${via}/warm`, o.concurrency, 2000);
    const bare: Array<Awaited<ReturnType<typeof measure>>> = [];
    const mirrored: Array<Awaited<ReturnType<typeof measure>>> = [];
    for (let r = 0; r < o.rounds; r++) {
      if (client) {
        await client.unsubscribe(1, appPort!);
        client.close();
        client = undefined;
      }
      bare.push(await measure());
      // A real session peer: it reads every copy as it arrives (a few MiB over a round).
      client = await AgentClient.connect(
        `${target.listenUrl.replace("http:", "ws:")}/v1/sessions/bench`,
        SECRET,
        {
          record: false,
        },
      );
      await client.subscribe(1, appPort!, "mirror");
      mirrored.push(await measure());
    }
    const metrics = await (await fetch(`${target.listenUrl}/metrics`)).text();
    const dropped = Number(/^switchyard_agent_mirror_dropped_bytes_total (\d+)/m.exec(metrics)?.[1] ?? "NaN");
    const med = (xs: number[]) => pct(xs, 50);
    const us = (xs: typeof bare) => med(xs.map((x) => x.agentUsPerRequest));
    const rps = (xs: typeof bare) => med(xs.map((x) => x.reqPerSec));
    const result = {
      when: new Date().toISOString(),
      node: process.version,
      options: o,
      noSession: bare.map((x) => ({
        reqPerSec: round(x.reqPerSec, 0),
        agentUsPerRequest: round(x.agentUsPerRequest, 1),
      })),
      mirror: mirrored.map((x) => ({
        reqPerSec: round(x.reqPerSec, 0),
        agentUsPerRequest: round(x.agentUsPerRequest, 1),
      })),
      mirrorDroppedBytes: dropped,
      agentCpuPerRequestIncreasePct: round((us(mirrored) / us(bare) - 1) * 100, 1),
      reqPerSecDropPct: round((1 - rps(mirrored) / rps(bare)) * 100, 1),
    };
    console.log(result);
    console.log(`written ${writeResult("agent-mirror", result)}`);
  } finally {
    client?.close();
    await target.stop();
    await app.stop();
  }
}
