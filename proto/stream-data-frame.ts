// Zero-copy encoding of the one message on the data path, StreamData { bytes data = 1 },
// for outgoing TCP and connection-scoped traffic frames. Bulk bytes are written straight
// after the frame header and a two-to-six-byte protobuf prefix (one allocation per
// frame), and read back as a view of the received buffer. Wire-identical to
// encodeFrame(…, StreamDataSchema, …); anything unusual falls back to the codec.
import { decodePayload, encodeRaw, HEADER_BYTES } from "./frame-codec.js";
import { StreamDataSchema } from "./gen/session_pb.js";

function varintLength(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

/** A StreamData frame carrying `data`. */
export function encodeStreamData(
  family: number,
  kind: number,
  connectionId: number,
  data: Uint8Array,
): Buffer {
  if (data.length === 0) return encodeRaw({ family, kind, connectionId });
  const prefix = 1 + varintLength(data.length);
  const payloadLength = prefix + data.length;
  const out = Buffer.allocUnsafe(HEADER_BYTES + payloadLength);
  out[0] = family;
  out[1] = kind;
  out[2] = 0;
  out[3] = 0;
  out.writeUInt32BE(0, 4);
  out.writeUInt32BE(connectionId >>> 0, 8);
  out.writeUInt32BE(payloadLength, 12);
  let at = HEADER_BYTES;
  out[at++] = 0x0a; // field 1, wire type 2 (length-delimited)
  let n = data.length;
  while (n >= 0x80) {
    out[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  out[at++] = n;
  out.set(data, at);
  return out;
}

/** The data bytes of a (validated) StreamData frame, as a view where possible. */
export function decodeStreamData(frame: Buffer): Buffer {
  const len = frame.length - HEADER_BYTES;
  if (len === 0) return frame.subarray(HEADER_BYTES);
  if (frame[HEADER_BYTES] === 0x0a) {
    let at = HEADER_BYTES + 1;
    let n = 0;
    let mul = 1;
    for (let i = 0; i < 5 && at < frame.length; i++) {
      const b = frame[at++]!;
      n += (b & 0x7f) * mul;
      mul *= 128;
      if (b < 0x80) {
        if (at + n === frame.length) return frame.subarray(at, at + n);
        break;
      }
    }
  }
  // Unknown fields, repeated fields or a malformed message: let the codec decide.
  return Buffer.from(decodePayload(frame, StreamDataSchema).data);
}
