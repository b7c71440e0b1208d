// What a session endpoint must do with one fuzzed message, written from the protocol
// (proto/README.md, the router's and the agent's READMEs) rather than from their code: the
// checks every hop makes before a frame is routed or served — WebSocket message type, the
// codec's header checks, direction, the Hello handshake — and the router's stateless routing
// refusals. A verdict is either an answer (a CONTROL/ERROR frame with this code and request
// id, counted), a silent count (counted, not answered, e.g. a CLOSE racing a CLOSE), a close
// of the socket, or "passes" (routed or served: whatever comes back must carry a catalogue code).
import { fromBinary } from "@bufbuild/protobuf";
import { ErrorCode } from "../../proto/error-codes.js";
import { checkFrame, FrameCheck, frameCheckError, KIND_TOWARD_CLIENT } from "../../proto/frame-codec.js";
import { negotiateVersion, PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN } from "../../proto/frame-version.js";
import * as pb from "../../proto/gen/session_pb.js";
import type { FuzzInput } from "./frame-arbitraries.js";

const F = pb.FrameFamily;

export type Verdict =
  | { answer: ErrorCode; requestId: number; closes?: number }
  | { silent: ErrorCode }
  | { passes: true; note?: "hello" | "session-closed" | "link-fails" };

/** The checks every hop makes first: message type, the codec's header checks. */
function framing(input: FuzzInput, maxPayloadBytes: number): Verdict | undefined {
  if (input.text) return { answer: ErrorCode.FRAME_NOT_BINARY, requestId: 0 };
  const check = checkFrame(input.bytes, maxPayloadBytes);
  if (check === FrameCheck.Ok) return undefined;
  const e = frameCheckError(check, input.bytes, maxPayloadBytes);
  return { answer: e.code, requestId: e.requestId };
}

const decodes = (bytes: Buffer, schema: Parameters<typeof fromBinary>[0]): boolean => {
  try {
    fromBinary(schema, bytes.subarray(16));
    return true;
  } catch {
    return false;
  }
};

/** A Hello's outcome: acknowledged, refused (no common version: the socket closes), or a bad payload. */
function hello(bytes: Buffer, requestId: number, closeCode: number): Verdict {
  let h: pb.Hello;
  try {
    h = fromBinary(pb.HelloSchema, bytes.subarray(16));
  } catch {
    return { answer: ErrorCode.FRAME_BAD_PAYLOAD, requestId };
  }
  const v = negotiateVersion(
    { min: PROTOCOL_VERSION_MIN, max: PROTOCOL_VERSION_MAX },
    { min: h.minVersion, max: h.maxVersion },
  );
  return v === undefined
    ? { answer: ErrorCode.PROTOCOL_VERSION_UNSUPPORTED, requestId, closes: closeCode }
    : { passes: true, note: "hello" };
}

/**
 * A client's message at a router's session endpoint. `helloDone`: the client's Hello was
 * acknowledged. The session is assumed to have no open incoming connection (no agent
 * announced one), so every TRAFFIC frame names an unknown connection.
 */
export function routerClientVerdict(
  input: FuzzInput,
  o: { maxPayloadBytes: number; helloDone: boolean },
): Verdict {
  const framed = framing(input, o.maxPayloadBytes);
  if (framed || input.text) return framed!;
  const b = input.bytes;
  const family = b[0]!;
  const kind = b[1]!;
  const requestId = b.readUInt32BE(4);
  // A router in front reports an error frame: counted, never answered (no error ping-pong).
  if (family === F.CONTROL && kind === pb.ControlKind.ERROR) return { silent: ErrorCode.PEER_REPORTED_ERROR };
  if (kind & KIND_TOWARD_CLIENT) return { answer: ErrorCode.FRAME_WRONG_DIRECTION, requestId };
  const isHello = family === F.CONTROL && kind === pb.ControlKind.HELLO;
  if (!o.helloDone)
    return isHello ? hello(b, requestId, 1002) : { answer: ErrorCode.HELLO_REQUIRED, requestId };
  if (isHello) return { answer: ErrorCode.HELLO_REPEATED, requestId };
  if (family === F.TRAFFIC)
    return kind === pb.TrafficKind.CLOSE
      ? { silent: ErrorCode.CONNECTION_ALREADY_CLOSED }
      : { answer: ErrorCode.UNKNOWN_CONNECTION, requestId };
  return { passes: true };
}

/**
 * An upstream's message at the router, on a link that is the session's Default or not, with
 * the agent connection ids that upstream has announced and not closed (updated here), and
 * no broadcast of the session in flight (so every ping or subscription answer is unexpected).
 * Only answers (kind >= 128) travel toward the client, and the DATA and CLOSE of the stream
 * families (traffic, outgoing TCP and UDP), which travel both ways.
 */
export function routerUpstreamVerdict(
  input: FuzzInput,
  o: { maxPayloadBytes: number; isDefault: boolean; open: Set<number> },
): Verdict {
  const framed = framing(input, o.maxPayloadBytes);
  if (framed || input.text) return framed!;
  const b = input.bytes;
  const family = b[0]!;
  const kind = b[1]!;
  const requestId = b.readUInt32BE(4);
  const id = b.readUInt32BE(8);
  const stream = family === F.TRAFFIC || family === F.OUTGOING_TCP || family === F.OUTGOING_UDP;
  const bothWays = stream && (kind === 2 || kind === 3); // DATA and CLOSE
  if (!(kind & KIND_TOWARD_CLIENT) && !bothWays && family !== F.CONTROL)
    return { answer: ErrorCode.FRAME_WRONG_DIRECTION, requestId };
  switch (family) {
    case F.ENV:
    case F.FILE:
    case F.DNS:
    case F.OUTGOING_TCP:
    case F.OUTGOING_UDP:
      return o.isDefault ? { passes: true } : { answer: ErrorCode.FRAME_WRONG_UPSTREAM, requestId };
    case F.PING:
    case F.SUBSCRIPTION:
      return { answer: ErrorCode.UNEXPECTED_REPLY, requestId };
    case F.TRAFFIC:
      if (kind === pb.TrafficKind.NEW_CONNECTION) {
        if (o.open.has(id)) return { answer: ErrorCode.CONNECTION_ID_IN_USE, requestId: 0 };
        o.open.add(id);
        return { passes: true };
      }
      if (!o.open.has(id))
        return kind === pb.TrafficKind.CLOSE
          ? { silent: ErrorCode.CONNECTION_ALREADY_CLOSED }
          : { answer: ErrorCode.UNKNOWN_CONNECTION, requestId };
      if (kind === pb.TrafficKind.CLOSE) o.open.delete(id);
      return { passes: true };
    default: // CONTROL
      switch (kind) {
        case pb.ControlKind.LOG:
          return { passes: true };
        case pb.ControlKind.ERROR:
          return decodes(b, pb.ProtocolErrorSchema)
            ? { passes: true }
            : { answer: ErrorCode.FRAME_BAD_PAYLOAD, requestId: 0 };
        case pb.ControlKind.UPSTREAM_STATUS:
          return decodes(b, pb.UpstreamStatusSchema)
            ? { passes: true }
            : { answer: ErrorCode.FRAME_BAD_PAYLOAD, requestId: 0 };
        case pb.ControlKind.CLOSE:
          o.open.clear();
          return { passes: true, note: "link-fails" };
        default:
          return { answer: ErrorCode.FRAME_WRONG_DIRECTION, requestId: 0 };
      }
  }
}

/**
 * A router's (or any peer's) message at an agent's session endpoint. `helloDone`: a Hello
 * was acknowledged on this connection. A valid Close ends the session (later frames of the
 * served families are answered SWITCHYARD_SESSION_CLOSED); a Hello is renegotiated.
 */
export function agentVerdict(input: FuzzInput, o: { maxPayloadBytes: number; helloDone: boolean }): Verdict {
  const framed = framing(input, o.maxPayloadBytes);
  if (framed || input.text) return framed!;
  const b = input.bytes;
  const family = b[0]!;
  const kind = b[1]!;
  const requestId = b.readUInt32BE(4);
  if (kind & KIND_TOWARD_CLIENT) return { answer: ErrorCode.FRAME_WRONG_DIRECTION, requestId };
  const isHello = family === F.CONTROL && kind === pb.ControlKind.HELLO;
  if (!o.helloDone && !isHello) return { answer: ErrorCode.HELLO_REQUIRED, requestId };
  if (isHello) return hello(b, requestId, 4400);
  if (family === F.CONTROL && kind === pb.ControlKind.CLOSE)
    return decodes(b, pb.CloseSchema)
      ? { passes: true, note: "session-closed" }
      : { answer: ErrorCode.FRAME_BAD_PAYLOAD, requestId };
  return { passes: true };
}

/** What an agent does with a message once its session was closed by a Close frame. */
export function closedAgentVerdict(input: FuzzInput): Verdict | "ignored" {
  if (input.text || input.bytes.length < 8) return "ignored";
  const family = input.bytes[0]!;
  if (family === F.CONTROL || family === F.TRAFFIC) return "ignored";
  return { answer: ErrorCode.SESSION_CLOSED, requestId: input.bytes.readUInt32BE(4) };
}
