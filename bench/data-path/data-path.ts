// Data-path benchmark (issue 6) on the whole local stack, with the real CLI (`exec`) as the
// client process and a tiny local HTTP app as CMD:
//   1. stolen request round trip: east trafficUrl (agent) -> east gateway router -> Primary
//      router -> CLI -> local app, versus the same request straight to the local app, paced
//      at 100 req/s and closed-loop at fixed concurrency (max req/s);
//   2. mirror mode's cost: max req/s of the app alone vs through east's trafficUrl with a
//      mirror session, in alternating rounds, plus the mirror copies the local app never got;
//   3. outgoing bulk upload through the CLI's HTTP CONNECT proxy (leaving from east) vs a
//      direct connection to the same local sink.
// Numbers only; nothing here asserts speed.
import { freePorts } from "../../test/env/ports.js";
import { launch, tsx, type LaunchedProcess } from "../../test/support/launch.js";
import { startEmbeddedStack, type EmbeddedStack } from "../../test/env/stack/embedded-stack.js";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { applyPinning, planPinning, type Pinning } from "../support/cpu-pinning.js";
import { cpuDelta, cpuSnapshot, descendants } from "../support/cpu-support.js";
import { closedLoop, connectVia, directSocket, paced, startSink, upload } from "./load-support.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { pct, round, summary, writeResult } from "../support/stats-support.js";

export interface DataPathBenchOptions {
  /** Requests of the paced (100 req/s) run. */
  pacedRequests: number;
  /** Requests and concurrency of the closed-loop (max req/s) runs. */
  maxRequests: number;
  concurrency: number;
  /** Bytes uploaded per bulk run, and runs per side. */
  bulkBytes: number;
  bulkRuns: number;
  /** Alternating baseline / mirror rounds, and requests per round (long enough to be steady). */
  mirrorRounds: number;
  mirrorRequests?: number;
  /**
   * Mirror part: give the in-cluster side (load generator, demo app, east's agent) its own
   * CPUs and everything else (routers, CLI, control planes, API servers) the rest, so the
   * drop measured is the cost to the workload's node, not to one shared machine.
   */
  pin?: boolean;
}

export const defaultDataPathBench: DataPathBenchOptions = {
  pacedRequests: 1000,
  maxRequests: 5000,
  concurrency: 16,
  bulkBytes: 64 * 1024 * 1024,
  bulkRuns: 3,
  mirrorRounds: 3,
  mirrorRequests: 20_000,
};

interface Cli {
  proc: LaunchedProcess<Cli["proxy"]>;
  proxy: { http: string; socks: string };
}

/** Starts `switchyard exec` with a local app on `localPort`; resolves once traffic is subscribed. */
async function startCli(
  stack: EmbeddedStack,
  mode: "steal" | "mirror",
  localPort: number,
  extra: string[] = [],
): Promise<Cli> {
  // The local app answers "ok" and counts the requests on /m it received (mirror copies, in
  // mirror mode); GET /__copies answers that count.
  const app =
    `let n=0;const s=require("http").createServer((q,r)=>{if(q.url==="/__copies")return r.end(String(n));` +
    `if(q.url.startsWith("/m"))n++;q.resume();q.on("end",()=>r.end("ok"))});` +
    `s.keepAliveTimeout=60000;s.listen(${localPort},"127.0.0.1",()=>console.log("local up "+` +
    `JSON.stringify({http:process.env.HTTP_PROXY||"",socks:process.env.ALL_PROXY||""})))`;
  const proc = await launch({
    name: "switchyard-exec",
    ...tsx(
      "cli/src/main.ts",
      [
        "exec",
        ...stack.developerCliArgs,
        `--${mode}`,
        "--port",
        `8080:${localPort}`,
        // The outgoing arm uses the proxy variables; its sink is on loopback, which the
        // transparent network keeps local.
        "--network=proxy",
        ...extra,
        "--",
        process.execPath,
        "-e",
        app,
      ],
      // SWITCHYARD_BENCH_CLI_PROFILE_DIR=<dir>: V8 CPU profiles of the CLI processes there.
      process.env.SWITCHYARD_BENCH_CLI_PROFILE_DIR
        ? ["--cpu-prof", `--cpu-prof-dir=${process.env.SWITCHYARD_BENCH_CLI_PROFILE_DIR}`]
        : [],
    ),
    ready: (p) => {
      const m = /local up (\{.*\})/.exec(p.output());
      return m && /(stealing|mirroring) port 8080/.test(p.output())
        ? (JSON.parse(m[1]!) as Cli["proxy"])
        : undefined;
    },
    readyTimeoutMs: 90_000,
    readyIntervalMs: 100,
  });
  return { proc, proxy: proc.ready };
}

/**
 * Runs one measured phase. With SWITCHYARD_BENCH_PROFILE_MARKER=<file>, that file exists
 * (holding the phase's name) while the phase runs, so a profiler preloaded into the stack's
 * processes (NODE_OPTIONS=--import …) can record exactly this phase; the waits let it notice.
 */
async function phase<T>(name: string, run: () => Promise<T>): Promise<T> {
  const marker = process.env.SWITCHYARD_BENCH_PROFILE_MARKER;
  if (!marker) return run();
  writeFileSync(marker, name);
  await sleep(300);
  try {
    return await run();
  } finally {
    rmSync(marker, { force: true });
    await sleep(300);
  }
}

/** Ctrl-C, as a developer stops it (the session is deleted on the way out). */
function stopCli(cli: Cli): Promise<void> {
  return cli.proc.stop(Infinity, "SIGINT");
}

async function part(stack: EmbeddedStack, o: DataPathBenchOptions) {
  const east = stack.workloads.east!;
  const [localPort] = await freePorts(1);
  const result: Record<string, unknown> = {};

  // 1. Steal.
  let cli = await startCli(stack, "steal", localPort!);
  try {
    const via = `${east.trafficUrl}/s`;
    const direct = `http://127.0.0.1:${localPort}/s`;
    // Warm both paths (connections, JIT) before measuring.
    await closedLoop(via, 4, 300);
    await closedLoop(direct, 4, 300);
    const pacedVia = await paced(via, 100, o.pacedRequests);
    const pacedDirect = await paced(direct, 100, o.pacedRequests);
    let cpu0 = cpuSnapshot();
    const maxVia = await phase("steal-max", () => closedLoop(via, o.concurrency, o.maxRequests));
    const stealCpu = cpuDelta(cpu0, cpuSnapshot());
    const maxDirect = await closedLoop(direct, o.concurrency, o.maxRequests);
    result.steal = {
      at100rps: {
        viaSession: summary(pacedVia),
        direct: summary(pacedDirect),
        addedP50Ms: pct(pacedVia, 50) - pct(pacedDirect, 50),
      },
      max: {
        concurrency: o.concurrency,
        viaSession: { ...summary(maxVia.latencies), reqPerSec: round(maxVia.reqPerSec, 0) },
        direct: { ...summary(maxDirect.latencies), reqPerSec: round(maxDirect.reqPerSec, 0) },
        addedP50Ms: round(pct(maxVia.latencies, 50) - pct(maxDirect.latencies, 50)),
        cpuSecondsViaSession: stealCpu,
      },
    };
    console.log("steal:", JSON.stringify(result.steal, null, 2));

    // 3. Outgoing bulk through the CLI's proxy (out of the Default cluster, east) vs direct.
    const sink = await startSink("127.0.0.1", o.bulkBytes);
    const viaProxy: number[] = [];
    const directBulk: number[] = [];
    cpu0 = cpuSnapshot();
    await phase("bulk", async () => {
      for (let i = 0; i < o.bulkRuns; i++)
        viaProxy.push(await upload(await connectVia(cli.proxy.http, "127.0.0.1", sink.port), o.bulkBytes));
    });
    const bulkCpu = cpuDelta(cpu0, cpuSnapshot());
    for (let i = 0; i < o.bulkRuns; i++)
      directBulk.push(await upload(await directSocket("127.0.0.1", sink.port), o.bulkBytes));
    sink.server.close();
    const med = (xs: number[]) => pct(xs, 50);
    result.outgoingBulk = {
      bytesPerRun: o.bulkBytes,
      runs: o.bulkRuns,
      viaProxyMiBps: viaProxy.map((x) => round(x, 1)),
      directMiBps: directBulk.map((x) => round(x, 1)),
      ratioMedian: round(med(viaProxy) / med(directBulk)),
      cpuSecondsViaProxy: bulkCpu,
    };
    console.log("outgoing bulk:", result.outgoingBulk);
  } finally {
    await stopCli(cli);
  }

  // 2. Mirror. With --pin, the in-cluster side gets its own CPUs (re-applied whenever a new
  // CLI or agent process appears).
  let pinning: Pinning | undefined;
  if (o.pin) {
    const plan = planPinning();
    if ("unavailable" in plan) console.log(`not pinning: ${plan.unavailable}`);
    else pinning = plan;
  }
  const repin = () => pinning && applyPinning(pinning, eastAgentPids(stack));
  repin();
  if (pinning) result.mirrorPinning = pinning;

  // 2a. The app alone (no agent in the path).
  await closedLoop(`${east.appUrl}/warm`, o.concurrency, 500);
  const appOnly = await closedLoop(`${east.appUrl}/m`, o.concurrency, o.maxRequests);

  // 2b. HTTP pass-through: a session whose filtered steal never matches, so the agent parses
  // every request and forwards it to the app (what a filtered steal costs the requests it
  // does not take).
  cli = await startCli(stack, "steal", localPort!, ["--http-header", "X-Switchyard-Bench-Never: ^never$"]);
  let httpPassThrough: Awaited<ReturnType<typeof closedLoop>>;
  try {
    repin();
    await closedLoop(`${east.trafficUrl}/warm`, o.concurrency, 500);
    httpPassThrough = await closedLoop(`${east.trafficUrl}/m`, o.concurrency, o.maxRequests);
  } finally {
    await stopCli(cli);
  }

  // 2c. Mirror, side by side with the app alone: what the workload loses to a mirroring
  // session is measured against the app with nothing in front of it. Rounds alternate app
  // alone / mirror, so drift on a shared machine hits both alike; the drop compares medians.
  // Every copy the agent shed because the session could not keep up counts as lost too.
  cli = await startCli(stack, "mirror", localPort!);
  try {
    const repinAll = () => pinning && applyPinning(pinning, eastAgentPids(stack));
    repinAll();
    // Where the agents really run (pid:CPUs:pod), to check the split.
    if (pinning) result.mirrorPinning = { ...pinning, agents: agentAffinity() };
    await closedLoop(`${east.appUrl}/warm`, o.concurrency, 500);
    await closedLoop(`${east.trafficUrl}/warm`, o.concurrency, 500);
    const baseline: number[] = [];
    const mirrored: number[] = [];
    let last: Awaited<ReturnType<typeof closedLoop>> | undefined;
    const cpuM = cpuSnapshot();
    const n = o.mirrorRequests ?? o.maxRequests;
    for (let r = 0; r < o.mirrorRounds; r++) {
      repinAll();
      baseline.push((await closedLoop(`${east.appUrl}/m`, o.concurrency, n)).reqPerSec);
      last = await phase("mirror", () => closedLoop(`${east.trafficUrl}/m`, o.concurrency, n));
      mirrored.push(last.reqPerSec);
    }
    const cpu = cpuDelta(cpuM, cpuSnapshot());
    const dropped = await eastMirrorDroppedBytes(stack);
    const sent = o.mirrorRounds * n;
    const copies = await copiesSettled(localPort!);
    const med = (xs: number[]) => pct(xs, 50);
    result.mirror = {
      concurrency: o.concurrency,
      rounds: o.mirrorRounds,
      appAloneReqPerSec: baseline.map((x) => round(x, 0)),
      withMirrorReqPerSec: mirrored.map((x) => round(x, 0)),
      withMirrorLastRound: summary(last!.latencies),
      // A mirror copy the session cannot keep up with is cut (by design): fewer copies, less work.
      mirrorDroppedBytes: dropped,
      copiesSent: sent,
      copiesReceived: copies,
      copiesLostPct: (1 - Math.min(copies, sent) / sent) * 100,
      dropVsAppAlonePct: (1 - med(mirrored) / med(baseline)) * 100,
      // Each round's own drop (mirror vs the app-alone round just before it): its spread is how
      // far one run's figure can be trusted.
      dropPerRoundPct: mirrored.map((m, r) => round((1 - m / baseline[r]!) * 100, 1)),
      httpPassThrough: {
        ...summary(httpPassThrough.latencies),
        reqPerSec: round(httpPassThrough.reqPerSec, 0),
        appAloneReqPerSec: round(appOnly.reqPerSec, 0),
      },
      cpuSecondsAllRounds: cpu,
    };
    console.log("mirror:", result.mirror);
  } finally {
    await stopCli(cli);
  }
  return result;
}

/** The mirror copies the local app received, once the count has not moved for a second. */
async function copiesSettled(localPort: number): Promise<number> {
  const read = async () => Number(await (await fetch(`http://127.0.0.1:${localPort}/__copies`)).text());
  let last = await read();
  for (let i = 0; i < 30; i++) {
    await new Promise((r) => setTimeout(r, 1_000));
    const now = await read();
    if (now === last) return now;
    last = now;
  }
  return last;
}

/** East's agent's count of mirrored bytes it dropped (its /metrics, found from the member's record). */
async function eastMirrorDroppedBytes(stack: EmbeddedStack): Promise<number | undefined> {
  const dir = join(stack.agentsDir, "east");
  try {
    const f = readdirSync(dir).find((n) => n.endsWith(".json"));
    if (!f) return undefined;
    const r = JSON.parse(readFileSync(join(dir, f), "utf8")) as { host: string; port: number };
    const text = await (await fetch(`http://${r.host}:${r.port}/metrics`)).text();
    const m = /^switchyard_agent_mirror_dropped_bytes_total (\d+)/m.exec(text);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Every agent process under this one, as `pid:allowed CPUs:pod` ("bare" for the baseline agent). */
function agentAffinity(): string[] {
  const out: string[] = [];
  for (const pid of descendants(process.pid)) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (!cmd.includes("agent/src/main.ts")) continue;
      const st = readFileSync(`/proc/${pid}/status`, "utf8");
      out.push(
        `${pid}:${/Cpus_allowed_list:\s*(\S+)/.exec(st)?.[1]}:${/--pod=(\S+?)\0/.exec(cmd)?.[1] ?? "bare"}`,
      );
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Process agents serving east now (from the member's records). */
function eastAgentPids(stack: EmbeddedStack): number[] {
  const dir = join(stack.agentsDir, "east");
  try {
    return readdirSync(dir)
      .filter((f) => f.endsWith(".json"))
      .map((f) => (JSON.parse(readFileSync(join(dir, f), "utf8")) as { pid: number }).pid);
  } catch {
    return [];
  }
}

/** The data-path goals, from the figures `part` returned (decided by support/goal.ts). */
function goals(r: Record<string, unknown>): Goal[] {
  const steal = r.steal as {
    at100rps: { addedP50Ms: number };
    max: { viaSession: { reqPerSec: number }; direct: { reqPerSec: number } };
  };
  const mirror = r.mirror as { dropVsAppAlonePct: number; copiesLostPct: number; dropPerRoundPct: number[] };
  const bulk = r.outgoingBulk as { ratioMedian: number };
  const stealRatio = steal.max.viaSession.reqPerSec / steal.max.direct.reqPerSec;
  const spread = Math.max(...mirror.dropPerRoundPct) - Math.min(...mirror.dropPerRoundPct);
  return [
    { name: "steal-rps-vs-direct", value: stealRatio, unit: "x", op: ">=", target: 0.5 },
    // What a stolen request adds to its latency at a steady 100 req/s (session p50 − direct p50).
    {
      name: "steal-added-p50-at-100rps",
      value: steal.at100rps.addedP50Ms,
      unit: "ms",
      op: "<=",
      target: 25,
    },
    {
      // Requests per second the app lost to the mirroring session, plus the copies it shed.
      name: "mirror-loss",
      value: mirror.dropVsAppAlonePct + mirror.copiesLostPct,
      unit: "%",
      op: "<=",
      target: 10,
      digits: 1,
    },
    { name: "mirror-loss-spread", value: spread, unit: "pts", op: "<=", target: 5, digits: 1 },
    { name: "outgoing-bulk-vs-direct", value: bulk.ratioMedian, unit: "x", op: ">=", target: 0.5 },
  ];
}

export async function runDataPathBench(o: DataPathBenchOptions = defaultDataPathBench): Promise<void> {
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`;
  const result: Record<string, unknown> = {
    when: new Date().toISOString(),
    node: process.version,
    machine,
    options: o,
  };
  const t0 = performance.now();
  const stack = await startEmbeddedStack();
  console.log(`stack up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  try {
    Object.assign(result, await part(stack, o));
  } finally {
    await stack.stop();
  }
  const verdicts = goals(result).map(decideGoal);
  result.goals = verdicts;
  console.log(`written ${writeResult("data-path", result)}`);
  console.log(`machine: ${machine}${o.pin ? " (--pin)" : ""}`);
  for (const v of verdicts) console.log(v.line);
}
