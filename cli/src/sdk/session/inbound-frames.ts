// Where each frame from the router goes, read from its header: replies settle the pending
// request they answer, stream frames go to their stream, CONTROL frames become session
// events (upstream status, agent logs) or reject the request a ProtocolError names. A
// frame that cannot be read is reported as a remote error and dropped; it never ends the
// session.
import * as pb from "../../../../proto/gen/session_pb.js";
import { decodePayload, readHeader } from "../../../../proto/frame-codec.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { RemoteError } from "../cli-errors.js";
import type { PendingRequests } from "./pending-requests.js";
import type { SessionStreams } from "./session-streams.js";

const F = pb.FrameFamily;

export interface UpstreamEvent {
  cluster: string;
  up: boolean;
  isDefault: boolean;
  error: string;
  retryInMs: number;
  connectionsClosed: number;
}

export interface InboundTargets {
  pending: PendingRequests;
  streams: SessionStreams;
  upstream(ev: UpstreamEvent): void;
  log(entry: { level: string; message: string }): void;
  /** A ProtocolError no request was waiting for, or a frame that could not be read. */
  remoteError(err: RemoteError): void;
}

export function dispatchInbound(data: Buffer, t: InboundTargets): void {
  let h;
  try {
    h = readHeader(data);
  } catch (err) {
    t.remoteError(
      new RemoteError((err as { code: string }).code, `router sent a bad frame: ${(err as Error).message}`),
    );
    return;
  }
  try {
    switch (h.family) {
      case F.CONTROL:
        return control(data, h.kind, h.requestId, t);
      case F.PING:
      case F.ENV:
      case F.FILE:
      case F.DNS:
      case F.SUBSCRIPTION:
        t.pending.settle(h.requestId, h.family, data);
        return;
      case F.OUTGOING_TCP:
      case F.OUTGOING_UDP:
        if (h.kind === pb.OutgoingKind.CONNECT_RESULT)
          return void t.pending.settle(h.requestId, h.family, data);
        return t.streams.outgoing(data, h.family, h.kind, h.connectionId);
      case F.TRAFFIC:
        return t.streams.traffic(data, h.kind, h.requestId, h.connectionId);
    }
  } catch (err) {
    t.remoteError(
      new RemoteError((err as { code?: string }).code ?? ErrorCode.FRAME_BAD_PAYLOAD, (err as Error).message),
    );
  }
}

function control(data: Buffer, kind: number, requestId: number, t: InboundTargets): void {
  if (kind === pb.ControlKind.ERROR) {
    const e = decodePayload(data, pb.ProtocolErrorSchema);
    const err = new RemoteError(
      e.code,
      `${e.cluster ? `${e.cluster}: ` : ""}${e.code}: ${e.message}`,
      e.cluster,
    );
    if (!t.pending.reject(requestId, err)) t.remoteError(err);
    return;
  }
  if (kind === pb.ControlKind.UPSTREAM_STATUS) {
    const s = decodePayload(data, pb.UpstreamStatusSchema);
    t.upstream({
      cluster: s.cluster,
      up: s.state === pb.UpstreamState.UP,
      isDefault: s.isDefault,
      error: s.error,
      retryInMs: s.retryInMs,
      connectionsClosed: s.connectionsClosed,
    });
    return;
  }
  if (kind === pb.ControlKind.LOG) {
    const l = decodePayload(data, pb.LogSchema);
    t.log({ level: l.level, message: l.message });
  }
}
