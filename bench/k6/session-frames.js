// Session frames for the k6 scenarios, built and read by hand (k6 cannot import the
// TypeScript codec): a 16-byte header — family, kind, flags, reserved, request id,
// connection id, payload length; big-endian — followed by the protobuf payload. See
// proto/frame-codec.ts and proto/session.proto for the numbers used here.

export const CONTROL = 1;
export const PING = 2;
export const OUTGOING_TCP = 6;
export const HELLO_ACK = 129;
export const CONTROL_ERROR = 130;
export const UPSTREAM_STATUS = 131;
export const PONG = 129;
export const OUTGOING_DATA = 2;
const UPSTREAM_UP = 1;

export function frame(family, kind, requestId, payload, connectionId = 0) {
  const buf = new ArrayBuffer(16 + payload.length);
  const v = new DataView(buf);
  v.setUint8(0, family);
  v.setUint8(1, kind);
  v.setUint32(4, requestId);
  v.setUint32(8, connectionId);
  v.setUint32(12, payload.length);
  new Uint8Array(buf, 16).set(payload);
  return buf;
}

/** Hello{min_version: 2, max_version: 2} (proto/frame-version.ts). */
export const HELLO = frame(CONTROL, 1, 1, [0x08, 0x02, 0x10, 0x02]);

/** An empty Ping (the router answers one merged Pong per ping). */
export const ping = (requestId) => frame(PING, 1, requestId, []);

/** OUTGOING_TCP DATA on connection 1 carrying `size` bytes in all (StreamData{data}); agents echo it. */
export function outgoingData(size) {
  const n = size - 16 - 2;
  const payload = new Uint8Array(2 + n);
  payload[0] = 0x0a; // field 1, length-delimited
  payload[1] = n; // < 128: one varint byte
  payload.fill(0x61, 2);
  return frame(OUTGOING_TCP, OUTGOING_DATA, 0, payload, 1);
}

export function header(data) {
  const v = new DataView(data);
  return { family: v.getUint8(0), kind: v.getUint8(1), requestId: v.getUint32(4) };
}

/** True for an UpstreamStatus frame saying UP (field 2, state). */
export function upstreamUp(data) {
  const p = new Uint8Array(data, 16);
  for (let i = 0; i < p.length;) {
    const tag = p[i++];
    if ((tag & 7) === 0) {
      let value = 0;
      let shift = 0;
      let b;
      do {
        b = p[i++];
        value |= (b & 0x7f) << shift;
        shift += 7;
      } while (b & 0x80);
      if (tag >> 3 === 2) return value === UPSTREAM_UP;
    } else if ((tag & 7) === 2) {
      let len = 0;
      let shift = 0;
      let b;
      do {
        b = p[i++];
        len |= (b & 0x7f) << shift;
        shift += 7;
      } while (b & 0x80);
      i += len;
    } else return false;
  }
  return false;
}
