// The multiplexed gateway connection's wire format (proto/mux.proto): the upgrade path,
// the 4-byte channel prefix of every message, channel 0's control messages and the
// flow-control window. One definition here, so dialer and gateway cannot drift.
import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type MessageInitShape,
  type MessageShape,
} from "@bufbuild/protobuf";
import {
  MuxCloseSchema,
  MuxControlType,
  MuxOpenSchema,
  MuxRefusedSchema,
  MuxWindowSchema,
  type MuxClose,
  type MuxOpen,
  type MuxRefused,
  type MuxWindow,
} from "./gen/mux_pb.js";
import { parseSessionPath, SESSION_PATH_PREFIX } from "./session-endpoint.js";

export { MuxControlType };

export const MUX_PATH_PREFIX = "/v1/mux/";

/** Bytes of the channel id in front of every message. */
export const CHANNEL_PREFIX_BYTES = 4;

/**
 * Frame bytes of a channel a side may have sent and not yet had credited. Large enough
 * that crediting every quarter keeps a busy session streaming across a WAN round trip;
 * small enough that a receiver holding every channel's window stays bounded.
 */
export const MUX_INITIAL_WINDOW_BYTES = 1024 * 1024;

/** The session id of a mux upgrade path (query ignored), or undefined. */
export function parseMuxPath(requestUrl: string | undefined): string | undefined {
  const path = (requestUrl ?? "").split("?")[0]!;
  // The same ids as the session endpoint's, behind another prefix.
  return path.startsWith(MUX_PATH_PREFIX)
    ? parseSessionPath(SESSION_PATH_PREFIX + path.slice(MUX_PATH_PREFIX.length))
    : undefined;
}

/**
 * Where a session URL's gateway serves its multiplexed connection: the same origin, and
 * the session id that authenticates the upgrade. Undefined when `sessionUrl` is not a
 * `ws[s]://host/v1/sessions/{id}` URL.
 */
export function muxTarget(sessionUrl: string): { origin: string; sessionId: string } | undefined {
  let u: URL;
  try {
    u = new URL(sessionUrl);
  } catch {
    return undefined;
  }
  if (u.protocol !== "ws:" && u.protocol !== "wss:") return undefined;
  const sessionId = parseSessionPath(u.pathname);
  if (sessionId === undefined) return undefined;
  return { origin: `${u.protocol}//${u.host}`, sessionId };
}

export const muxUrl = (origin: string, sessionId: string): string =>
  `${origin}${MUX_PATH_PREFIX}${sessionId}`;

/** A session frame on `channel`: prefix + frame (one copy). */
export function channelMessage(channel: number, frame: Buffer): Buffer {
  const out = Buffer.allocUnsafe(CHANNEL_PREFIX_BYTES + frame.length);
  out.writeUInt32BE(channel, 0);
  frame.copy(out, CHANNEL_PREFIX_BYTES);
  return out;
}

function control<D extends DescMessage>(type: MuxControlType, schema: D, msg: MessageInitShape<D>): Buffer {
  const body = toBinary(schema, create(schema, msg));
  const out = Buffer.allocUnsafe(CHANNEL_PREFIX_BYTES + 1 + body.length);
  out.writeUInt32BE(0, 0);
  out[CHANNEL_PREFIX_BYTES] = type;
  out.set(body, CHANNEL_PREFIX_BYTES + 1);
  return out;
}

export const openMessage = (m: MessageInitShape<typeof MuxOpenSchema>): Buffer =>
  control(MuxControlType.OPEN, MuxOpenSchema, m);
export const refusedMessage = (m: MessageInitShape<typeof MuxRefusedSchema>): Buffer =>
  control(MuxControlType.REFUSED, MuxRefusedSchema, m);
export const closeMessage = (m: MessageInitShape<typeof MuxCloseSchema>): Buffer =>
  control(MuxControlType.CLOSE, MuxCloseSchema, m);
export const windowMessage = (channel: number, bytes: number): Buffer =>
  control(MuxControlType.WINDOW, MuxWindowSchema, { channel, bytes });

export type MuxControl =
  | { type: MuxControlType.OPEN; msg: MuxOpen }
  | { type: MuxControlType.REFUSED; msg: MuxRefused }
  | { type: MuxControlType.CLOSE; msg: MuxClose }
  | { type: MuxControlType.WINDOW; msg: MuxWindow };

const SCHEMAS = {
  [MuxControlType.OPEN]: MuxOpenSchema,
  [MuxControlType.REFUSED]: MuxRefusedSchema,
  [MuxControlType.CLOSE]: MuxCloseSchema,
  [MuxControlType.WINDOW]: MuxWindowSchema,
} as const;

/** A malformed message on a mux connection: the connection is closed with 1002. */
export class MuxProtocolError extends Error {}

/** The channel a message is on; throws MuxProtocolError for one too short to carry a prefix. */
export function messageChannel(data: Buffer): number {
  if (data.length < CHANNEL_PREFIX_BYTES + 1)
    throw new MuxProtocolError(`a ${data.length}-byte message carries no channel prefix and frame`);
  return data.readUInt32BE(0);
}

/** Decodes a channel-0 message; throws MuxProtocolError for an unknown type or a bad body. */
export function decodeControl(data: Buffer): MuxControl {
  const type = data[CHANNEL_PREFIX_BYTES] as MuxControlType;
  const schema = (SCHEMAS as Partial<Record<number, DescMessage>>)[type];
  if (!schema) throw new MuxProtocolError(`unknown control type ${type} on channel 0`);
  let msg: MessageShape<DescMessage>;
  try {
    msg = fromBinary(schema, data.subarray(CHANNEL_PREFIX_BYTES + 1));
  } catch (err) {
    throw new MuxProtocolError(`control type ${type}: ${(err as Error).message}`);
  }
  if ((msg as unknown as { channel: number }).channel === 0)
    throw new MuxProtocolError(`control type ${type} names channel 0`);
  return { type, msg } as MuxControl;
}
