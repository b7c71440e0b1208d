// The routing core of one session (DESIGN §5), decided from the frame header alone:
//   - client → upstreams: env/file/DNS/outgoing to the Default upstream; traffic to the
//     upstream that owns the connection; ping and subscriptions broadcast and merged into
//     one reply; control to every upstream;
//   - upstreams → client: connection ids remapped to session-unique ids (ConnectionMap),
//     answers to broadcasts merged (BroadcastsInFlight), replayed subscriptions' results
//     consumed (SubscriptionReplay), control relayed with the cluster named.
// The session (routed-session.ts) owns the sockets' lifecycle and hands frames in here
// once the client said hello.
import type { Logger } from "pino";
import { ErrorCode } from "../../../proto/error-codes.js";
import { errorFrame } from "../../../proto/error-frame.js";
import { DEFAULT_ONLY_FAMILIES } from "../../../proto/frame-catalog.js";
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
  HealthState,
  ProtocolErrorSchema,
  StreamCloseSchema,
  SubscriptionKind,
  TrafficKind,
  UpstreamStatusSchema,
} from "../../../proto/gen/session_pb.js";
import { BroadcastMerge } from "./broadcast-merge.js";
import { BroadcastsInFlight } from "./broadcasts-in-flight.js";
import type { ClientChannel } from "./client-channel.js";
import { ConnectionMap } from "./connection-map.js";
import type { RouterMetrics } from "./router-metrics.js";
import type { SessionFlowControl } from "./session-flow-control.js";
import { SubscriptionReplay } from "./subscription-replay.js";
import { Sent, type UpstreamLink } from "./upstream-link.js";

const F = FrameFamily;

export interface RoutingLimits {
  /** Largest frame payload accepted. Bytes; default 1 MiB. */
  maxPayloadBytes: number;
  /** Open incoming connections per session. Default 65 536. */
  maxConnections: number;
  /** Active subscriptions per session. Default 1 024. */
  maxSubscriptions: number;
  /** Broadcasts in flight per session. Default 1 024. */
  maxPendingMerges: number;
  /** A broadcast answered by fewer than all live upstreams is completed after this. Milliseconds; default 10 000. */
  mergeTimeoutMs: number;
}

export class FrameRouting {
  private readonly links = new Map<string, UpstreamLink>();
  private defaultLink: UpstreamLink | undefined;
  private readonly conns = new ConnectionMap<UpstreamLink>();
  private readonly subscriptions = new SubscriptionReplay<UpstreamLink>();
  private readonly broadcasts: BroadcastsInFlight;

  constructor(
    private readonly client: ClientChannel,
    private readonly flow: SessionFlowControl,
    private readonly limits: RoutingLimits,
    private readonly metrics: RouterMetrics,
    private readonly log: Logger,
  ) {
    this.broadcasts = new BroadcastsInFlight(limits.mergeTimeoutMs, metrics, (m) => this.merged(m));
  }

  // ---------------------------------------------------------------- the upstream set

  /** Adds `link` to the upstreams frames are routed to. */
  attach(link: UpstreamLink): void {
    this.links.set(link.cluster, link);
    if (link.isDefault) this.defaultLink = link;
  }

  /** Removes `link` from the route; returns how many of its connections were closed. */
  detach(link: UpstreamLink, error: string): number {
    this.links.delete(link.cluster);
    if (this.defaultLink === link) this.defaultLink = undefined;
    return this.upstreamLost(link, error);
  }

  upstreams(): IterableIterator<UpstreamLink> {
    return this.links.values();
  }

  upstream(cluster: string): UpstreamLink | undefined {
    return this.links.get(cluster);
  }

  /** Open incoming connections of the session. */
  get connectionCount(): number {
    return this.conns.size;
  }

  /** Open incoming connections owned by `link`. */
  connectionsOn(link: UpstreamLink): number {
    return this.conns.countOn(link);
  }

  /**
   * `link` is up (first time, reconnected, or added mid-session): give it the session's
   * subscriptions. (A subscription the client sent while this link was connecting may
   * arrive twice: renewing one's own subscription is idempotent at the agent.)
   */
  upstreamUp(link: UpstreamLink): void {
    for (const frame of this.subscriptions.replayFor(link)) link.send(frame);
  }

  /**
   * `link` is gone (for now): its connections are closed toward the client, broadcasts
   * stop waiting for it. Returns how many connections were closed.
   */
  upstreamLost(link: UpstreamLink, error: string): number {
    const closed = this.conns.dropUpstream(link);
    for (const id of closed)
      this.client.send(
        encodeFrame({ family: F.TRAFFIC, kind: TrafficKind.CLOSE, connectionId: id }, StreamCloseSchema, {
          error: `upstream ${link.cluster} lost: ${error}`,
        }),
      );
    this.subscriptions.forget(link);
    this.broadcasts.upstreamGone(link, error);
    return closed.length;
  }

  /**
   * Frames `link` queued while it first connected and then dropped (its first attempt
   * failed, e.g. its gateway did not know the session yet): a request only that upstream
   * would have answered gets an error now instead of no answer at all. Broadcasts stopped
   * waiting for it in `upstreamLost`; subscriptions are replayed when it comes up.
   */
  unsent(link: UpstreamLink, frames: Buffer[]): void {
    for (const data of frames) {
      if (!DEFAULT_ONLY_FAMILIES.has(data[0]!)) continue;
      this.client.error(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        `upstream ${link.cluster} did not come up (${link.lastError}); retry after its UpstreamStatus UP`,
        { requestId: data.readUInt32BE(4), family: data[0], kind: data[1], cluster: link.cluster },
      );
    }
  }

  /** The router's coarse sweep: completes broadcasts past the merge timeout. */
  sweep(now: number): void {
    this.broadcasts.sweep(now);
  }

  clear(): void {
    this.links.clear();
    this.conns.clear();
    this.broadcasts.clear();
    this.subscriptions.clear();
    this.flow.clear();
  }

  // ---------------------------------------------------------------- client → upstreams

  /** Routes a checked client frame (after hello) by its family. */
  fromClient(data: Buffer): void {
    const family = data[0]!;
    switch (family) {
      case F.ENV:
      case F.FILE:
      case F.DNS:
      case F.OUTGOING_TCP:
      case F.OUTGOING_UDP:
        return this.toDefault(data);
      case F.TRAFFIC:
        return this.toOwner(data);
      case F.PING:
      case F.SUBSCRIPTION:
      case F.CONTROL:
        return this.broadcast(data);
    }
  }

  private toDefault(data: Buffer): void {
    const link = this.defaultLink;
    if (!link)
      return this.client.refuse(data, ErrorCode.NO_DEFAULT_UPSTREAM, "this session has no default upstream");
    this.sendToLink(link, data, true);
  }

  private toOwner(data: Buffer): void {
    const id = data.readUInt32BE(8);
    const owner = this.conns.owner(id);
    if (!owner) {
      if (data[1] === TrafficKind.CLOSE) {
        // Both ends closing at once is normal: count it, do not answer with an error.
        this.metrics.badFrame("client", ErrorCode.CONNECTION_ALREADY_CLOSED);
        return;
      }
      return this.client.refuse(
        data,
        ErrorCode.UNKNOWN_CONNECTION,
        `connection ${id} is not open on this session`,
      );
    }
    if (data[1] === TrafficKind.CLOSE) this.conns.close(id);
    setConnectionId(data, owner.agentId);
    this.sendToLink(owner.upstream, data, true);
  }

  private broadcast(data: Buffer): void {
    const family = data[0]!;
    const kind = data[1]!;
    if (family === F.CONTROL) {
      // close / log level: fire-and-forget to every upstream.
      for (const link of this.links.values()) this.sendToLink(link, data, false);
      return;
    }
    const requestId = data.readUInt32BE(4);
    if (this.broadcasts.has(requestId))
      return this.client.refuse(
        data,
        ErrorCode.DUPLICATE_REQUEST_ID,
        `request ${requestId} is still in flight; use a new request id`,
      );
    if (this.broadcasts.size >= this.limits.maxPendingMerges)
      return this.client.refuse(
        data,
        ErrorCode.TOO_MANY_PENDING,
        `more than ${this.limits.maxPendingMerges} broadcasts in flight; wait for answers`,
      );
    if (
      family === F.SUBSCRIPTION &&
      kind !== SubscriptionKind.UNSUBSCRIBE &&
      !this.subscriptions.has(data.readUInt32BE(8)) &&
      this.subscriptions.size >= this.limits.maxSubscriptions
    )
      return this.client.refuse(
        data,
        ErrorCode.TOO_MANY_SUBSCRIPTIONS,
        `a session may hold ${this.limits.maxSubscriptions} subscriptions`,
      );

    const merge = new BroadcastMerge(family, kind, requestId, data);
    this.broadcasts.add(merge);
    for (const link of this.links.values()) {
      if (!link.live) {
        merge.skipped(link.cluster, link.lastError || "not connected");
        continue;
      }
      if (family === F.PING && link.congested) {
        // A ping must not queue behind a congested upstream or stall the session: report it instead.
        this.metrics.event("shed_ping_congested");
        merge.skipped(link.cluster, "congested");
        continue;
      }
      merge.waiting.add(link);
      merge.reachedUp.set(link, link.ups + (link.state === "open" ? 0 : 1));
      if (this.sendToLink(link, data, false) === Sent.Rejected)
        merge.giveUp(link, HealthState.DOWN, "send rejected");
    }
    if (merge.waiting.size === 0) this.broadcasts.finish(merge);
  }

  /** Sends with backpressure; answers the client with an error when the link cannot take it. */
  private sendToLink(link: UpstreamLink, data: Buffer, reportRejection: boolean): Sent {
    const r = this.flow.toUpstream(link, data);
    if (r === Sent.Rejected && reportRejection)
      this.client.error(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        `upstream ${link.cluster} is ${link.state}${link.lastError ? ` (${link.lastError})` : ""}; retry after its UpstreamStatus UP`,
        { requestId: data.readUInt32BE(4), family: data[0], kind: data[1], cluster: link.cluster },
      );
    return r;
  }

  /** One merged reply per broadcast; a settled subscription change updates what is replayed. */
  private merged(merge: BroadcastMerge): void {
    const reply = merge.reply();
    if (merge.family === F.SUBSCRIPTION) {
      const subscriptionId = merge.request.readUInt32BE(8);
      const unsubscribe = merge.kind === SubscriptionKind.UNSUBSCRIBE;
      const held = this.subscriptions.has(subscriptionId);
      if (unsubscribe) this.subscriptions.remove(subscriptionId);
      else if (merge.succeeded) this.subscriptions.accept(subscriptionId, merge.request);
      // An upstream that came up (added, or back) while this change was in flight got a
      // replay of the subscriptions as they were then: without the change. It gets it now.
      if (unsubscribe ? held : merge.succeeded)
        for (const link of this.links.values())
          if (link.state === "open" && merge.reachedUp.get(link) !== link.ups)
            link.send(this.subscriptions.resend(link, merge.request));
    }
    this.client.send(reply);
  }

  // ---------------------------------------------------------------- upstreams → client

  fromUpstream(link: UpstreamLink, data: Buffer, isBinary: boolean): void {
    if (this.client.closed || link.state === "closed") return;
    if (!isBinary)
      return this.badUpstreamFrame(
        link,
        ErrorCode.FRAME_NOT_BINARY,
        "text WebSocket messages are not frames; send binary messages",
        0,
        0,
        0,
      );
    const check = checkFrame(data, this.limits.maxPayloadBytes);
    if (check !== FrameCheck.Ok) {
      const e = frameCheckError(check, data, this.limits.maxPayloadBytes);
      return this.badUpstreamFrame(link, e.code, e.message, e.family, e.kind, e.requestId);
    }
    const family = data[0]!;
    const kind = data[1]!;
    // Answers travel toward the client; so do DATA (2) and CLOSE (3) of the stream families,
    // which travel both ways. Kinds 2 and 3 of other families are requests (a file READ, a
    // DNS REVERSE, a STEAL): never from an upstream.
    const stream = family === F.TRAFFIC || family === F.OUTGOING_TCP || family === F.OUTGOING_UDP;
    if (!(kind & KIND_TOWARD_CLIENT) && !(stream && (kind === 2 || kind === 3)) && family !== F.CONTROL) {
      return this.badUpstreamFrame(
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
        return this.trafficFromUpstream(link, data, kind);
      case F.PING:
      case F.SUBSCRIPTION:
        return this.replyFromUpstream(link, data);
      case F.ENV:
      case F.FILE:
      case F.DNS:
      case F.OUTGOING_TCP:
      case F.OUTGOING_UDP:
        if (link !== this.defaultLink)
          return this.badUpstreamFrame(
            link,
            ErrorCode.FRAME_WRONG_UPSTREAM,
            `only the default upstream answers family ${family}`,
            family,
            kind,
            data.readUInt32BE(4),
          );
        return this.flow.toClient(link, data);
      case F.CONTROL:
        return this.controlFromUpstream(link, data, kind);
    }
  }

  private trafficFromUpstream(link: UpstreamLink, data: Buffer, kind: number): void {
    const agentId = data.readUInt32BE(8);
    if (kind === TrafficKind.NEW_CONNECTION) {
      if (this.conns.has(link, agentId))
        return this.badUpstreamFrame(
          link,
          ErrorCode.CONNECTION_ID_IN_USE,
          `connection ${agentId} is already open`,
          F.TRAFFIC,
          kind,
          0,
        );
      if (this.conns.size >= this.limits.maxConnections) {
        this.metrics.badFrame("upstream", ErrorCode.TOO_MANY_CONNECTIONS);
        // Refuse the connection back to its agent so it does not wait for an answer.
        link.send(
          encodeFrame(
            { family: F.TRAFFIC, kind: TrafficKind.CLOSE, connectionId: agentId },
            StreamCloseSchema,
            {
              error: `session has ${this.limits.maxConnections} open connections`,
            },
          ),
        );
        return;
      }
      setConnectionId(data, this.conns.open(link, agentId));
      return this.flow.toClient(link, data);
    }
    const id = this.conns.sessionId(link, agentId);
    if (id === undefined) {
      if (kind === TrafficKind.CLOSE) {
        this.metrics.badFrame("upstream", ErrorCode.CONNECTION_ALREADY_CLOSED);
        return;
      }
      return this.badUpstreamFrame(
        link,
        ErrorCode.UNKNOWN_CONNECTION,
        `connection ${agentId} was never announced`,
        F.TRAFFIC,
        kind,
        data.readUInt32BE(4),
      );
    }
    if (kind === TrafficKind.CLOSE) this.conns.close(id);
    setConnectionId(data, id);
    this.flow.toClient(link, data);
  }

  private replyFromUpstream(link: UpstreamLink, data: Buffer): void {
    const requestId = data.readUInt32BE(4);
    if (this.subscriptions.consume(link, requestId)) {
      if (data[2]! & FLAG_ERROR) {
        this.metrics.event("resubscribe_refused");
        this.client.error(
          ErrorCode.RESUBSCRIBE_REFUSED,
          `upstream ${link.cluster} refused subscription ${data.readUInt32BE(8)} when it came back; unsubscribe and subscribe again`,
          { family: F.SUBSCRIPTION, kind: data[1], cluster: link.cluster },
        );
      }
      return;
    }
    if (!this.broadcasts.answer(link, requestId, data))
      this.badUpstreamFrame(
        link,
        ErrorCode.UNEXPECTED_REPLY,
        `no broadcast ${requestId} is waiting for this upstream`,
        data[0]!,
        data[1]!,
        requestId,
      );
  }

  private controlFromUpstream(link: UpstreamLink, data: Buffer, kind: number): void {
    switch (kind) {
      case ControlKind.LOG:
        return this.flow.toClient(link, data);
      case ControlKind.ERROR: {
        // Errors are rare: name the cluster so the client knows which side complained.
        let e;
        try {
          e = decodePayload(data, ProtocolErrorSchema);
        } catch {
          return this.badUpstreamFrame(
            link,
            ErrorCode.FRAME_BAD_PAYLOAD,
            "error frame payload is not a ProtocolError",
            F.CONTROL,
            kind,
            0,
          );
        }
        // The peer's code is passed on as it is, even one this router's catalogue lacks.
        this.client.error(e.code as ErrorCode, e.message, {
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
          return this.badUpstreamFrame(
            link,
            ErrorCode.FRAME_BAD_PAYLOAD,
            "upstream status payload is not an UpstreamStatus",
            F.CONTROL,
            kind,
            0,
          );
        }
        this.client.send(
          encodeFrame({ family: F.CONTROL, kind: ControlKind.UPSTREAM_STATUS }, UpstreamStatusSchema, {
            ...st,
            cluster: `${link.cluster}/${st.cluster}`,
            isDefault: link.isDefault && st.isDefault,
          }),
        );
        return;
      }
      default:
        return this.badUpstreamFrame(
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
  private badUpstreamFrame(
    link: UpstreamLink,
    code: ErrorCode,
    message: string,
    family: number,
    kind: number,
    requestId: number,
  ): void {
    this.metrics.badFrame("upstream", code);
    this.log.debug({ cluster: link.cluster, code }, "bad frame from upstream");
    link.send(errorFrame(code, message, { requestId, family, kind }));
  }
}
