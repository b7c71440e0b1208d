// The one way to build a CONTROL/ERROR frame: a ProtocolError with a catalogue code, a
// message that says what to do, and the family/kind of the frame that caused it.
import { encodeFrame } from "./frame-codec.js";
import type { ErrorCode } from "./error-codes.js";
import { ControlKind, FrameFamily, ProtocolErrorSchema } from "./gen/session_pb.js";

export interface ErrorFrameContext {
  /** The request the error answers (0 when it answers none). */
  requestId?: number;
  /** The cluster the error concerns (routers), when there is one. */
  cluster?: string;
  /** Family and kind of the offending frame (0 when unknown). */
  family?: number;
  kind?: number;
}

/** An encoded CONTROL/ERROR frame. */
export function errorFrame(code: ErrorCode, message: string, ctx: ErrorFrameContext = {}): Buffer {
  return encodeFrame(
    { family: FrameFamily.CONTROL, kind: ControlKind.ERROR, requestId: ctx.requestId ?? 0 },
    ProtocolErrorSchema,
    { code, message, cluster: ctx.cluster ?? "", frameFamily: ctx.family ?? 0, frameKind: ctx.kind ?? 0 },
  );
}
