// `npm run bench -- gateway-mux`: the hop between a Primary router and a member gateway,
// multiplexed (one connection per gateway, the default) versus a WebSocket per session
// (`--no-upstream-mux`), side by side in one run. One gateway router serving wss:// (the
// test CA), one scripted agent process behind it, and two Primary routers with the same
// N sessions — one per arm; the clients are this process. The arms take turns per round:
//   - attach: N clients connect (20 at a time) until their upstream is UP — the gateway
//     handshake (TCP + TLS + upgrade) is paid once per gateway with the mux, once per
//     session without;
//   - rate: every session keeps 2 64-byte outgoing-TCP echoes in flight for a while:
//     frames/s in all, and the CPU of the Primary and the gateway per frame (/proc);
//   - sockets: established TCP connections from the Primary to the gateway (/proc/net/tcp).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { encodeFrame } from "../../proto/frame-codec.js";
import * as pb from "../../proto/gen/session_pb.js";
import { hashSecret } from "../../proto/session-auth.js";
import { createCertificateAuthority } from "../../test/env/pki.js";
import { RawSessionClient } from "../../test/peers/raw-session-client.js";
import { processCpuMicros, spawnTs, stopProc, type Proc } from "./router-bench.js";
import { pct, round, writeResult } from "../support/stats-support.js";
import { printGoals } from "../support/goal.js";

export interface GatewayMuxBenchOptions {
  sessions: number;
  rounds: number;
  /** Seconds of echo traffic per arm and round. */
  seconds: number;
}

export const defaultGatewayMuxBench: GatewayMuxBenchOptions = { sessions: 200, rounds: 3, seconds: 5 };

const AGENT_SECRET = "mux-bench-agent";
const CLIENT_SECRET = "mux-bench-client";
const F = pb.FrameFamily;
const ARMS = ["mux", "per-session"] as const;
type Arm = (typeof ARMS)[number];

const cpuSeconds = (pid: number): number => processCpuMicros(pid) / 1e6;

/** Established TCP connections whose remote port is `port` (IPv4 loopback). */
function establishedTo(port: number): number {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  return readFileSync("/proc/net/tcp", "utf8")
    .split("\n")
    .slice(1)
    .filter((l) => {
      const cols = l.trim().split(/\s+/);
      return cols[2]?.endsWith(`:${hex}`) && cols[3] === "01";
    }).length;
}

const echoFrame = encodeFrame(
  { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.DATA, connectionId: 1 },
  pb.StreamDataSchema,
  {
    data: Buffer.alloc(40, 0x61),
  },
);

async function attach(
  url: (i: number) => string,
  n: number,
): Promise<{ clients: RawSessionClient[]; ms: number[] }> {
  const clients: RawSessionClient[] = [];
  const ms: number[] = [];
  for (let start = 0; start < n; start += 20) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(20, n - start) }, async (_, k) => {
        const t0 = performance.now();
        const c = await RawSessionClient.connect(url(start + k + 1), CLIENT_SECRET);
        await c.upstreamStatus("east", pb.UpstreamState.UP, 30_000);
        ms.push(performance.now() - t0);
        c.stopRecording();
        return c;
      }),
    );
    clients.push(...batch);
  }
  return { clients, ms };
}

/** Every client keeps 2 echoes in flight for `seconds`; frames answered per second. */
async function rate(clients: RawSessionClient[], seconds: number): Promise<number> {
  let answered = 0;
  let running = true;
  for (const c of clients) {
    c.onRaw = (buf) => {
      if (buf[0] !== F.OUTGOING_TCP) return;
      answered++;
      if (running) c.send(echoFrame);
    };
    c.send(echoFrame);
    c.send(echoFrame);
  }
  await new Promise((r) => setTimeout(r, 500)); // warm-up
  const a0 = answered;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const result = ((answered - a0) * 1000) / (performance.now() - t0);
  running = false;
  await new Promise((r) => setTimeout(r, 200));
  for (const c of clients) c.onRaw = undefined;
  return result;
}

export async function runGatewayMuxBench(
  opts: GatewayMuxBenchOptions = defaultGatewayMuxBench,
): Promise<void> {
  const procs: Proc[] = [];
  const dir = mkdtempSync(join(tmpdir(), "switchyard-bench-mux-"));
  const log = (s: string) => process.stderr.write(s + "\n");
  try {
    const ca = await createCertificateAuthority("switchyard-bench-ca");
    const leaf = await ca.issue({ commonName: "gateway", ipAddresses: ["127.0.0.1"], usage: "server" });
    writeFileSync(join(dir, "tls.crt"), leaf.certPem);
    writeFileSync(join(dir, "tls.key"), leaf.keyPem);
    const agents = await spawnTs(
      "test/peers/scripted-agents-main.ts",
      ["--agents", "pod", "--secret", AGENT_SECRET],
      (l) => "agents" in l,
    );
    procs.push(agents);
    const agentPort = (agents.ready.agents as Record<string, number>).pod!;
    const ids = Array.from({ length: opts.sessions }, (_, i) => i + 1);
    const routesFile = (name: string, routes: unknown[]) => {
      const f = join(dir, `${name}.json`);
      writeFileSync(f, JSON.stringify(routes));
      return f;
    };
    const common = ["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--log-level", "info"];
    const ready = (l: Record<string, unknown>) => l.msg === "router listening";
    const gwRoutes = ids.map((i) => ({
      sessionId: `c${i}`,
      clientKeyHash: hashSecret(`child-${i}`),
      state: "SESSION_STATE_READY",
      upstreams: [
        {
          cluster: "pod",
          url: `ws://127.0.0.1:${agentPort}/v1/sessions/c${i}`,
          secret: AGENT_SECRET,
          isDefault: true,
        },
      ],
    }));
    const gateway = await spawnTs(
      "data-plane/router/src/main.ts",
      [
        ...common,
        "--routes-file",
        routesFile("gateway", gwRoutes),
        "--tls-cert",
        join(dir, "tls.crt"),
        "--tls-key",
        join(dir, "tls.key"),
      ],
      ready,
    );
    procs.push(gateway);
    const gwPort = gateway.ready.port as number;
    const primaryRoutes = ids.map((i) => ({
      sessionId: `p${i}`,
      clientKeyHash: hashSecret(CLIENT_SECRET),
      state: "SESSION_STATE_READY",
      upstreams: [
        {
          cluster: "east",
          url: `wss://127.0.0.1:${gwPort}/v1/sessions/c${i}`,
          secret: `child-${i}`,
          isDefault: true,
          caPem: ca.certPem,
          mux: true,
        },
      ],
    }));
    const file = routesFile("primary", primaryRoutes);
    const primaries: Record<Arm, Proc> = {
      mux: await spawnTs("data-plane/router/src/main.ts", [...common, "--routes-file", file], ready),
      "per-session": await spawnTs(
        "data-plane/router/src/main.ts",
        [...common, "--routes-file", file, "--no-upstream-mux"],
        ready,
      ),
    };
    procs.push(primaries.mux, primaries["per-session"]);

    const r: Record<
      Arm,
      { attachMs: number[]; rates: number[]; cpuPerFrameUs: number[]; sockets: number[] }
    > = {
      mux: { attachMs: [], rates: [], cpuPerFrameUs: [], sockets: [] },
      "per-session": { attachMs: [], rates: [], cpuPerFrameUs: [], sockets: [] },
    };
    for (let round_ = 0; round_ < opts.rounds; round_++) {
      for (const arm of round_ % 2 === 0 ? ARMS : [...ARMS].reverse()) {
        const p = primaries[arm];
        const url = (i: number) => `ws://127.0.0.1:${p.ready.port as number}/v1/sessions/p${i}`;
        const { clients, ms } = await attach(url, opts.sessions);
        r[arm].attachMs.push(...ms);
        const sockets = establishedTo(gwPort);
        const cpu0 = cpuSeconds(p.pid!) + cpuSeconds(gateway.pid!);
        const a0 = performance.now();
        const fps = await rate(clients, opts.seconds);
        const frames = (fps * (performance.now() - a0)) / 1000;
        const cpu = cpuSeconds(p.pid!) + cpuSeconds(gateway.pid!) - cpu0;
        r[arm].rates.push(fps);
        r[arm].cpuPerFrameUs.push((cpu * 1e6) / frames);
        r[arm].sockets.push(sockets);
        log(
          `round ${round_ + 1} ${arm}: attach p50 ${round(pct(ms, 50), 1)} ms, ${Math.round(fps)} frames/s, ${sockets} sockets to the gateway`,
        );
        await Promise.all(clients.map((c) => c.close()));
        await new Promise((res) => setTimeout(res, 500));
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const rows = ARMS.map((arm) => ({
      arm,
      attachP50Ms: round(pct(r[arm].attachMs, 50), 2),
      attachP99Ms: round(pct(r[arm].attachMs, 99), 2),
      framesPerSec: Math.round(med(r[arm].rates)),
      cpuPerFrameUs: round(med(r[arm].cpuPerFrameUs), 2),
      socketsToGateway: Math.max(...r[arm].sockets),
    }));
    const machine = { cpu: cpus()[0]?.model ?? "unknown", cpus: cpus().length, node: process.version };
    console.log(
      `machine: ${machine.cpus} × ${machine.cpu}, Node ${machine.node}; ${opts.sessions} sessions, ${opts.rounds} rounds`,
    );
    console.table(rows);
    const [m, s] = rows as [(typeof rows)[number], (typeof rows)[number]];
    writeResult("gateway-mux", { machine, opts, rows, raw: r });
    // The GOAL lines by the one tested decider (support/goal.ts), on the unrounded figures.
    const raw = (arm: (typeof ARMS)[number]) => ({
      rate: med(r[arm].rates),
      cpu: med(r[arm].cpuPerFrameUs),
      attach: pct(r[arm].attachMs, 50),
    });
    printGoals([
      { name: "gateway-mux-sockets", value: m.socketsToGateway, op: "<=", target: 1, digits: 0 },
      ...(
        [
          ["gateway-mux-rate-vs-per-session", raw(m.arm).rate / raw(s.arm).rate, ">="],
          ["gateway-mux-cpu-per-frame-vs-per-session", raw(m.arm).cpu / raw(s.arm).cpu, "<="],
          ["gateway-mux-attach-p50-vs-per-session", raw(m.arm).attach / raw(s.arm).attach, "<="],
        ] as const
      ).map(([name, value, op]) => ({ name, value, op, target: 1, unit: "x", targetDigits: 1 })),
    ]);
  } finally {
    for (const p of procs.reverse()) await stopProc(p).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  }
}
