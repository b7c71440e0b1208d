/* global __ENV */
// k6 scenario: session set-up — from asking for a new session to its first merged reply.
// Each iteration: `POST /sessions?clusters=N` on the stack's control endpoint (the route is
// pushed to the router over RouteDiscovery and acknowledged, see bench/k6/k6-stack.ts) →
// WebSocket to the router with the session's secret → Hello → every upstream up (the
// router dials the agents when the client arrives) → ping → merged pong. The phases are
// trends of their own; `setup_total_ms` is the whole of it.
//   k6 run -e CONTROL_URL=http://127.0.0.1:P -e CLUSTERS=2 bench/k6/session-setup.js
// Env: STAGE (default 20s), VUS (sessions set up at once, default 2).
import http from "k6/http";
import { WebSocket } from "k6/websockets";
import { clearTimeout, setTimeout } from "k6/timers";
import { Counter, Trend } from "k6/metrics";
import {
  CONTROL,
  CONTROL_ERROR,
  HELLO,
  HELLO_ACK,
  PING,
  PONG,
  UPSTREAM_STATUS,
  header,
  ping,
  upstreamUp,
} from "./session-frames.js";

const created = new Trend("setup_create_ms", true);
const connected = new Trend("setup_connect_ms", true);
const upstreamsUp = new Trend("setup_upstreams_ms", true);
const firstPong = new Trend("setup_first_pong_ms", true);
const total = new Trend("setup_total_ms", true);
const errors = new Counter("setup_errors");

export const options = {
  scenarios: {
    setup: {
      executor: "constant-vus",
      vus: Number(__ENV.VUS || 2),
      duration: __ENV.STAGE || "20s",
      gracefulStop: "10s",
      tags: { clusters: __ENV.CLUSTERS || "2" },
    },
  },
  thresholds: { setup_errors: ["count==0"], setup_total_ms: ["med<1000"] },
};

export default function () {
  const clusters = Number(__ENV.CLUSTERS || 2);
  const t0 = Date.now();
  const res = http.post(`${__ENV.CONTROL_URL}/sessions?clusters=${clusters}`);
  if (res.status !== 201) {
    errors.add(1);
    return;
  }
  const s = res.json();
  const tCreated = Date.now();
  created.add(tCreated - t0);
  const ws = new WebSocket(s.url, null, { headers: { Authorization: `Bearer ${s.secret}` } });
  ws.binaryType = "arraybuffer";
  let tAck = 0;
  let tUp = 0;
  let up = 0;
  const giveUp = setTimeout(() => {
    errors.add(1);
    ws.close();
  }, 10_000);
  ws.onopen = () => ws.send(HELLO);
  ws.onmessage = (e) => {
    const f = header(e.data);
    if (f.family === CONTROL && f.kind === HELLO_ACK) {
      tAck = Date.now();
      connected.add(tAck - tCreated);
    } else if (
      f.family === CONTROL &&
      f.kind === UPSTREAM_STATUS &&
      upstreamUp(e.data) &&
      ++up === clusters
    ) {
      tUp = Date.now();
      upstreamsUp.add(tUp - tAck);
      ws.send(ping(7));
    } else if (f.family === PING && f.kind === PONG && f.requestId === 7) {
      const now = Date.now();
      firstPong.add(now - tUp);
      total.add(now - t0);
      clearTimeout(giveUp);
      ws.close();
    } else if (f.family === CONTROL && f.kind === CONTROL_ERROR) errors.add(1);
  };
  ws.onerror = () => errors.add(1);
}
