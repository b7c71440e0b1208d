// Router benchmark: side by side in one run on loopback —
//   direct   client ↔ agent
//   relay    client ↔ trivial WebSocket relay ↔ agent (the physical limit of one hop)
//   router1  client ↔ router (session with 1 upstream) ↔ agent
//   router3  client ↔ router (session with 3 upstreams) ↔ 3 agents
// Measures unloaded 64-byte round-trip latency, broadcast ping → merged pong latency,
// small-frame and 16 KiB bulk echo throughput, and router heap per idle session
// (1,000 sessions × 3 upstreams). Prints a table with ratios against issue 3's goals and
// writes JSON to bench/results/. Agents, relay and router are separate processes.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as pb from "../../proto/gen/session_pb.js";
import { encodeFrame } from "../../proto/frame-codec.js";
import { hashSecret } from "../../proto/session-auth.js";
import { RawSessionClient } from "../../test/peers/raw-session-client.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../test/support/launch.js";
import { printGoals, type Goal, type GoalOp } from "../support/goal.js";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const F = pb.FrameFamily;
const AGENT_SECRET = "bench-agent";
const CLIENT_SECRET = "bench-client";

export interface RouterBenchOptions {
  /** Round trips measured per latency scenario (after as many warm-up ones / 5). */
  latencyRounds: number;
  /** Frames per throughput scenario. */
  smallFrames: number;
  bulkFrames: number;
  idleSessions: number;
  /** Pass --upstream-unmasked to the router. */
  unmasked: boolean;
  /** Write a V8 CPU profile of the router to $TMPDIR/switchyard-router-profiles/ (not committed). */
  profile?: boolean;
}

export const defaultRouterBench: RouterBenchOptions = {
  latencyRounds: 10_000,
  smallFrames: 200_000,
  bulkFrames: 20_000,
  idleSessions: 1_000,
  unmasked: false,
};

/** A benchmark peer process; `ready` is the JSON line it announced itself with. */
export type Proc = LaunchedProcess<LogLine>;

/** Starts a TypeScript entry point; ready once it prints a JSON line `ready` accepts. */
export function spawnTs(
  script: string,
  args: string[],
  ready: (l: LogLine) => boolean,
  nodeArgs: string[] = [],
): Promise<Proc> {
  return launch({
    name: basename(script, ".ts"),
    ...tsx(script, args, nodeArgs),
    ready: (p) => p.logs.find(ready),
    readyTimeoutMs: Infinity,
    echoStderr: true,
  });
}

/** SIGTERM, and wait as long as it takes (a CPU profile is written on the way out). */
export function stopProc(p: Proc): Promise<void> {
  return p.stop(Infinity);
}

/** User + system CPU of a process from /proc (Linux), microseconds; 0 elsewhere. */
export function processCpuMicros(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[11], fields[12] are utime and stime in clock ticks (USER_HZ = 100 on Linux).
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / 100;
  } catch {
    return 0;
  }
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

interface Latency {
  p50us: number;
  p99us: number;
  meanUs: number;
}

/** Sequential round trips of `frame` (after rounds/5 warm-up ones); the reply is any frame of `replyFamily`. Microseconds. */
async function roundTrips(
  client: RawSessionClient,
  frame: Buffer,
  replyFamily: number,
  rounds: number,
  bumpRequestId = false,
): Promise<number[]> {
  let resolveReply: (() => void) | undefined;
  client.onRaw = (buf) => {
    if (buf[0] === replyFamily && resolveReply) {
      const r = resolveReply;
      resolveReply = undefined;
      r();
    }
  };
  const samples: number[] = [];
  const warmup = Math.floor(rounds / 5);
  for (let i = 0; i < warmup + rounds; i++) {
    if (bumpRequestId) frame.writeUInt32BE(1_000_000 + i, 4);
    const t0 = process.hrtime.bigint();
    await new Promise<void>((r) => {
      resolveReply = r;
      client.send(frame);
    });
    if (i >= warmup) samples.push(Number(process.hrtime.bigint() - t0) / 1000);
  }
  client.onRaw = undefined;
  return samples;
}

function summarize(samples: number[]): Latency {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    p50us: pct(sorted, 50),
    p99us: pct(sorted, 99),
    meanUs: sorted.reduce((a, b) => a + b, 0) / sorted.length,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

interface Throughput {
  msgsPerSec: number;
  mbPerSec: number;
}

/** Echo throughput with `window` frames in flight. */
async function throughput(
  client: RawSessionClient,
  frame: Buffer,
  total: number,
  window: number,
): Promise<Throughput> {
  let sent = 0;
  let received = 0;
  const t0 = process.hrtime.bigint();
  await new Promise<void>((done) => {
    client.onRaw = (buf) => {
      if (buf[0] !== F.OUTGOING_TCP) return;
      received++;
      if (received === total) return done();
      if (sent < total) {
        sent++;
        client.send(frame);
      }
    };
    for (; sent < Math.min(window, total); sent++) client.send(frame);
  });
  client.onRaw = undefined;
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return { msgsPerSec: total / secs, mbPerSec: (total * frame.length) / secs / (1024 * 1024) };
}

function dataFrame(totalBytes: number): Buffer {
  // Header 16 + StreamData{data} (tag + length varint) = totalBytes.
  const lenBytes = totalBytes - 16 - 1 > 127 + 1 ? (totalBytes - 16 - 1 > 16384 + 2 ? 3 : 2) : 1;
  const data = Buffer.alloc(totalBytes - 16 - 1 - lenBytes, 0x61);
  const f = encodeFrame(
    { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.DATA, connectionId: 1 },
    pb.StreamDataSchema,
    { data },
  );
  return f;
}

function pingFrame(): Buffer {
  return encodeFrame({ family: F.PING, kind: pb.PingKind.PING, requestId: 1 }, pb.PingSchema, {
    sentAtMicros: 1n,
  });
}

async function connect(url: string, secret: string, clusters: string[]): Promise<RawSessionClient> {
  const c = await RawSessionClient.connect(url, secret);
  for (const cl of clusters) await c.upstreamStatus(cl, pb.UpstreamState.UP, 15_000);
  c.stopRecording();
  return c;
}

export async function runRouterBench(
  opts: RouterBenchOptions = defaultRouterBench,
): Promise<Record<string, unknown>> {
  const procs: Proc[] = [];
  const dir = mkdtempSync(join(tmpdir(), "switchyard-bench-"));
  try {
    // One process per agent, as each cluster's agent runs on its own machine.
    const ports: Record<string, number> = {};
    for (const name of ["east", "west", "north"]) {
      const agentProc = await spawnTs(
        "test/peers/scripted-agents-main.ts",
        ["--agents", name, "--secret", AGENT_SECRET],
        (l) => "agents" in l,
      );
      procs.push(agentProc);
      Object.assign(ports, agentProc.ready.agents as Record<string, number>);
    }
    const agentUrl = (name: string, session: string) =>
      `ws://127.0.0.1:${ports[name]}/v1/sessions/${session}`;

    const relay = await spawnTs(
      "bench/router/ws-relay.ts",
      ["--upstream", agentUrl("east", "relay"), "--secret", AGENT_SECRET],
      (l) => "port" in l,
    );
    procs.push(relay);

    const up = (names: string[], session: string) =>
      names.map((n, i) => ({
        cluster: n,
        url: agentUrl(n, session),
        secret: AGENT_SECRET,
        isDefault: i === 0,
      }));
    const route = (id: string, names: string[]) => ({
      sessionId: id,
      clientKeyHash: hashSecret(CLIENT_SECRET),
      state: "SESSION_STATE_READY",
      upstreams: up(names, id),
    });
    const routes = [route("bench-1", ["east"]), route("bench-3", ["east", "west", "north"])];
    for (let i = 0; i < opts.idleSessions; i++) routes.push(route(`idle-${i}`, ["east", "west", "north"]));
    const routesFile = join(dir, "routes.json");
    writeFileSync(routesFile, JSON.stringify(routes));
    const routerArgs = [
      "--listen",
      "127.0.0.1:0",
      "--admin-listen",
      "127.0.0.1:0",
      "--routes-file",
      routesFile,
      "--log-level",
      "info",
    ];
    if (opts.unmasked) routerArgs.push("--upstream-unmasked");
    const router = await spawnTs(
      "data-plane/router/src/main.ts",
      routerArgs,
      (l) => l.msg === "router listening",
      opts.profile
        ? ["--expose-gc", "--cpu-prof", "--cpu-prof-dir", join(tmpdir(), "switchyard-router-profiles")]
        : ["--expose-gc"],
    );
    procs.push(router);
    const routerPort = router.ready.port as number;
    // /debug/memory is on the admin port (the "router listening" line names both).
    const routerAdminPort = router.ready.adminPort as number;
    const routerUrl = (s: string) => `ws://127.0.0.1:${routerPort}/v1/sessions/${s}`;

    const targets = {
      direct: await connect(agentUrl("east", "direct"), AGENT_SECRET, []),
      relay: await connect(
        `ws://127.0.0.1:${relay.ready.port as number}/v1/sessions/relay`,
        AGENT_SECRET,
        [],
      ),
      router1: await connect(routerUrl("bench-1"), CLIENT_SECRET, ["east"]),
      router3: await connect(routerUrl("bench-3"), CLIENT_SECRET, ["east", "west", "north"]),
    };
    type Name = keyof typeof targets;
    const names = Object.keys(targets) as Name[];

    const results: Record<string, Record<string, unknown>> = {};
    for (const n of names) results[n] = {};
    const log = (s: string) => process.stderr.write(s + "\n");

    // Targets take turns in every round so background load on this shared machine hits
    // them alike; latency samples are pooled, throughput is the median of the rounds.
    const ROUNDS = 5;
    // Router CPU (user + system) spent per ping, to tell router work from scheduling.
    const routerCpuMicros = async () => {
      const m = (await (await fetch(`http://127.0.0.1:${routerAdminPort}/debug/memory`)).json()) as {
        cpu: { user: number; system: number };
      };
      return m.cpu.user + m.cpu.system;
    };
    const pingCpu: Record<string, number> = {};
    // CPU of the middle hop (relay or router process) during throughput runs: unlike
    // wall-clock rates it does not depend on what else this shared machine is doing.
    const hopPid: Record<string, number | undefined> = {
      relay: relay.pid,
      router1: router.pid,
      router3: router.pid,
    };
    const hopCpu = (n: string) => {
      const pid = hopPid[n];
      return pid === undefined ? 0 : processCpuMicros(pid);
    };
    const hopCpuSmall: Record<string, number> = {};
    const hopCpuBulk: Record<string, number> = {};
    const lat: Record<string, number[]> = {};
    const ping: Record<string, number[]> = {};
    const small: Record<string, Throughput[]> = {};
    const bulk: Record<string, Throughput[]> = {};
    for (const n of names) [lat[n], ping[n], small[n], bulk[n]] = [[], [], [], []];
    for (let round = 1; round <= ROUNDS; round++) {
      log(
        `round ${round}/${ROUNDS}: 64-byte echo latency, ping → merged pong, 64-byte and 16 KiB echo throughput`,
      );
      for (const n of names)
        lat[n]!.push(
          ...(await roundTrips(targets[n], dataFrame(64), F.OUTGOING_TCP, opts.latencyRounds / ROUNDS)),
        );
      for (const n of names) {
        const before = n.startsWith("router") ? await routerCpuMicros() : 0;
        ping[n]!.push(
          ...(await roundTrips(targets[n], pingFrame(), F.PING, opts.latencyRounds / ROUNDS, true)),
        );
        if (n.startsWith("router")) pingCpu[n] = (pingCpu[n] ?? 0) + (await routerCpuMicros()) - before;
      }
      for (const n of names) {
        const before = hopCpu(n);
        small[n]!.push(await throughput(targets[n], dataFrame(64), opts.smallFrames / ROUNDS, 1000));
        hopCpuSmall[n] = (hopCpuSmall[n] ?? 0) + hopCpu(n) - before;
      }
      for (const n of names) {
        const before = hopCpu(n);
        bulk[n]!.push(await throughput(targets[n], dataFrame(16 * 1024), opts.bulkFrames / ROUNDS, 64));
        hopCpuBulk[n] = (hopCpuBulk[n] ?? 0) + hopCpu(n) - before;
      }
    }
    for (const n of names) {
      results[n]!.latency64 = summarize(lat[n]!);
      results[n]!.ping = summarize(ping[n]!);
      if (hopPid[n] !== undefined) {
        results[n]!.hopCpuPerSmallFrameUs = hopCpuSmall[n]! / opts.smallFrames;
        results[n]!.hopCpuPerBulkFrameUs = hopCpuBulk[n]! / opts.bulkFrames;
      }
      if (pingCpu[n] !== undefined) results[n]!.routerCpuPerPingUs = pingCpu[n] / ping[n]!.length;
      results[n]!.small = {
        msgsPerSec: median(small[n]!.map((t) => t.msgsPerSec)),
        mbPerSec: median(small[n]!.map((t) => t.mbPerSec)),
      };
      results[n]!.bulk = {
        msgsPerSec: median(bulk[n]!.map((t) => t.msgsPerSec)),
        mbPerSec: median(bulk[n]!.map((t) => t.mbPerSec)),
      };
    }
    for (const n of names) targets[n].close();

    log(`idle: ${opts.idleSessions} sessions × 3 upstreams`);
    const mem = async () =>
      (await (await fetch(`http://127.0.0.1:${routerAdminPort}/debug/memory?gc=1`)).json()) as {
        heapUsed: number;
        rss: number;
      };
    const m0 = await mem();
    const idle: RawSessionClient[] = [];
    for (let i = 0; i < opts.idleSessions; i += 50) {
      const batch = [];
      for (let j = i; j < Math.min(i + 50, opts.idleSessions); j++)
        batch.push(connect(routerUrl(`idle-${j}`), CLIENT_SECRET, ["east", "west", "north"]));
      idle.push(...(await Promise.all(batch)));
    }
    const m1 = await mem();
    for (const c of idle) c.close();
    const idleResult = {
      sessions: opts.idleSessions,
      heapPerSessionKiB: (m1.heapUsed - m0.heapUsed) / opts.idleSessions / 1024,
      rssPerSessionKiB: (m1.rss - m0.rss) / opts.idleSessions / 1024,
    };

    const r = results as Record<
      Name,
      { latency64: Latency; ping: Latency; small: Throughput; bulk: Throughput }
    >;
    const ratios = {
      latencyP50RouterVsRelay: r.router1.latency64.p50us / r.relay.latency64.p50us,
      latencyP99RouterVsRelay: r.router1.latency64.p99us / r.relay.latency64.p99us,
      fanoutP50Router3VsRouter1: r.router3.ping.p50us / r.router1.ping.p50us,
      smallThroughputRouterVsRelay: r.router1.small.msgsPerSec / r.relay.small.msgsPerSec,
      bulkThroughputRouterVsRelay: r.router1.bulk.mbPerSec / r.relay.bulk.mbPerSec,
    };
    const goals = {
      latencyP50RouterVsRelay: { goal: "<= 1.15", met: ratios.latencyP50RouterVsRelay <= 1.15 },
      latencyP99RouterVsRelay: { goal: "<= 1.3", met: ratios.latencyP99RouterVsRelay <= 1.3 },
      fanoutP50Router3VsRouter1: { goal: "<= 1.3", met: ratios.fanoutP50Router3VsRouter1 <= 1.3 },
      smallThroughputRouterVsRelay: { goal: ">= 0.8", met: ratios.smallThroughputRouterVsRelay >= 0.8 },
      bulkThroughputRouterVsRelay: { goal: ">= 0.8", met: ratios.bulkThroughputRouterVsRelay >= 0.8 },
      heapPerIdleSessionKiB: { goal: "<= 64", met: idleResult.heapPerSessionKiB <= 64 },
    };

    const row = (n: string, x: { latency64: Latency; ping: Latency; small: Throughput; bulk: Throughput }) =>
      `${n.padEnd(8)} ${x.latency64.p50us.toFixed(0).padStart(7)} ${x.latency64.p99us.toFixed(0).padStart(7)} ${x.ping.p50us.toFixed(0).padStart(8)} ${x.ping.p99us.toFixed(0).padStart(8)} ${x.small.msgsPerSec.toFixed(0).padStart(10)} ${x.bulk.mbPerSec.toFixed(1).padStart(9)}`;
    console.log(
      `\n${"target".padEnd(8)} ${"p50 µs".padStart(7)} ${"p99 µs".padStart(7)} ${"ping p50".padStart(8)} ${"ping p99".padStart(8)} ${"small msg/s".padStart(10)} ${"bulk MB/s".padStart(9)}`,
    );
    for (const n of names) console.log(row(n, r[n]));
    const cpu1 = results.router1!.routerCpuPerPingUs as number;
    const cpu3 = results.router3!.routerCpuPerPingUs as number;
    console.log(`\nrouter CPU per ping: 1 upstream ${cpu1.toFixed(1)} µs, 3 upstreams ${cpu3.toFixed(1)} µs`);
    const hc = (n: Name, k: string) => (results[n]![k] as number).toFixed(1);
    console.log(
      `middle-hop CPU per echoed frame (64 B / 16 KiB): relay ${hc("relay", "hopCpuPerSmallFrameUs")} / ${hc("relay", "hopCpuPerBulkFrameUs")} µs, ` +
        `router1 ${hc("router1", "hopCpuPerSmallFrameUs")} / ${hc("router1", "hopCpuPerBulkFrameUs")} µs`,
    );
    console.log(
      `\nidle: ${idleResult.heapPerSessionKiB.toFixed(1)} KiB heap / session (${idleResult.rssPerSessionKiB.toFixed(1)} KiB RSS)`,
    );
    console.log("\nratio                              value   goal     met");
    for (const [k, v] of Object.entries(ratios)) {
      const g = goals[k as keyof typeof goals];
      console.log(
        `${k.padEnd(34)} ${v.toFixed(3).padStart(6)}   ${g.goal.padEnd(8)} ${g.met ? "yes" : "NO"}`,
      );
    }

    const machine = `${cpus().length} × ${cpus()[0]?.model ?? "unknown CPU"}, Node ${process.version}`;
    console.log(`\nmachine: ${machine}`);
    const goalName: Record<string, string> = {
      latencyP50RouterVsRelay: "router-latency-p50-vs-relay",
      latencyP99RouterVsRelay: "router-latency-p99-vs-relay",
      fanoutP50Router3VsRouter1: "fanout-3v1-p50",
      smallThroughputRouterVsRelay: "router-small-rate-vs-relay",
      bulkThroughputRouterVsRelay: "router-bulk-rate-vs-relay",
    };
    // The GOAL lines by the one tested decider (support/goal.ts), on the unrounded values.
    printGoals([
      ...Object.entries(ratios).map(([k, v]): Goal => {
        const [op, target] = goals[k as keyof typeof goals].goal.split(/\s+/) as [GoalOp, string];
        return { name: goalName[k] ?? k, value: v, op, target: Number(target), unit: "x" };
      }),
      {
        name: "router-heap-per-idle-session",
        value: idleResult.heapPerSessionKiB,
        op: "<=",
        target: 64,
        unit: "KiB",
        digits: 1,
      },
    ]);

    const out = {
      benchmark: "router",
      at: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      options: opts,
      results,
      idle: idleResult,
      ratios,
      goals,
    };
    const resultsDir = join(repo, "bench/results");
    mkdirSync(resultsDir, { recursive: true });
    const file = join(resultsDir, `router-${out.at.replace(/[:.]/g, "-")}.json`);
    writeFileSync(file, JSON.stringify(out, null, 2));
    console.log(`\nwrote ${file}`);
    return out;
  } finally {
    for (const p of procs.reverse()) await stopProc(p);
    rmSync(dir, { recursive: true, force: true });
  }
}
