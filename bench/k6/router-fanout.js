/* global __ENV */
// k6 scenario: fan-out latency by number of clusters — a broadcast ping → one merged pong
// through the router, for sessions with 1, 2, 4, 8 upstreams (one stage each, one after
// the other, tagged `clusters`). Each VU opens the session's WebSocket, says Hello, waits
// until every upstream is up, then sends pings back to back. k6's clock has millisecond
// resolution, so `fanout_<n>_clusters_ms` records the mean round trip of each batch of 100
// sequential ping → merged pong exchanges.
//   k6 run -e ROUTER=ws://127.0.0.1:8080/v1/sessions/ -e SECRET=… -e CLUSTERS=1,2,4,8 bench/k6/router-fanout.js
// Sessions are `k6-fanout-<n>` (bench/k6/k6-stack.ts pushes them). Env: STAGE (default 15s),
// SESSION_MS (one connection's run, default 5000), VUS (default 1).
import { WebSocket } from "k6/websockets";
import { clearTimeout, setTimeout } from "k6/timers";
import { Trend, Counter } from "k6/metrics";
import {
  CONTROL,
  CONTROL_ERROR,
  HELLO,
  PING,
  PONG,
  UPSTREAM_STATUS,
  header,
  ping,
  upstreamUp,
} from "./session-frames.js";

const errors = new Counter("fanout_errors");

const clusters = (__ENV.CLUSTERS || "1,2,4,8").split(",").map(Number);
// One trend per cluster count (not one tagged trend): the HTML report's summary table
// lists untagged metrics only, so each count gets its own row there.
const fanout = Object.fromEntries(clusters.map((n) => [n, new Trend(`fanout_${n}_clusters_ms`, true)]));
const stageS = parseInt(__ENV.STAGE || "15s", 10);

export const options = {
  scenarios: Object.fromEntries(
    clusters.map((n, i) => [
      `clusters_${n}`,
      {
        executor: "constant-vus",
        vus: Number(__ENV.VUS || 1),
        duration: `${stageS}s`,
        startTime: `${i * (stageS + 2)}s`,
        gracefulStop: "10s",
        env: { SESSION: `k6-fanout-${n}`, UPSTREAMS: String(n) },
        tags: { clusters: String(n) },
      },
    ]),
  ),
  thresholds: Object.fromEntries([
    ["fanout_errors", ["count==0"]],
    ...clusters.map((n) => [`fanout_${n}_clusters_ms`, ["med<1000"]]),
  ]),
};

export default function () {
  const ws = new WebSocket(`${__ENV.ROUTER}${__ENV.SESSION}`, null, {
    headers: { Authorization: `Bearer ${__ENV.SECRET}` },
  });
  ws.binaryType = "arraybuffer";
  const runMs = Number(__ENV.SESSION_MS || 5000);
  const upstreams = Number(__ENV.UPSTREAMS);
  let up = 0;
  let requestId = 100;
  let batchStart = 0;
  let inBatch = 0;
  let stopAt = 0;
  const next = () => ws.send(ping(++requestId));
  // A session whose upstreams never come up is an error, not a hang.
  const giveUp = setTimeout(() => {
    errors.add(1);
    ws.close();
  }, 10_000);
  ws.onopen = () => ws.send(HELLO);
  ws.onmessage = (e) => {
    const f = header(e.data);
    if (f.family === CONTROL && f.kind === UPSTREAM_STATUS && upstreamUp(e.data) && ++up === upstreams) {
      clearTimeout(giveUp);
      stopAt = Date.now() + runMs;
      batchStart = Date.now();
      next();
    } else if (f.family === CONTROL && f.kind === CONTROL_ERROR) {
      errors.add(1);
    } else if (f.family === PING && f.kind === PONG && f.requestId === requestId) {
      if (++inBatch === 100) {
        const now = Date.now();
        fanout[upstreams].add((now - batchStart) / 100);
        batchStart = now;
        inBatch = 0;
      }
      if (Date.now() < stopAt) next();
      else ws.close();
    }
  };
  ws.onerror = () => errors.add(1);
}
