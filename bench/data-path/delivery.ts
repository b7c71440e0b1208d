// The CLI's delivery of stolen HTTP requests (filtered steals) to the local process, the old
// way and the current way side by side in one run:
//   node-http  bench/baselines/traffic-delivery-node-http.ts: a fresh node:http connection
//              per request (what the CLI did before);
//   undici     cli/src/sdk/local/traffic-delivery.ts: kept-alive undici pools.
// Both take the same IncomingHttpRequests from a session's event (built as the SDK builds
// them; the answer frame is encoded as it would be sent to the router) and deliver them to
// the same local HTTP app, which runs in its own process as the developer's program does.
// Per round, each way runs: sequential requests (latency of one delivery) and a closed loop
// with `concurrency` requests in flight (requests/s and latency under load); rounds
// alternate so drift on the machine hits both alike. Two shapes: a small GET and a 16 KiB
// POST (without a Content-Length header in the stolen head: the old way answered 400 to
// those, the local server refusing its doubled Content-Length).
import { EventEmitter } from "node:events";
import { cpus } from "node:os";
import * as pb from "../../proto/gen/session_pb.js";
import { decodePayload } from "../../proto/frame-codec.js";
import {
  IncomingHttpRequest,
  type HttpHeaderPair,
  type IncomingConnectionInfo,
} from "../../cli/src/sdk/session/incoming-traffic.js";
import type { SessionClientEvents } from "../../cli/src/sdk/session/session-client.js";
import { TrafficDelivery } from "../../cli/src/sdk/local/traffic-delivery.js";
import { freePorts } from "../../test/env/ports.js";
import { launch } from "../../test/support/launch.js";
import { NodeHttpDelivery } from "../baselines/traffic-delivery-node-http.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { pct, round, writeResult } from "../support/stats-support.js";

export interface DeliveryBenchOptions {
  /** Sequential requests per way, shape and round. */
  sequential: number;
  /** Closed-loop requests per way, shape and round. */
  concurrent: number;
  /** Requests in flight in the closed loop. */
  concurrency: number;
  rounds: number;
}

export const defaultDeliveryBench: DeliveryBenchOptions = {
  sequential: 1_000,
  concurrent: 5_000,
  concurrency: 16,
  rounds: 5,
};

const TARGET_PORT = 8080;
const WAYS = ["node-http", "undici"] as const;
type Way = (typeof WAYS)[number];

interface Shape {
  name: string;
  method: string;
  path: string;
  headers: HttpHeaderPair[];
  body: Buffer;
}

const SHAPES: Shape[] = [
  {
    name: "get",
    method: "GET",
    path: "/api/orders?id=42",
    headers: [
      { name: "Host", value: "shop.example:8080" },
      { name: "User-Agent", value: "curl/8.5.0" },
      { name: "Accept", value: "*/*" },
      { name: "X-User", value: "alice" },
    ],
    body: Buffer.alloc(0),
  },
  {
    name: "post-16k",
    method: "POST",
    path: "/api/orders",
    headers: [
      { name: "Host", value: "shop.example:8080" },
      { name: "Content-Type", value: "application/json" },
      { name: "X-User", value: "alice" },
    ],
    body: Buffer.alloc(16 * 1024, 0x61),
  },
];

/** A stolen request as the SDK builds it; resolves with the latency (ms) once answered. */
function deliverOne(session: EventEmitter<SessionClientEvents>, shape: Shape, id: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const info: IncomingConnectionInfo = {
      id,
      subscriptionId: 1,
      port: TARGET_PORT,
      remoteAddress: "10.0.0.7",
      remotePort: 40000,
      mode: "steal",
    };
    const t0 = performance.now();
    const sink = {
      send(frame: Buffer) {
        const ms = performance.now() - t0;
        const status = decodePayload(frame, pb.HttpResponseSchema).status;
        if (status !== 200) reject(new Error(`${shape.method} ${shape.path}: HTTP ${status}`));
        else resolve(ms);
        return true;
      },
      whenWritable: (cb: () => void) => cb(),
    };
    const req = new IncomingHttpRequest(
      id,
      id,
      info,
      shape.method,
      shape.path,
      shape.headers,
      shape.body,
      sink,
    );
    session.emit("httpRequest", req);
  });
}

async function sequential(session: EventEmitter<SessionClientEvents>, shape: Shape, n: number) {
  const lat: number[] = [];
  for (let i = 0; i < n; i++) lat.push(await deliverOne(session, shape, i + 1));
  return lat;
}

async function closedLoop(session: EventEmitter<SessionClientEvents>, shape: Shape, n: number, c: number) {
  const lat: number[] = [];
  let started = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: c }, async () => {
      while (started < n) lat.push(await deliverOne(session, shape, ++started));
    }),
  );
  return { lat, reqPerSec: n / ((performance.now() - t0) / 1000) };
}

const median = (xs: number[]) => pct(xs, 50);

export async function runDeliveryBench(o: DeliveryBenchOptions = defaultDeliveryBench): Promise<void> {
  const [appPort] = await freePorts(1);
  // The developer's program: a plain node:http server answering a small JSON body.
  const app = await launch({
    name: "local-app",
    command: process.execPath,
    args: [
      "-e",
      `require("http").createServer((q,r)=>{let n=0;q.on("data",c=>n+=c.length);q.on("end",()=>{` +
        `r.setHeader("content-type","application/json");r.end(JSON.stringify({order:42,received:n}))})})` +
        `.listen(${appPort},"127.0.0.1",()=>console.log(JSON.stringify({port:${appPort}})))`,
    ],
    ready: (p) => p.logs.find((l) => "port" in l),
    echoStderr: true,
  });
  const sessions = Object.fromEntries(
    WAYS.map((w) => [w, new EventEmitter<SessionClientEvents>()]),
  ) as Record<Way, EventEmitter<SessionClientEvents>>;
  const old = new NodeHttpDelivery(sessions["node-http"], appPort!);
  const current = new TrafficDelivery(sessions.undici, { ports: new Map([[TARGET_PORT, appPort!]]) });
  old.start();
  current.start();
  const log = (s: string) => process.stderr.write(s + "\n");
  type Acc = { seq: number[]; conc: number[]; rps: number[] };
  const acc: Record<string, Record<Way, Acc>> = {};
  for (const s of SHAPES)
    acc[s.name] = { "node-http": { seq: [], conc: [], rps: [] }, undici: { seq: [], conc: [], rps: [] } };
  try {
    // Warm-up (JIT, the pool's first connections), not recorded.
    for (const w of WAYS) for (const s of SHAPES) await closedLoop(sessions[w], s, 500, o.concurrency);
    for (let r = 1; r <= o.rounds; r++) {
      log(`round ${r}/${o.rounds}`);
      // Alternate which way goes first, so neither always runs on a warmer machine.
      const order = r % 2 === 1 ? WAYS : ([...WAYS].reverse() as Way[]);
      for (const s of SHAPES)
        for (const w of order) {
          const a = acc[s.name]![w];
          a.seq.push(...(await sequential(sessions[w], s, o.sequential)));
          const loop = await closedLoop(sessions[w], s, o.concurrent, o.concurrency);
          a.conc.push(...loop.lat);
          a.rps.push(loop.reqPerSec);
        }
    }
  } finally {
    old.stop();
    current.stop();
    await app.stop();
  }

  const results: Record<string, Record<Way, Record<string, number>>> = {};
  console.log(
    `\n${"shape".padEnd(9)} ${"way".padEnd(10)} ${"seq p50 µs".padStart(10)} ${"seq p99 µs".padStart(10)} ` +
      `${"req/s @" + o.concurrency}`.padStart(10) +
      ` ${"p50 µs".padStart(8)} ${"p99 µs".padStart(8)}`,
  );
  for (const s of SHAPES) {
    results[s.name] = {} as Record<Way, Record<string, number>>;
    for (const w of WAYS) {
      const a = acc[s.name]![w];
      const row = {
        seqP50Us: round(pct(a.seq, 50) * 1000, 0),
        seqP99Us: round(pct(a.seq, 99) * 1000, 0),
        reqPerSec: round(median(a.rps), 0),
        concP50Us: round(pct(a.conc, 50) * 1000, 0),
        concP99Us: round(pct(a.conc, 99) * 1000, 0),
      };
      results[s.name]![w] = row;
      console.log(
        `${s.name.padEnd(9)} ${w.padEnd(10)} ${String(row.seqP50Us).padStart(10)} ${String(row.seqP99Us).padStart(10)} ` +
          `${String(row.reqPerSec).padStart(10)} ${String(row.concP50Us).padStart(8)} ${String(row.concP99Us).padStart(8)}`,
      );
    }
  }
  const ratio = (shape: string, k: string) => results[shape]!.undici[k]! / results[shape]!["node-http"][k]!;
  const goal = (name: string, value: number, op: ">=" | "<="): Goal => ({
    name,
    value,
    op,
    target: 1,
    unit: "x",
    targetDigits: 1,
  });
  const verdicts = [
    goal("delivery-undici-vs-old-rps", ratio("get", "reqPerSec"), ">="),
    goal("delivery-undici-vs-old-seq-p50", ratio("get", "seqP50Us"), "<="),
    goal("delivery-undici-vs-old-p99", ratio("get", "concP99Us"), "<="),
    goal("delivery-undici-vs-old-post-rps", ratio("post-16k", "reqPerSec"), ">="),
  ].map(decideGoal);
  const file = writeResult("delivery", {
    benchmark: "delivery",
    at: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    options: o,
    results,
    goals: verdicts,
  });
  console.log(`\nwrote ${file}\n`);
  for (const v of verdicts) console.log(v.line);
}
