/* global __ENV, setTimeout */
// k6 scenario: fan-out latency of a broadcast ping → merged pong through the router.
// Each VU opens one session WebSocket, says Hello, then sends pings back to back. k6's
// clock has millisecond resolution, so the `fanout_pong_ms` trend records the mean round
// trip of each batch of 100 sequential ping → merged pong exchanges.
//   k6 run -e ROUTER_URL=ws://127.0.0.1:8080/v1/sessions/bench-3 -e SECRET=… bench/k6/router-fanout.js
// Frames are built by hand here (k6 cannot import the TypeScript codec): 16-byte header
// (family, kind, flags, reserved, request id, connection id, payload length; big-endian)
// followed by the protobuf payload — see proto/frame-codec.ts.
import { WebSocket } from "k6/websockets";
import { Trend, Counter } from "k6/metrics";

const fanout = new Trend("fanout_pong_ms", true);
const errors = new Counter("fanout_errors");

export const options = {
  scenarios: {
    fanout: {
      executor: "constant-vus",
      vus: Number(__ENV.VUS || 1),
      duration: __ENV.DURATION || "20s",
    },
  },
  thresholds: { fanout_errors: ["count==0"] },
};

function frame(family, kind, requestId, payload) {
  const buf = new ArrayBuffer(16 + payload.length);
  const v = new DataView(buf);
  v.setUint8(0, family);
  v.setUint8(1, kind);
  v.setUint32(4, requestId);
  v.setUint32(12, payload.length);
  new Uint8Array(buf, 16).set(payload);
  return buf;
}

const HELLO = frame(1, 1, 1, [0x08, 0x01, 0x10, 0x01]); // Hello{min_version: 1, max_version: 1}

export default function () {
  const ws = new WebSocket(__ENV.ROUTER_URL, null, { headers: { Authorization: `Bearer ${__ENV.SECRET}` } });
  ws.binaryType = "arraybuffer";
  const runMs = Number(__ENV.SESSION_MS || 5000);
  let requestId = 100;
  let batchStart = 0;
  let inBatch = 0;
  let stopAt = 0;
  const ping = () => {
    requestId++;
    ws.send(frame(2, 1, requestId, []));
  };
  ws.onopen = () => ws.send(HELLO);
  ws.onmessage = (e) => {
    const v = new DataView(e.data);
    const family = v.getUint8(0);
    const kind = v.getUint8(1);
    if (family === 1 && kind === 129) {
      stopAt = Date.now() + runMs;
      // Let the router report its upstreams before measuring.
      setTimeout(() => {
        batchStart = Date.now();
        ping();
      }, 200);
    } else if (family === 1 && kind === 130) {
      errors.add(1);
    } else if (family === 2 && kind === 129 && v.getUint32(4) === requestId) {
      if (++inBatch === 100) {
        const now = Date.now();
        fanout.add((now - batchStart) / 100);
        batchStart = now;
        inBatch = 0;
      }
      if (Date.now() < stopAt) ping();
      else ws.close();
    }
  };
  ws.onerror = () => errors.add(1);
}
