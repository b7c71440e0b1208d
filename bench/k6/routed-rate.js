/* global __ENV */
// k6 scenario: routed message rate — small frames per second through one session. The VU
// keeps WINDOW outgoing-TCP data frames (64 bytes) in flight on one session; the agent
// echoes each one, and every echo sends the next. Three paths, tagged `path`: `direct` (k6 ↔
// agent), `relay` (k6 ↔ a WebSocket relay with no logic ↔ agent: the cost of one hop) and
// `router` (k6 ↔ router ↔ agent). They take turns, one stage each per round, so drift on a
// shared machine hits them alike. `frames_per_s_<path>` samples each second's echoes;
// `routed_frames` counts them all.
//   k6 run -e DIRECT_URL=… -e RELAY_URL=… -e ROUTER_URL=… -e AGENT_SECRET=… -e SECRET=… bench/k6/routed-rate.js
// Env: STAGE (one stage, default 5s), ROUNDS (default 3), WINDOW (default 100), FRAME_BYTES (default 64).
import { WebSocket } from "k6/websockets";
import { clearInterval, clearTimeout, setInterval, setTimeout } from "k6/timers";
import { Counter, Trend } from "k6/metrics";
import {
  CONTROL,
  CONTROL_ERROR,
  HELLO,
  HELLO_ACK,
  OUTGOING_TCP,
  UPSTREAM_STATUS,
  header,
  outgoingData,
  upstreamUp,
} from "./session-frames.js";

const frames = new Counter("routed_frames");
const errors = new Counter("routed_errors");

const stageS = parseInt(__ENV.STAGE || "5s", 10);
const rounds = Number(__ENV.ROUNDS || 3);
const paths = [
  // [tag, URL, secret, upstreams to wait for]
  ["direct", __ENV.DIRECT_URL, __ENV.AGENT_SECRET, 0],
  ["relay", __ENV.RELAY_URL, __ENV.AGENT_SECRET, 0],
  ["router", __ENV.ROUTER_URL, __ENV.SECRET, 1],
];
// One trend per path (the HTML report's summary table lists untagged metrics only).
const perSecond = Object.fromEntries(paths.map(([path]) => [path, new Trend(`frames_per_s_${path}`)]));

export const options = {
  scenarios: Object.fromEntries(
    Array.from({ length: rounds }, (_, r) =>
      paths.map(([path, url, secret, upstreams], i) => [
        `${path}_${r + 1}`,
        {
          executor: "per-vu-iterations",
          vus: 1,
          iterations: 1,
          maxDuration: `${stageS + 15}s`,
          startTime: `${(r * paths.length + i) * (stageS + 2)}s`,
          env: { URL: url, AUTH: secret, UPSTREAMS: String(upstreams), PATH_NAME: path },
          tags: { path },
        },
      ]),
    ).flat(),
  ),
  thresholds: Object.fromEntries([
    ["routed_errors", ["count==0"]],
    ...paths.map(([path]) => [`frames_per_s_${path}`, ["med>0"]]),
  ]),
};

export default function () {
  const ws = new WebSocket(__ENV.URL, null, { headers: { Authorization: `Bearer ${__ENV.AUTH}` } });
  ws.binaryType = "arraybuffer";
  const data = outgoingData(Number(__ENV.FRAME_BYTES || 64));
  const windowSize = Number(__ENV.WINDOW || 100);
  const upstreams = Number(__ENV.UPSTREAMS);
  let up = 0;
  let sending = false;
  let inFlight = 0;
  let thisSecond = 0;
  let sampler = null;
  const giveUp = setTimeout(() => {
    errors.add(1);
    ws.close();
  }, 10_000);
  const start = () => {
    clearTimeout(giveUp);
    sending = true;
    for (; inFlight < windowSize; inFlight++) ws.send(data);
    sampler = setInterval(() => {
      perSecond[__ENV.PATH_NAME].add(thisSecond);
      thisSecond = 0;
    }, 1000);
    setTimeout(() => {
      sending = false;
      clearInterval(sampler);
      // Let the frames in flight come back, then leave.
      setTimeout(() => ws.close(), 500);
    }, stageS * 1000);
  };
  ws.onopen = () => ws.send(HELLO);
  ws.onmessage = (e) => {
    const f = header(e.data);
    if (f.family === OUTGOING_TCP) {
      inFlight--;
      thisSecond++;
      frames.add(1);
      if (sending) {
        inFlight++;
        ws.send(data);
      }
    } else if (f.family === CONTROL && f.kind === HELLO_ACK && upstreams === 0) start();
    else if (f.family === CONTROL && f.kind === UPSTREAM_STATUS && upstreamUp(e.data) && ++up === upstreams)
      start();
    else if (f.family === CONTROL && f.kind === CONTROL_ERROR) errors.add(1);
  };
  ws.onerror = () => errors.add(1);
}
