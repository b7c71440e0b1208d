// What the router itself says to a session's client: error frames (counted when they
// refuse a client frame), upstream status reports and merged replies. Nothing is sent
// once the session closed. Frames relayed from upstreams go through SessionFlowControl
// instead, which applies backpressure.
import type { ErrorCode } from "../../../proto/error-codes.js";
import { errorFrame, type ErrorFrameContext } from "../../../proto/error-frame.js";
import { encodeFrame } from "../../../proto/frame-codec.js";
import type { FrameError } from "../../../proto/frame-errors.js";
import {
  ControlKind,
  FrameFamily,
  UpstreamStatusSchema,
  type UpstreamState,
} from "../../../proto/gen/session_pb.js";
import type { RouterMetrics } from "./router-metrics.js";
import type { SessionSocket } from "./session-socket.js";

export class ClientChannel {
  /** Set when the session ends: from then on nothing is sent. */
  closed = false;

  constructor(
    readonly ws: SessionSocket,
    private readonly metrics: RouterMetrics,
  ) {}

  send(frame: Buffer): void {
    if (!this.closed) this.ws.send(frame);
  }

  /** An error frame; `ctx` names the request, cluster and frame it concerns. */
  error(code: ErrorCode, message: string, ctx: ErrorFrameContext = {}): void {
    this.send(errorFrame(code, message, ctx));
  }

  /** Refuses a client frame: counted, and answered with an error naming the frame. */
  refuse(frame: Buffer, code: ErrorCode, message: string): void {
    this.metrics.badFrame("client", code);
    this.error(code, message, { requestId: frame.readUInt32BE(4), family: frame[0], kind: frame[1] });
  }

  /** A client frame the codec rejected (malformed, oversized, bad payload). */
  badFrame(err: FrameError): void {
    this.metrics.badFrame("client", err.code);
    this.error(err.code, err.message, { requestId: err.requestId, family: err.family, kind: err.kind });
  }

  /** Reports an upstream's state (UP, or DOWN with why and when it is retried). */
  upstreamStatus(
    upstream: { cluster: string; isDefault: boolean },
    state: UpstreamState,
    error = "",
    retryInMs = 0,
    connectionsClosed = 0,
  ): void {
    this.send(
      encodeFrame({ family: FrameFamily.CONTROL, kind: ControlKind.UPSTREAM_STATUS }, UpstreamStatusSchema, {
        cluster: upstream.cluster,
        state,
        error,
        retryInMs,
        isDefault: upstream.isDefault,
        connectionsClosed,
      }),
    );
  }
}
