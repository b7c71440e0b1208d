// The session frame codec: the one module that reads and writes frames, used by the
// router, the agent and the client.
//
// Wire format (one binary WebSocket message = one frame), big-endian:
//
//   byte 0      family        FrameFamily
//   byte 1      kind          the family's *Kind enum (>= 128: toward the client)
//   byte 2      flags         FLAG_* bits; unknown bits are rejected
//   byte 3      reserved      must be 0
//   bytes 4-7   request id    correlates requests and replies
//   bytes 8-11  connection id stream/connection/subscription id (routers remap it)
//   bytes 12-15 payload length, must equal the message length minus 16
//   bytes 16-   payload       protobuf message named by proto/frame-catalog.ts
//
// The payload length is redundant with WebSocket framing on purpose: it turns a
// truncated or padded frame into a precise error instead of a confusing protobuf one.
// Routers use only the header accessors below (no allocation, no payload decoding);
// `setConnectionId` patches a received Buffer in place.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { ErrorCode } from "./error-codes.js";
import { FrameError } from "./frame-errors.js";
import { isKnownFamily, isKnownKind, payloadSchemaOf } from "./frame-catalog.js";

export const HEADER_BYTES = 16;
/** Default bound on a payload: 1 MiB. Peers may configure their own. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

/** The reply reports a failure (e.g. a refused subscription); routers merge on this bit alone. */
export const FLAG_ERROR = 0x01;
const KNOWN_FLAGS = FLAG_ERROR;

/** Kinds with this bit travel toward the client. */
export const KIND_TOWARD_CLIENT = 0x80;

export interface FrameHeader {
  family: number;
  kind: number;
  flags: number;
  requestId: number;
  connectionId: number;
}

export interface DecodedHeader extends FrameHeader {
  payloadLength: number;
}

/** Result of `checkFrame`: 0 is a valid frame; anything else names what is wrong. */
export enum FrameCheck {
  Ok = 0,
  Truncated = 1,
  BadLength = 2,
  Oversized = 3,
  ReservedBits = 4,
  UnknownFamily = 5,
  UnknownKind = 6,
}

// ---- hot-path header accessors (no allocation) ----

export const frameFamily = (buf: Uint8Array): number => buf[0]!;
export const frameKind = (buf: Uint8Array): number => buf[1]!;
export const frameFlags = (buf: Uint8Array): number => buf[2]!;
export const frameRequestId = (buf: Buffer): number => buf.readUInt32BE(4);
export const frameConnectionId = (buf: Buffer): number => buf.readUInt32BE(8);
export const framePayloadLength = (buf: Buffer): number => buf.readUInt32BE(12);

/** Rewrites the connection id in place. The caller must own `buf`. */
export function setConnectionId(buf: Buffer, id: number): void {
  buf.writeUInt32BE(id >>> 0, 8);
}

/**
 * Validates a received frame's header against its length and the catalog without
 * allocating. Payload bytes are not inspected.
 */
export function checkFrame(buf: Buffer, maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES): FrameCheck {
  if (buf.length < HEADER_BYTES) return FrameCheck.Truncated;
  const len = buf.readUInt32BE(12);
  if (len > maxPayloadBytes || buf.length - HEADER_BYTES > maxPayloadBytes) return FrameCheck.Oversized;
  if (len > buf.length - HEADER_BYTES) return FrameCheck.Truncated;
  if (len !== buf.length - HEADER_BYTES) return FrameCheck.BadLength;
  if (buf[3] !== 0 || (buf[2]! & ~KNOWN_FLAGS) !== 0) return FrameCheck.ReservedBits;
  const family = buf[0]!;
  if (!isKnownFamily(family)) return FrameCheck.UnknownFamily;
  if (!isKnownKind(family, buf[1]!)) return FrameCheck.UnknownKind;
  return FrameCheck.Ok;
}

/** Turns a failed `checkFrame` result into an error with a stable code (cold path). */
export function frameCheckError(
  check: FrameCheck,
  buf: Buffer,
  maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES,
): FrameError {
  const family = buf.length > 0 ? buf[0]! : 0;
  const kind = buf.length > 1 ? buf[1]! : 0;
  const requestId = buf.length >= 8 ? buf.readUInt32BE(4) : 0;
  const declared = buf.length >= HEADER_BYTES ? buf.readUInt32BE(12) : 0;
  const mk = (code: ConstructorParameters<typeof FrameError>[0], msg: string) =>
    new FrameError(code, msg, family, kind, requestId);
  switch (check) {
    case FrameCheck.Truncated:
      return buf.length < HEADER_BYTES
        ? mk(
            ErrorCode.FRAME_TRUNCATED,
            `frame of ${buf.length} bytes is shorter than the ${HEADER_BYTES}-byte header; send one whole frame per WebSocket message`,
          )
        : mk(
            ErrorCode.FRAME_TRUNCATED,
            `header declares a ${declared}-byte payload but only ${buf.length - HEADER_BYTES} bytes follow; the frame was cut short`,
          );
    case FrameCheck.BadLength:
      return mk(
        ErrorCode.FRAME_BAD_LENGTH,
        `header declares a ${declared}-byte payload but ${buf.length - HEADER_BYTES} bytes follow; set bytes 12-15 to the payload length`,
      );
    case FrameCheck.Oversized:
      return mk(
        ErrorCode.FRAME_OVERSIZED,
        `payload of ${Math.max(declared, buf.length - HEADER_BYTES)} bytes exceeds the ${maxPayloadBytes}-byte limit; split the data into smaller frames`,
      );
    case FrameCheck.ReservedBits:
      return mk(
        ErrorCode.FRAME_RESERVED_BITS,
        `flags 0x${(buf[2] ?? 0).toString(16)} / reserved byte ${buf[3] ?? 0} use bits this protocol version does not define; they must be 0`,
      );
    case FrameCheck.UnknownFamily:
      return mk(
        ErrorCode.FRAME_UNKNOWN_FAMILY,
        `frame family ${family} is not defined by this protocol version`,
      );
    case FrameCheck.UnknownKind:
      return mk(ErrorCode.FRAME_UNKNOWN_KIND, `kind ${kind} is not defined for frame family ${family}`);
    default:
      return mk(ErrorCode.FRAME_BAD_PAYLOAD, `frame rejected (check ${String(check)})`);
  }
}

/** Reads and validates a header; throws FrameError. */
export function readHeader(buf: Buffer, maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES): DecodedHeader {
  const check = checkFrame(buf, maxPayloadBytes);
  if (check !== FrameCheck.Ok) throw frameCheckError(check, buf, maxPayloadBytes);
  return {
    family: buf[0]!,
    kind: buf[1]!,
    flags: buf[2]!,
    requestId: buf.readUInt32BE(4),
    connectionId: buf.readUInt32BE(8),
    payloadLength: buf.readUInt32BE(12),
  };
}

function writeHeader(
  out: Buffer,
  h: Partial<FrameHeader> & { family: number; kind: number },
  len: number,
): void {
  out[0] = h.family;
  out[1] = h.kind;
  out[2] = h.flags ?? 0;
  out[3] = 0;
  out.writeUInt32BE((h.requestId ?? 0) >>> 0, 4);
  out.writeUInt32BE((h.connectionId ?? 0) >>> 0, 8);
  out.writeUInt32BE(len, 12);
}

/** A frame from a header and already-encoded payload bytes. */
export function encodeRaw(
  header: Partial<FrameHeader> & { family: number; kind: number },
  payload: Uint8Array = new Uint8Array(0),
): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  writeHeader(out, header, payload.length);
  out.set(payload, HEADER_BYTES);
  return out;
}

/** A frame from a header and a protobuf message of `schema` (which must match the catalog). */
export function encodeFrame<S extends DescMessage>(
  header: Partial<FrameHeader> & { family: number; kind: number },
  schema: S,
  init: MessageInitShape<S>,
): Buffer {
  const expected = payloadSchemaOf(header.family, header.kind);
  if (expected === undefined || expected.typeName !== schema.typeName) {
    throw new FrameError(
      ErrorCode.FRAME_UNKNOWN_KIND,
      `family ${header.family} kind ${header.kind} carries ${expected?.typeName ?? "nothing"}, not ${schema.typeName}`,
      header.family,
      header.kind,
    );
  }
  return encodeRaw(header, toBinary(schema, create(schema, init)));
}

/** The payload bytes of a frame (a view, not a copy). */
export function payloadOf(buf: Buffer): Buffer {
  return buf.subarray(HEADER_BYTES);
}

/** Decodes the payload as `schema`; throws FrameError SWITCHYARD_FRAME_BAD_PAYLOAD when it is not. */
export function decodePayload<S extends DescMessage>(buf: Buffer, schema: S): MessageShape<S> {
  try {
    return fromBinary(schema, buf.subarray(HEADER_BYTES));
  } catch (err) {
    throw new FrameError(
      ErrorCode.FRAME_BAD_PAYLOAD,
      `payload is not a valid ${schema.typeName}: ${(err as Error).message}`,
      buf[0] ?? 0,
      buf[1] ?? 0,
      buf.length >= 8 ? buf.readUInt32BE(4) : 0,
    );
  }
}

export interface DecodedFrame {
  header: DecodedHeader;
  schema: DescMessage;
  message: MessageShape<DescMessage>;
}

/** Validates and decodes a whole frame with the catalog's schema (agents and clients). */
export function decodeFrame(buf: Buffer, maxPayloadBytes = DEFAULT_MAX_PAYLOAD_BYTES): DecodedFrame {
  const header = readHeader(buf, maxPayloadBytes);
  const schema = payloadSchemaOf(header.family, header.kind)!;
  return { header, schema, message: decodePayload(buf, schema) };
}
