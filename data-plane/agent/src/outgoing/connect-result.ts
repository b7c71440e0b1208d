// The reply to an outgoing TCP connect or UDP bind: one frame shape for both families.
import { encodeFrame } from "../../../../proto/frame-codec.js";
import { ConnectResultSchema, OutgoingKind } from "../../../../proto/gen/session_pb.js";

export interface ConnectResultInit {
  localAddress?: string;
  localPort?: number;
  error?: string;
}

export function connectResultFrame(
  family: number,
  requestId: number,
  id: number,
  init: ConnectResultInit,
): Buffer {
  return encodeFrame(
    { family, kind: OutgoingKind.CONNECT_RESULT, requestId, connectionId: id },
    ConnectResultSchema,
    init,
  );
}
