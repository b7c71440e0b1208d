// The capacity bench's load generator, a process of its own so the harness's bookkeeping does
// not share its event loop: it holds many sessions open on the routers and sends every one of
// them a fixed rate of requests, open loop — each session at its own random phase in the
// period, so sessions do not fire in lockstep — measuring each request's round trip.
//   tsx bench/router/capacity-load.ts --secret s --rate 10 --request echo|ping
// Prints {"port":N} once its control endpoint listens (plain HTTP, loopback):
//   POST /sessions  body [{"url":…,"clusters":[…]}]: opens those not open yet, waits until every
//                   upstream is UP, then paces them too; answers {"open":n}
//   POST /measure?seconds=S  a measurement window: answers the window's figures (below)
//   POST /close     closes every session
// Requests: `echo` is a 64-byte OUTGOING_TCP DATA frame (to the session's Default upstream,
// which echoes it; the send time travels in the payload), `ping` a broadcast ping answered by
// one merged pong (the send time is kept by request id).
import { createServer, type IncomingMessage } from "node:http";
import { Command } from "commander";
import * as pb from "../../proto/gen/session_pb.js";
import { encodeFrame, HEADER_BYTES } from "../../proto/frame-codec.js";
import { RawSessionClient } from "../../test/peers/raw-session-client.js";

const F = pb.FrameFamily;
const o = new Command("capacity-load")
  .requiredOption("--secret <secret>", "the sessions' client secret")
  .option("--rate <n>", "requests per second per session", "10")
  .option("--request <kind>", "echo | ping", "echo")
  .option("--timeout-ms <n>", "a reply later than this counts as a timeout", "1000")
  .parse()
  .opts<{ secret: string; rate: string; request: string; timeoutMs: string }>();
if (o.request !== "echo" && o.request !== "ping")
  throw new Error(`--request: ${JSON.stringify(o.request)} is not echo or ping`);
const periodMs = 1000 / Number(o.rate);
const timeoutMs = Number(o.timeoutMs);

const echoTemplate = encodeFrame(
  { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.DATA, connectionId: 1 },
  pb.StreamDataSchema,
  { data: Buffer.alloc(64 - HEADER_BYTES - 2, 0x61) },
);
const stampAt = echoTemplate.length - (64 - HEADER_BYTES - 2);
const pingTemplate = encodeFrame({ family: F.PING, kind: pb.PingKind.PING, requestId: 1 }, pb.PingSchema, {
  sentAtMicros: 1n,
});

interface Session {
  url: string;
  client: RawSessionClient;
  /** Offset in the period, ms. */
  phase: number;
  nextId: number;
  pending: Map<number, number>;
  /** Closed by this process (not counted as an error). */
  ended: boolean;
}

const sessions: Session[] = [];
const byUrl = new Map<string, Session>();

/** The current window: requests sent in [start, end) and the round trips of their replies. */
const w = { start: Infinity, end: -Infinity, sent: 0, rtts: [] as number[], lateness: [] as number[] };
let errors = 0;
let closedUnexpectedly = 0;

function onReply(s: Session, buf: Buffer): void {
  const now = performance.now();
  let t0: number | undefined;
  if (buf[0] === F.OUTGOING_TCP && buf.length === echoTemplate.length) t0 = buf.readDoubleLE(stampAt);
  else if (buf[0] === F.PING) {
    const id = buf.readUInt32BE(4);
    t0 = s.pending.get(id);
    s.pending.delete(id);
  } else if (buf[0] === F.CONTROL && buf[1] === pb.ControlKind.ERROR) errors++;
  if (t0 !== undefined && t0 >= w.start && t0 < w.end) w.rtts.push(now - t0);
}

function send(s: Session, due: number): void {
  if (s.client.ws.readyState !== s.client.ws.OPEN) return;
  const now = performance.now();
  let frame: Buffer;
  if (o.request === "echo") {
    frame = Buffer.from(echoTemplate);
    frame.writeDoubleLE(now, stampAt);
  } else {
    frame = Buffer.from(pingTemplate);
    const id = (s.nextId = (s.nextId % 0xffff_fff0) + 1);
    frame.writeUInt32BE(id, 4);
    s.pending.set(id, now);
  }
  s.client.send(frame);
  if (now >= w.start && now < w.end) {
    w.sent++;
    w.lateness.push(now - due);
  }
}

// Open-loop pacing: sessions sorted by phase, one cursor walking them period after period.
let order: Session[] = [];
let cursor = 0;
let cycleStart = performance.now();
function reorder(): void {
  order = [...sessions].sort((a, b) => a.phase - b.phase);
  const now = performance.now();
  while (cycleStart + periodMs <= now) cycleStart += periodMs;
  const at = now - cycleStart;
  cursor = order.findIndex((s) => s.phase > at);
  if (cursor < 0) cursor = order.length;
}
const pacer = setInterval(() => {
  if (order.length === 0) return;
  const now = performance.now();
  for (;;) {
    if (cursor >= order.length) {
      cursor = 0;
      cycleStart += periodMs;
    }
    const s = order[cursor]!;
    const due = cycleStart + s.phase;
    if (due > now) break;
    send(s, due);
    cursor++;
  }
}, 1);

async function open(url: string, clusters: string[]): Promise<void> {
  if (byUrl.has(url)) return;
  let timer: NodeJS.Timeout | undefined;
  const client = await Promise.race([
    RawSessionClient.connect(url, o.secret),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${url}: no Hello answer within 30 s`)), 30_000);
    }),
  ]).finally(() => clearTimeout(timer));
  for (const c of clusters) await client.upstreamStatus(c, pb.UpstreamState.UP, 30_000);
  client.stopRecording();
  const s: Session = {
    url,
    client,
    phase: Math.random() * periodMs,
    nextId: 0,
    pending: new Map(),
    ended: false,
  };
  client.onRaw = (buf) => onReply(s, buf);
  client.ws.on("close", () => {
    if (!s.ended) closedUnexpectedly++;
  });
  sessions.push(s);
  byUrl.set(url, s);
}

async function openAll(list: Array<{ url: string; clusters: string[] }>): Promise<void> {
  const todo = list.filter((x) => !byUrl.has(x.url));
  let next = 0;
  const worker = async () => {
    while (next < todo.length) {
      const x = todo[next++]!;
      await open(x.url, x.clusters);
    }
  };
  await Promise.all(Array.from({ length: 64 }, worker));
  reorder();
}

const pct = (sorted: number[], p: number) =>
  sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
const r3 = (x: number) => Number(x.toFixed(3));
const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

async function measure(seconds: number) {
  const errors0 = errors;
  const closed0 = closedUnexpectedly;
  const cpu0 = cpuSeconds();
  Object.assign(w, { start: performance.now(), sent: 0, rtts: [], lateness: [] });
  w.end = w.start + seconds * 1000;
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const cpu = (cpuSeconds() - cpu0) / seconds;
  // Replies to the window's last requests: wait for them up to the timeout.
  await new Promise((r) => setTimeout(r, timeoutMs));
  for (const s of sessions) for (const [id, t] of s.pending) if (t < w.end) s.pending.delete(id);
  const rtts = w.rtts.sort((a, b) => a - b);
  const late = rtts.filter((x) => x > timeoutMs).length;
  const lateness = w.lateness.sort((a, b) => a - b);
  return {
    sessions: sessions.filter((s) => s.client.ws.readyState === s.client.ws.OPEN).length,
    seconds,
    offeredPerSec: r3(sessions.length * (1000 / periodMs)),
    sentPerSec: r3(w.sent / seconds),
    answeredPerSec: r3((rtts.length - late) / seconds),
    timeouts: w.sent - rtts.length + late,
    errors: errors - errors0 + closedUnexpectedly - closed0,
    rttMs: {
      p50: r3(pct(rtts, 50)),
      p90: r3(pct(rtts, 90)),
      p99: r3(pct(rtts, 99)),
      max: r3(rtts.at(-1) ?? NaN),
    },
    latenessMs: { p99: r3(pct(lateness, 99)), max: r3(lateness.at(-1) ?? NaN) },
    /** CPUs this process kept busy during the window. */
    cpu: r3(cpu),
  };
}

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let s = "";
    req.on("data", (c: Buffer) => (s += c.toString()));
    req.on("end", () => resolve(s));
    req.on("error", reject);
  });
}

const server = createServer((req, res) => {
  const u = new URL(req.url ?? "/", "http://load");
  const answer = (p: Promise<unknown>) =>
    p.then(
      (v) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(v)),
      (err: Error) => res.writeHead(500).end(`${err.message}\n`),
    );
  if (req.method === "POST" && u.pathname === "/sessions")
    return answer(
      body(req).then(async (b) => {
        await openAll(JSON.parse(b) as Array<{ url: string; clusters: string[] }>);
        return { open: sessions.length };
      }),
    );
  if (req.method === "POST" && u.pathname === "/measure")
    return answer(measure(Number(u.searchParams.get("seconds") ?? "5")));
  if (req.method === "POST" && u.pathname === "/close")
    return answer(
      (async () => {
        for (const s of sessions.splice(0)) {
          s.ended = true;
          s.client.close();
        }
        byUrl.clear();
        reorder();
        return { open: 0 };
      })(),
    );
  res.writeHead(404).end("POST /sessions | /measure?seconds=S | /close\n");
});
server.listen(0, "127.0.0.1", () => {
  const a = server.address();
  process.stdout.write(JSON.stringify({ port: typeof a === "object" && a ? a.port : 0 }) + "\n");
});
const stop = () => {
  clearInterval(pacer);
  for (const s of sessions) {
    s.ended = true;
    s.client.close();
  }
  process.exit(0);
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
