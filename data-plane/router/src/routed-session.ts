// One session attached to this router: the client's WebSocket, one UpstreamLink per
// upstream in the route, and the state that makes many upstreams look like one:
//   - routing per family (DESIGN §5) from the frame header alone;
//   - connection ids remapped per (upstream, agent id) to session-unique ids;
//   - broadcasts merged into one reply (BroadcastMerge);
//   - active subscriptions remembered and replayed to an upstream that returns;
//   - flow control: a congested peer pauses the socket that feeds it, a peer past
//     its hard limit is dropped, so this session's memory stays bounded and other
//     sessions never wait for it.
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type WebSocket from "ws";
import { coalesceWrites } from "../../../proto/coalesced-writes.js";
import type { SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import {
  ControlKind,
  FrameFamily,
  HealthState,
  HelloAckSchema,
  HelloSchema,
  PingKind,
  ProtocolErrorSchema,
  StreamCloseSchema,
  SubscriptionKind,
  TrafficKind,
  UpstreamState,
  UpstreamStatusSchema,
} from "../../../proto/gen/session_pb.js";
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
  negotiateVersion,
  PROTOCOL_VERSION_MAX,
  PROTOCOL_VERSION_MIN,
} from "../../../proto/frame-version.js";
import { BroadcastMerge } from "./broadcast-merge.js";
import type { RouterMetrics } from "./router-metrics.js";
import { Sent, UpstreamLink, type FlowLimits } from "./upstream-link.js";

export interface SessionLimits {
  /** Largest frame payload accepted. Bytes; default 1 MiB. */
  maxPayloadBytes: number;
  flow: FlowLimits;
  /** A broadcast answered by fewer than all live upstreams is completed after this. Milliseconds; default 10 000. */
  mergeTimeoutMs: number;
  /** WebSocket ping interval on every upstream and the client. Milliseconds; default 30 000. */
  wsPingIntervalMs: number;
  backoff: { initialMs: number; maxMs: number };
  connectTimeoutMs: number;
  unmasked: boolean;
  /** Open incoming connections per session. Default 65 536. */
  maxConnections: number;
  /** Active subscriptions per session. Default 1 024. */
  maxSubscriptions: number;
  /** Broadcasts in flight per session. Default 1 024. */
  maxPendingMerges: number;
}

/** WebSocket close codes the router uses toward clients. */
export const CloseCode = {
  RouterShutdown: 1001,
  ProtocolError: 1002,
  TooSlow: 1013,
  Replaced: 4000,
  CredentialsChanged: 4401,
  SessionRemoved: 4404,
  SessionNotReady: 4503,
} as const;

const F = FrameFamily;
/** Router-originated request ids (re-subscriptions) have the top bit set. */
const INTERNAL_REQUEST_BIT = 0x80000000;

export class RoutedSession {
  readonly id: string;
  private route: SessionRoute;
  private readonly links = new Map<string, UpstreamLink>();
  private defaultLink: UpstreamLink | undefined;
  /** Session connection id → owner link and the agent's id for it. */
  private readonly conns = new Map<number, { link: UpstreamLink; agentId: number }>();
  private nextConnId = 1;
  private readonly merges = new Map<number, BroadcastMerge>();
  /** Subscription id → the accepted MIRROR/STEAL frame, replayed to upstreams that return. */
  private readonly subscriptions = new Map<number, Buffer>();
  private nextInternalRequest = 1;
  private helloDone = false;
  /** Links whose congestion paused the client. */
  private readonly blockedOn = new Set<UpstreamLink>();
  private clientPaused = false;
  private clientLastPing = Date.now();
  private clientAwaitingPong = false;
  private closed = false;

  constructor(
    route: SessionRoute,
    private readonly client: WebSocket,
    private readonly clientSocket: Socket,
    private readonly limits: SessionLimits,
    private readonly metrics: RouterMetrics,
    private readonly log: Logger,
    private readonly onClosed: (s: RoutedSession) => void,
  ) {
    this.id = route.sessionId;
    this.route = route;
    client.on("message", (data: Buffer, isBinary) => this.fromClient(data, isBinary));
    client.on("pong", () => {
      this.clientAwaitingPong = false;
    });
    client.on("close", () => this.dispose("client disconnected"));
    client.on("error", (err) => this.log.info({ err: err.message }, "client socket error"));
    clientSocket.on("drain", () => this.clientDrained());
    for (const u of route.upstreams) this.addLink(u);
  }

  get clientBufferedBytes(): number {
    return this.client.bufferedAmount;
  }

  *upstreamLinks(): IterableIterator<UpstreamLink> {
    yield* this.links.values();
  }

  /** Open incoming connections (for tests and debug). */
  get connectionCount(): number {
    return this.conns.size;
  }

  // ---------------------------------------------------------------- client → upstreams

  private fromClient(data: Buffer, isBinary: boolean): void {
    if (this.closed) return;
    if (!isBinary) {
      this.metrics.badFrame("client", "SWITCHYARD_FRAME_NOT_BINARY");
      this.sendError(
        "SWITCHYARD_FRAME_NOT_BINARY",
        "text WebSocket messages are not frames; send binary messages",
        0,
      );
      return;
    }
    const check = checkFrame(data, this.limits.maxPayloadBytes);
    if (check !== FrameCheck.Ok)
      return this.badClientFrame(frameCheckError(check, data, this.limits.maxPayloadBytes));
    const family = data[0]!;
    const kind = data[1]!;
    if (family === F.CONTROL && kind === ControlKind.ERROR) {
      // A router in front of this one (router chains) reports a frame it refused. Answering
      // with another error would bounce it back; log and count instead.
      this.metrics.badFrame("client", "SWITCHYARD_PEER_REPORTED_ERROR");
      this.log.warn({ requestId: data.readUInt32BE(4) }, "the client reported an error frame");
      return;
    }
    if (kind & KIND_TOWARD_CLIENT) {
      return this.rejectClient(
        data,
        "SWITCHYARD_FRAME_WRONG_DIRECTION",
        `kind ${kind} of family ${family} travels toward the client, not from it`,
      );
    }
    if (!this.helloDone) {
      if (family === F.CONTROL && kind === ControlKind.HELLO) return this.clientHello(data);
      return this.rejectClient(
        data,
        "SWITCHYARD_HELLO_REQUIRED",
        "the first frame on a session must be a control Hello",
      );
    }
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
        return this.broadcast(data);
      case F.SUBSCRIPTION:
        return this.broadcast(data);
      case F.CONTROL:
        if (kind === ControlKind.HELLO)
          return this.rejectClient(
            data,
            "SWITCHYARD_HELLO_REPEATED",
            "hello was already exchanged on this connection",
          );
        return this.broadcast(data);
    }
  }

  private clientHello(data: Buffer): void {
    let hello;
    try {
      hello = decodePayload(data, HelloSchema);
    } catch (err) {
      return this.badClientFrame(err as Error & { code: string });
    }
    const version = negotiateVersion(
      { min: PROTOCOL_VERSION_MIN, max: PROTOCOL_VERSION_MAX },
      { min: hello.minVersion, max: hello.maxVersion },
    );
    if (version === undefined) {
      this.sendError(
        "SWITCHYARD_PROTOCOL_VERSION_UNSUPPORTED",
        `client speaks protocol versions ${hello.minVersion}-${hello.maxVersion}, this router ${PROTOCOL_VERSION_MIN}-${PROTOCOL_VERSION_MAX}; upgrade the older side`,
        data.readUInt32BE(4),
      );
      this.client.close(CloseCode.ProtocolError, "protocol version unsupported");
      return;
    }
    this.helloDone = true;
    this.client.send(
      encodeFrame(
        { family: F.CONTROL, kind: ControlKind.HELLO_ACK, requestId: data.readUInt32BE(4) },
        HelloAckSchema,
        { version, peer: "switchyard-router" },
      ),
    );
    // Tell the client about upstreams that were already up before it said hello.
    for (const link of this.links.values()) {
      if (link.state === "open") this.sendUpstreamStatus(link, UpstreamState.UP, "", 0, 0);
      else if (link.state === "down") this.sendUpstreamStatus(link, UpstreamState.DOWN, link.lastError, 0, 0);
    }
  }

  private toDefault(data: Buffer): void {
    const link = this.defaultLink;
    if (!link)
      return this.rejectClient(
        data,
        "SWITCHYARD_NO_DEFAULT_UPSTREAM",
        "this session has no default upstream",
      );
    this.sendToLink(link, data, true);
  }

  private toOwner(data: Buffer): void {
    const id = data.readUInt32BE(8);
    const owner = this.conns.get(id);
    if (!owner) {
      if (data[1] === TrafficKind.CLOSE) {
        // Both ends closing at once is normal: count it, do not answer with an error.
        this.metrics.badFrame("client", "SWITCHYARD_CONNECTION_ALREADY_CLOSED");
        return;
      }
      return this.rejectClient(
        data,
        "SWITCHYARD_UNKNOWN_CONNECTION",
        `connection ${id} is not open on this session`,
      );
    }
    if (data[1] === TrafficKind.CLOSE) {
      this.conns.delete(id);
      owner.link.conns.delete(owner.agentId);
    }
    setConnectionId(data, owner.agentId);
    this.sendToLink(owner.link, data, true);
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
    if (this.merges.has(requestId))
      return this.rejectClient(
        data,
        "SWITCHYARD_DUPLICATE_REQUEST_ID",
        `request ${requestId} is still in flight; use a new request id`,
      );
    if (this.merges.size >= this.limits.maxPendingMerges)
      return this.rejectClient(
        data,
        "SWITCHYARD_TOO_MANY_PENDING",
        `more than ${this.limits.maxPendingMerges} broadcasts in flight; wait for answers`,
      );
    if (
      family === F.SUBSCRIPTION &&
      kind !== SubscriptionKind.UNSUBSCRIBE &&
      !this.subscriptions.has(data.readUInt32BE(8)) &&
      this.subscriptions.size >= this.limits.maxSubscriptions
    )
      return this.rejectClient(
        data,
        "SWITCHYARD_TOO_MANY_SUBSCRIPTIONS",
        `a session may hold ${this.limits.maxSubscriptions} subscriptions`,
      );

    const merge = new BroadcastMerge(family, kind, requestId, data);
    this.merges.set(requestId, merge);
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
      if (this.sendToLink(link, data, false) === Sent.Rejected)
        merge.giveUp(link, HealthState.DOWN, "send rejected");
    }
    if (merge.waiting.size === 0) this.finishMerge(merge);
  }

  /** Sends and applies backpressure; answers the client with an error when the link cannot take it. */
  private sendToLink(link: UpstreamLink, data: Buffer, reportRejection: boolean): Sent {
    const r = link.send(data);
    if (r === Sent.Congested) {
      if (!this.blockedOn.has(link)) this.blockedOn.add(link);
      if (!this.clientPaused) {
        this.clientPaused = true;
        this.client.pause();
        this.metrics.event("backpressure_pause_client");
      }
    } else if (r === Sent.Rejected) {
      if (link.state === "open") {
        // Over the hard limit although we stopped reading the client: the upstream is stuck.
        this.metrics.event("upstream_too_slow");
        link.fail(`upstream did not read ${this.limits.flow.hardLimitBytes} queued bytes`);
      }
      if (reportRejection)
        this.sendError(
          "SWITCHYARD_UPSTREAM_UNAVAILABLE",
          `upstream ${link.cluster} is ${link.state}${link.lastError ? ` (${link.lastError})` : ""}; retry after its UpstreamStatus UP`,
          data.readUInt32BE(4),
          data[0],
          data[1],
          link.cluster,
        );
    }
    return r;
  }

  // ---------------------------------------------------------------- upstreams → client

  private fromUpstream(link: UpstreamLink, data: Buffer, isBinary: boolean): void {
    if (this.closed || link.state === "closed") return;
    if (!isBinary)
      return this.badUpstreamFrame(
        link,
        "SWITCHYARD_FRAME_NOT_BINARY",
        "text messages are not frames",
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
    if (!(kind & KIND_TOWARD_CLIENT) && !(kind === 2 || kind === 3) && family !== F.CONTROL) {
      return this.badUpstreamFrame(
        link,
        "SWITCHYARD_FRAME_WRONG_DIRECTION",
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
            "SWITCHYARD_FRAME_WRONG_UPSTREAM",
            `only the default upstream answers family ${family}`,
            family,
            kind,
            data.readUInt32BE(4),
          );
        return this.toClient(link, data);
      case F.CONTROL:
        return this.controlFromUpstream(link, data, kind);
    }
  }

  private trafficFromUpstream(link: UpstreamLink, data: Buffer, kind: number): void {
    const agentId = data.readUInt32BE(8);
    if (kind === TrafficKind.NEW_CONNECTION) {
      if (link.conns.has(agentId))
        return this.badUpstreamFrame(
          link,
          "SWITCHYARD_CONNECTION_ID_IN_USE",
          `connection ${agentId} is already open`,
          F.TRAFFIC,
          kind,
          0,
        );
      if (this.conns.size >= this.limits.maxConnections) {
        this.metrics.badFrame("upstream", "SWITCHYARD_TOO_MANY_CONNECTIONS");
        // Refuse the connection back to its agent so it does not wait for an answer.
        const close = encodeFrame(
          { family: F.TRAFFIC, kind: TrafficKind.CLOSE, connectionId: agentId },
          StreamCloseSchema,
          {
            error: `session has ${this.limits.maxConnections} open connections`,
          },
        );
        link.send(close);
        return;
      }
      const id = this.allocConnId();
      this.conns.set(id, { link, agentId });
      link.conns.set(agentId, id);
      setConnectionId(data, id);
      return this.toClient(link, data);
    }
    const id = link.conns.get(agentId);
    if (id === undefined) {
      if (kind === TrafficKind.CLOSE) {
        this.metrics.badFrame("upstream", "SWITCHYARD_CONNECTION_ALREADY_CLOSED");
        return;
      }
      return this.badUpstreamFrame(
        link,
        "SWITCHYARD_UNKNOWN_CONNECTION",
        `connection ${agentId} was never announced`,
        F.TRAFFIC,
        kind,
        data.readUInt32BE(4),
      );
    }
    if (kind === TrafficKind.CLOSE) {
      link.conns.delete(agentId);
      this.conns.delete(id);
    }
    setConnectionId(data, id);
    this.toClient(link, data);
  }

  private replyFromUpstream(link: UpstreamLink, data: Buffer): void {
    const requestId = data.readUInt32BE(4);
    if (link.internalPending.delete(requestId)) {
      if (data[2]! & FLAG_ERROR) {
        this.metrics.event("resubscribe_refused");
        this.sendError(
          "SWITCHYARD_RESUBSCRIBE_REFUSED",
          `upstream ${link.cluster} refused subscription ${data.readUInt32BE(8)} when it came back; unsubscribe and subscribe again`,
          0,
          F.SUBSCRIPTION,
          data[1],
          link.cluster,
        );
      }
      return;
    }
    const merge = this.merges.get(requestId);
    const expected =
      merge && (merge.family === F.PING ? data[1] === PingKind.PONG : data[1] === SubscriptionKind.RESULT);
    if (!merge || !expected || !merge.waiting.has(link)) {
      return this.badUpstreamFrame(
        link,
        "SWITCHYARD_UNEXPECTED_REPLY",
        `no broadcast ${requestId} is waiting for this upstream`,
        data[0]!,
        data[1]!,
        requestId,
      );
    }
    if (merge.answer(link, data)) this.finishMerge(merge);
  }

  private controlFromUpstream(link: UpstreamLink, data: Buffer, kind: number): void {
    switch (kind) {
      case ControlKind.LOG:
        return this.toClient(link, data);
      case ControlKind.ERROR: {
        // Errors are rare: name the cluster so the client knows which side complained.
        try {
          const e = decodePayload(data, ProtocolErrorSchema);
          if (!e.cluster) e.cluster = link.cluster;
          this.sendError(e.code, e.message, data.readUInt32BE(4), e.frameFamily, e.frameKind, e.cluster);
        } catch {
          this.badUpstreamFrame(
            link,
            "SWITCHYARD_FRAME_BAD_PAYLOAD",
            "error frame payload is not a ProtocolError",
            F.CONTROL,
            kind,
            0,
          );
        }
        return;
      }
      case ControlKind.CLOSE:
        link.fail("upstream closed the session");
        return;
      case ControlKind.UPSTREAM_STATUS: {
        // Routers compose: a gateway reports its own upstreams (agents). Relay it under a
        // composite name, "<cluster>/<agent>", so the client learns which cluster degraded.
        try {
          const st = decodePayload(data, UpstreamStatusSchema);
          this.client.send(
            encodeFrame({ family: F.CONTROL, kind: ControlKind.UPSTREAM_STATUS }, UpstreamStatusSchema, {
              ...st,
              cluster: `${link.cluster}/${st.cluster}`,
              isDefault: link.isDefault && st.isDefault,
            }),
          );
        } catch {
          this.badUpstreamFrame(
            link,
            "SWITCHYARD_FRAME_BAD_PAYLOAD",
            "upstream status payload is not an UpstreamStatus",
            F.CONTROL,
            kind,
            0,
          );
        }
        return;
      }
      default:
        return this.badUpstreamFrame(
          link,
          "SWITCHYARD_FRAME_WRONG_DIRECTION",
          `control kind ${kind} is not expected from an upstream`,
          F.CONTROL,
          kind,
          0,
        );
    }
  }

  private toClient(link: UpstreamLink, data: Buffer): void {
    const client = this.client;
    if (client.bufferedAmount > this.limits.flow.hardLimitBytes) return this.clientTooSlow();
    coalesceWrites(this.clientSocket);
    client.send(data);
    if (client.bufferedAmount > this.limits.flow.highWaterBytes && !link.readingPaused) {
      link.pauseReading();
      this.metrics.event("backpressure_pause_upstream");
    }
  }

  private clientDrained(): void {
    if (this.client.bufferedAmount > this.limits.flow.lowWaterBytes) return;
    for (const link of this.links.values()) link.resumeReading();
  }

  private linkDrained(link: UpstreamLink): void {
    if (!this.blockedOn.delete(link)) return;
    if (this.blockedOn.size === 0 && this.clientPaused) {
      this.clientPaused = false;
      this.client.resume();
    }
  }

  private clientTooSlow(): void {
    this.metrics.event("client_too_slow");
    this.log.warn({ buffered: this.client.bufferedAmount }, "client does not read its frames; closing it");
    this.client.close(CloseCode.TooSlow, "client too slow");
    this.dispose("client too slow");
  }

  // ---------------------------------------------------------------- merges

  private finishMerge(merge: BroadcastMerge): void {
    this.merges.delete(merge.requestId);
    const reply = merge.reply();
    if (merge.family === F.SUBSCRIPTION) {
      const subscriptionId = merge.request.readUInt32BE(8);
      if (merge.kind === SubscriptionKind.UNSUBSCRIBE) this.subscriptions.delete(subscriptionId);
      // Copy: a received frame may be a view into a larger socket chunk that would stay alive with it.
      else if (merge.succeeded) this.subscriptions.set(subscriptionId, Buffer.from(merge.request));
    }
    this.metrics.fanoutLatency.observe(
      { family: merge.family === F.PING ? "ping" : "subscription" },
      (performance.now() - merge.startedAt) / 1000,
    );
    if (!this.closed) this.client.send(reply);
  }

  // ---------------------------------------------------------------- links

  private addLink(u: SessionRoute["upstreams"][number]): void {
    const link = new UpstreamLink(
      {
        sessionId: this.id,
        cluster: u.cluster,
        url: u.url,
        secret: u.secret,
        caPem: u.caPem,
        isDefault: u.isDefault,
        limits: this.limits.flow,
        maxPayloadBytes: this.limits.maxPayloadBytes,
        backoff: this.limits.backoff,
        connectTimeoutMs: this.limits.connectTimeoutMs,
        unmasked: this.limits.unmasked,
        counters: this.metrics.clusterCounters(u.cluster),
        log: this.log,
      },
      {
        frame: (l, data, isBinary) => this.fromUpstream(l, data, isBinary),
        up: (l, reconnected) => this.linkUp(l, reconnected),
        down: (l, error, retryInMs) => this.linkLost(l, error, retryInMs),
        drained: (l) => this.linkDrained(l),
      },
    );
    this.links.set(u.cluster, link);
    if (u.isDefault) this.defaultLink = link;
    link.connect();
  }

  private linkUp(link: UpstreamLink, reconnected: boolean): void {
    this.log.info({ cluster: link.cluster, reconnected }, "upstream link up");
    // A link that returns, or one added to the route mid-session (a replaced agent), gets
    // the session's subscriptions. They are replayed with router-owned request ids so their
    // results are consumed here, not mistaken for answers to the client. (A subscription
    // the client sent while this link was connecting may arrive twice: renewing one's own
    // subscription is idempotent at the agent.)
    if (this.subscriptions.size > 0) {
      for (const frame of this.subscriptions.values()) {
        const copy = Buffer.from(frame);
        const rid = (INTERNAL_REQUEST_BIT | this.nextInternalRequest++) >>> 0;
        if (this.nextInternalRequest > 0x7fffffff) this.nextInternalRequest = 1;
        copy.writeUInt32BE(rid, 4);
        link.internalPending.add(rid);
        link.send(copy);
      }
    }
    if (this.helloDone) this.sendUpstreamStatus(link, UpstreamState.UP, "", 0, 0);
  }

  /** The link is gone (for now): close its connections, stop waiting for it, tell the client. */
  private linkLost(link: UpstreamLink, error: string, retryInMs: number): void {
    const closed = this.dropLinkState(link, error);
    this.linkDrained(link);
    if (this.helloDone) this.sendUpstreamStatus(link, UpstreamState.DOWN, error, retryInMs, closed);
  }

  private dropLinkState(link: UpstreamLink, error: string): number {
    let closed = 0;
    for (const id of link.conns.values()) {
      this.conns.delete(id);
      closed++;
      if (!this.closed)
        this.client.send(
          encodeFrame({ family: F.TRAFFIC, kind: TrafficKind.CLOSE, connectionId: id }, StreamCloseSchema, {
            error: `upstream ${link.cluster} lost: ${error}`,
          }),
        );
    }
    link.conns.clear();
    for (const merge of [...this.merges.values()])
      if (merge.giveUp(link, HealthState.DOWN, error)) this.finishMerge(merge);
    return closed;
  }

  private sendUpstreamStatus(
    link: UpstreamLink,
    state: UpstreamState,
    error: string,
    retryInMs: number,
    closed: number,
  ) {
    if (this.closed) return;
    this.client.send(
      encodeFrame({ family: F.CONTROL, kind: ControlKind.UPSTREAM_STATUS }, UpstreamStatusSchema, {
        cluster: link.cluster,
        state,
        error,
        retryInMs,
        isDefault: link.isDefault,
        connectionsClosed: closed,
      }),
    );
  }

  /** The route changed in the table: reconcile the links (credentials checked by the registry). */
  updateRoute(route: SessionRoute): void {
    this.route = route;
    const wanted = new Map(route.upstreams.map((u) => [u.cluster, u]));
    for (const [cluster, link] of this.links) {
      const u = wanted.get(cluster);
      const o = link.opts;
      if (u && u.url === o.url && u.secret === o.secret && u.caPem === o.caPem && u.isDefault === o.isDefault)
        continue;
      link.close("upstream removed from the route");
      this.links.delete(cluster);
      if (this.defaultLink === link) this.defaultLink = undefined;
      const closed = this.dropLinkState(link, "upstream removed from the route");
      this.blockedOn.delete(link);
      if (this.helloDone)
        this.sendUpstreamStatus(link, UpstreamState.DOWN, "removed from the route", 0, closed);
    }
    for (const u of route.upstreams) if (!this.links.has(u.cluster)) this.addLink(u);
    if (this.blockedOn.size === 0 && this.clientPaused) {
      this.clientPaused = false;
      this.client.resume();
    }
  }

  get clientKeyHash(): string {
    return this.route.clientKeyHash;
  }

  // ---------------------------------------------------------------- housekeeping

  /** The router's one-second sweep: merge timeouts and WebSocket pings. */
  sweep(now: number): void {
    if (this.closed) return;
    for (const merge of [...this.merges.values()]) {
      if (now - merge.startedMs < this.limits.mergeTimeoutMs) continue;
      this.metrics.event("merge_timeout");
      for (const link of [...merge.waiting])
        merge.giveUp(link, HealthState.TIMEOUT, `no answer within ${this.limits.mergeTimeoutMs} ms`);
      this.finishMerge(merge);
    }
    for (const link of this.links.values()) link.sweep(now, this.limits.wsPingIntervalMs);
    if (now - this.clientLastPing >= this.limits.wsPingIntervalMs) {
      if (this.clientAwaitingPong) {
        this.log.info("client did not answer a WebSocket ping; closing");
        this.client.terminate();
        this.dispose("client ping timeout");
        return;
      }
      this.clientAwaitingPong = true;
      this.clientLastPing = now;
      this.client.ping();
    }
  }

  /**
   * Closes the client (with `code`) and every upstream link. The session being removed
   * from the routing table ends it at the agents too; any other reason (shutdown, a newer
   * connection, credentials) may be followed by the client returning, so agents hold on.
   */
  close(code: number, reason: string): void {
    if (this.closed) return;
    this.client.close(code, reason);
    this.dispose(reason, code === CloseCode.SessionRemoved ? reason : undefined);
  }

  private dispose(reason: string, farewell?: string): void {
    if (this.closed) return;
    this.closed = true;
    for (const link of this.links.values()) link.close(farewell);
    this.links.clear();
    this.conns.clear();
    this.merges.clear();
    this.subscriptions.clear();
    this.log.info({ reason }, "session detached");
    this.onClosed(this);
  }

  // ---------------------------------------------------------------- errors

  private badClientFrame(
    err: Error & { code: string; family?: number; kind?: number; requestId?: number },
  ): void {
    this.metrics.badFrame("client", err.code);
    this.sendError(err.code, err.message, err.requestId ?? 0, err.family, err.kind);
  }

  private rejectClient(data: Buffer, code: string, message: string): void {
    this.metrics.badFrame("client", code);
    this.sendError(code, message, data.readUInt32BE(4), data[0], data[1]);
  }

  private badUpstreamFrame(
    link: UpstreamLink,
    code: string,
    message: string,
    family: number,
    kind: number,
    requestId: number,
  ) {
    this.metrics.badFrame("upstream", code);
    this.log.debug({ cluster: link.cluster, code }, "bad frame from upstream");
    link.send(
      encodeFrame({ family: F.CONTROL, kind: ControlKind.ERROR, requestId }, ProtocolErrorSchema, {
        code,
        message,
        frameFamily: family,
        frameKind: kind,
      }),
    );
  }

  private sendError(
    code: string,
    message: string,
    requestId: number,
    family = 0,
    kind = 0,
    cluster = "",
  ): void {
    if (this.closed) return;
    this.client.send(
      encodeFrame({ family: F.CONTROL, kind: ControlKind.ERROR, requestId }, ProtocolErrorSchema, {
        code,
        message,
        cluster,
        frameFamily: family,
        frameKind: kind,
      }),
    );
  }

  private allocConnId(): number {
    for (;;) {
      const id = this.nextConnId;
      this.nextConnId = this.nextConnId >= 0xffffffff ? 1 : this.nextConnId + 1;
      if (!this.conns.has(id)) return id;
    }
  }
}
