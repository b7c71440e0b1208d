// Upstreams → client (DESIGN §5): every upstream frame checked (binary, well formed, the
// direction and the upstream its family allows), then connection ids remapped to
// session-unique ids (ConnectionMap), answers to broadcasts merged (BroadcastsInFlight),
// replayed subscriptions' results consumed (SubscriptionReplay), control relayed with the
// cluster named. A frame an upstream should not have sent is answered to that upstream.
import { ErrorCode } from "../../../proto/error-codes.js";
import { errorFrame } from "../../../proto/error-frame.js";
import {
  checkFrame,
  decodePayload,
  encodeFrame,
  FLAG_ERROR,
  FrameCheck,
  frameCheckError,
  KIND_TOWARD_CLIENT,
  setConnectionId,
} from "../../../proto/frame-codec.js";
import {
  ControlKind,
  FrameFamily,
  ProtocolErrorSchema,
  StreamCloseSchema,
  TrafficKind,
  UpstreamStatusSchema,
} from "../../../proto/gen/session_pb.js";
import type { RoutingState } from "./routing-state.js";
import type { UpstreamLink } from "./upstream-link.js";

const F = FrameFamily;

export function routeFromUpstream(
  s: RoutingState,
  link: UpstreamLink,
  data: Buffer,
  isBinary: boolean,
): void {
  if (s.client.closed || link.state === "closed") return;
  if (!isBinary)
    return badUpstreamFrame(
      s,
      link,
      ErrorCode.FRAME_NOT_BINARY,
      "text WebSocket messages are not frames; send binary messages",
      0,
      0,
      0,
    );
  const check = checkFrame(data, s.limits.maxPayloadBytes);
  if (check !== FrameCheck.Ok) {
    const e = frameCheckError(check, data, s.limits.maxPayloadBytes);
    return badUpstreamFrame(s, link, e.code, e.message, e.family, e.kind, e.requestId);
  }
  const family = data[0]!;
  const kind = data[1]!;
  // Answers travel toward the client; so do DATA (2) and CLOSE (3) of the stream families,
  // which travel both ways. Kinds 2 and 3 of other families are requests (a file READ, a
  // DNS REVERSE, a STEAL): never from an upstream.
  const stream = family === F.TRAFFIC || family === F.OUTGOING_TCP || family === F.OUTGOING_UDP;
  if (!(kind & KIND_TOWARD_CLIENT) && !(stream && (kind === 2 || kind === 3)) && family !== F.CONTROL) {
    return badUpstreamFrame(
      s,
      link,
      ErrorCode.FRAME_WRONG_DIRECTION,
      `kind ${kind} travels toward the agents`,
      family,
      kind,
      data.readUInt32BE(4),
    );
  }
  switch (family) {
    case F.TRAFFIC:
      return trafficFromUpstream(s, link, data, kind);
    case F.PING:
    case F.SUBSCRIPTION:
      return replyFromUpstream(s, link, data);
    case F.ENV:
    case F.FILE:
    case F.DNS:
    case F.OUTGOING_TCP:
    case F.OUTGOING_UDP:
      if (link !== s.defaultLink)
        return badUpstreamFrame(
          s,
          link,
          ErrorCode.FRAME_WRONG_UPSTREAM,
          `only the default upstream answers family ${family}`,
          family,
          kind,
          data.readUInt32BE(4),
        );
      return s.flow.toClient(link, data);
    case F.CONTROL:
      return controlFromUpstream(s, link, data, kind);
  }
}

function trafficFromUpstream(s: RoutingState, link: UpstreamLink, data: Buffer, kind: number): void {
  const agentId = data.readUInt32BE(8);
  if (kind === TrafficKind.NEW_CONNECTION) {
    if (s.conns.has(link, agentId))
      return badUpstreamFrame(
        s,
        link,
        ErrorCode.CONNECTION_ID_IN_USE,
        `connection ${agentId} is already open`,
        F.TRAFFIC,
        kind,
        0,
      );
    if (s.conns.size >= s.limits.maxConnections) {
      s.metrics.badFrame("upstream", ErrorCode.TOO_MANY_CONNECTIONS);
      // Refuse the connection back to its agent so it does not wait for an answer.
      link.send(
        encodeFrame(
          { family: F.TRAFFIC, kind: TrafficKind.CLOSE, connectionId: agentId },
          StreamCloseSchema,
          {
            error: `session has ${s.limits.maxConnections} open connections`,
          },
        ),
      );
      return;
    }
    setConnectionId(data, s.conns.open(link, agentId));
    return s.flow.toClient(link, data);
  }
  const id = s.conns.sessionId(link, agentId);
  if (id === undefined) {
    if (kind === TrafficKind.CLOSE) {
      s.metrics.badFrame("upstream", ErrorCode.CONNECTION_ALREADY_CLOSED);
      return;
    }
    return badUpstreamFrame(
      s,
      link,
      ErrorCode.UNKNOWN_CONNECTION,
      `connection ${agentId} was never announced`,
      F.TRAFFIC,
      kind,
      data.readUInt32BE(4),
    );
  }
  if (kind === TrafficKind.CLOSE) s.conns.close(id);
  setConnectionId(data, id);
  s.flow.toClient(link, data);
}

function replyFromUpstream(s: RoutingState, link: UpstreamLink, data: Buffer): void {
  const requestId = data.readUInt32BE(4);
  if (s.subscriptions.consume(link, requestId)) {
    if (data[2]! & FLAG_ERROR) {
      s.metrics.event("resubscribe_refused");
      s.client.error(
        ErrorCode.RESUBSCRIBE_REFUSED,
        `upstream ${link.cluster} refused subscription ${data.readUInt32BE(8)} when it came back; unsubscribe and subscribe again`,
        { family: F.SUBSCRIPTION, kind: data[1], cluster: link.cluster },
      );
    }
    return;
  }
  if (!s.broadcasts.answer(link, requestId, data))
    badUpstreamFrame(
      s,
      link,
      ErrorCode.UNEXPECTED_REPLY,
      `no broadcast ${requestId} is waiting for this upstream`,
      data[0]!,
      data[1]!,
      requestId,
    );
}

function controlFromUpstream(s: RoutingState, link: UpstreamLink, data: Buffer, kind: number): void {
  switch (kind) {
    case ControlKind.LOG:
      return s.flow.toClient(link, data);
    case ControlKind.ERROR: {
      // Errors are rare: name the cluster so the client knows which side complained.
      let e;
      try {
        e = decodePayload(data, ProtocolErrorSchema);
      } catch {
        return badUpstreamFrame(
          s,
          link,
          ErrorCode.FRAME_BAD_PAYLOAD,
          "error frame payload is not a ProtocolError",
          F.CONTROL,
          kind,
          0,
        );
      }
      // The peer's code is passed on as it is, even one this router's catalogue lacks.
      s.client.error(e.code as ErrorCode, e.message, {
        requestId: data.readUInt32BE(4),
        family: e.frameFamily,
        kind: e.frameKind,
        cluster: e.cluster || link.cluster,
      });
      return;
    }
    case ControlKind.CLOSE:
      link.fail("upstream closed the session");
      return;
    case ControlKind.UPSTREAM_STATUS: {
      // Routers compose: a gateway reports its own upstreams (agents). Relay it under a
      // composite name, "<cluster>/<agent>", so the client learns which cluster degraded.
      let st;
      try {
        st = decodePayload(data, UpstreamStatusSchema);
      } catch {
        return badUpstreamFrame(
          s,
          link,
          ErrorCode.FRAME_BAD_PAYLOAD,
          "upstream status payload is not an UpstreamStatus",
          F.CONTROL,
          kind,
          0,
        );
      }
      s.client.send(
        encodeFrame({ family: F.CONTROL, kind: ControlKind.UPSTREAM_STATUS }, UpstreamStatusSchema, {
          ...st,
          cluster: `${link.cluster}/${st.cluster}`,
          isDefault: link.isDefault && st.isDefault,
        }),
      );
      return;
    }
    default:
      return badUpstreamFrame(
        s,
        link,
        ErrorCode.FRAME_WRONG_DIRECTION,
        `control kind ${kind} is not expected from an upstream`,
        F.CONTROL,
        kind,
        0,
      );
  }
}

/** Answers a frame an upstream should not have sent with an error frame to that upstream. */
function badUpstreamFrame(
  s: RoutingState,
  link: UpstreamLink,
  code: ErrorCode,
  message: string,
  family: number,
  kind: number,
  requestId: number,
): void {
  s.metrics.badFrame("upstream", code);
  s.log.debug({ cluster: link.cluster, code }, "bad frame from upstream");
  link.send(errorFrame(code, message, { requestId, family, kind }));
}
