// One session attached to this router: the client's WebSocket and one UpstreamLink per
// upstream in the route. This is the session's lifecycle and protocol face — the client's
// Hello, frame checks, links added, lost, returning or removed as the route changes,
// WebSocket pings and the client's liveness on the coarse sweep, close — while
// FrameRouting decides where each frame goes and SessionFlowControl keeps the session's
// memory bounded (a congested peer pauses the socket that feeds it; other sessions never
// wait for this one).
import type { Logger } from "pino";
import { PeerLiveness } from "../../../lib/peer-liveness.js";
import { ErrorCode, webSocketErrorCode } from "../../../proto/error-codes.js";
import {
  checkFrame,
  decodePayload,
  encodeFrame,
  FrameCheck,
  frameCheckError,
  KIND_TOWARD_CLIENT,
} from "../../../proto/frame-codec.js";
import type { FrameError } from "../../../proto/frame-errors.js";
import {
  negotiateVersion,
  PROTOCOL_VERSION_MAX,
  PROTOCOL_VERSION_MIN,
} from "../../../proto/frame-version.js";
import type { SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import {
  ControlKind,
  FrameFamily,
  HelloAckSchema,
  HelloSchema,
  UpstreamState,
} from "../../../proto/gen/session_pb.js";
import { ClientChannel } from "./client-channel.js";
import { FrameRouting, type RoutingLimits } from "./frame-routing.js";
import { metricsCluster, type RouterMetrics } from "./router-metrics.js";
import type { MuxPool } from "./mux-pool.js";
import { SessionFlowControl } from "./session-flow-control.js";
import type { SessionSocket } from "./session-socket.js";
import { UpstreamLink, type FlowLimits } from "./upstream-link.js";

/** Every limit of a session; `defaultLimits` in router-server.ts has the defaults. */
export interface SessionLimits extends RoutingLimits {
  flow: FlowLimits;
  /**
   * WebSocket ping interval on every upstream and the client. A peer silent for two of them
   * while the router reads it is dropped (see `sweep`). Milliseconds; default 30 000.
   */
  wsPingIntervalMs: number;
  /** First upstream reconnect delay and its cap. Milliseconds; default 250 → 10 000. */
  backoff: { initialMs: number; maxMs: number };
  /** Upstream WebSocket handshake timeout. Milliseconds; default 10 000. */
  connectTimeoutMs: number;
  /** Send unmasked frames upstream (trusted networks only). Default false. */
  unmasked: boolean;
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

export class RoutedSession {
  readonly id: string;
  private route: SessionRoute;
  private readonly client: ClientChannel;
  private readonly flow: SessionFlowControl;
  private readonly routing: FrameRouting;
  private helloDone = false;
  private clientLastPing = Date.now();
  /** Anything from the client counts: frames (its protocol pings), pings, pongs, drains of our writes. */
  private readonly clientLiveness: PeerLiveness;

  constructor(
    route: SessionRoute,
    ws: SessionSocket,
    private readonly limits: SessionLimits,
    private readonly metrics: RouterMetrics,
    private readonly log: Logger,
    private readonly onClosed: (s: RoutedSession) => void,
    /** Where `mux` upstreams get their channel; absent: every upstream gets its own WebSocket. */
    private readonly muxPool?: MuxPool,
  ) {
    this.id = route.sessionId;
    this.route = route;
    this.client = new ClientChannel(ws, metrics);
    const liveness = new PeerLiveness(2 * limits.wsPingIntervalMs);
    this.clientLiveness = liveness;
    this.flow = new SessionFlowControl(ws, limits.flow, metrics, liveness, () => this.clientTooSlow());
    this.routing = new FrameRouting(this.client, this.flow, limits, metrics, log);
    ws.on("message", (data: Buffer, isBinary) => {
      liveness.heard();
      this.fromClient(data, isBinary);
    });
    ws.on("pong", () => liveness.heard());
    // A client that cannot read us (its local program is slow) pings to say it is busy.
    ws.on("ping", () => liveness.heard());
    ws.on("close", () => this.dispose("client disconnected"));
    ws.on("error", (err) => {
      // ws closes the socket after a broken WebSocket frame (1002) or an over-long message (1009).
      const code = webSocketErrorCode(err);
      if (code) this.metrics.badFrame("client", code);
      this.log.info({ err: err.message, code }, "client socket error");
    });
    ws.on("drain", () => {
      liveness.heard();
      this.flow.clientDrained(this.routing.upstreams());
    });
    for (const u of route.upstreams) this.addLink(u);
  }

  get clientBufferedBytes(): number {
    return this.client.ws.bufferedAmount;
  }

  upstreamLinks(): IterableIterator<UpstreamLink> {
    return this.routing.upstreams();
  }

  /** Open incoming connections (for tests and debug). */
  get connectionCount(): number {
    return this.routing.connectionCount;
  }

  /** Open incoming connections owned by `link`. */
  connectionsOn(link: UpstreamLink): number {
    return this.routing.connectionsOn(link);
  }

  get clientKeyHash(): string {
    return this.route.clientKeyHash;
  }

  // ---------------------------------------------------------------- the client's frames

  /** Checks a client frame and the Hello handshake, then hands the frame to the routing. */
  private fromClient(data: Buffer, isBinary: boolean): void {
    if (this.client.closed) return;
    if (!isBinary) {
      this.metrics.badFrame("client", ErrorCode.FRAME_NOT_BINARY);
      this.client.error(
        ErrorCode.FRAME_NOT_BINARY,
        "text WebSocket messages are not frames; send binary messages",
      );
      return;
    }
    const check = checkFrame(data, this.limits.maxPayloadBytes);
    if (check !== FrameCheck.Ok)
      return this.client.badFrame(frameCheckError(check, data, this.limits.maxPayloadBytes));
    const family = data[0]!;
    const kind = data[1]!;
    if (family === F.CONTROL && kind === ControlKind.ERROR) {
      // A router in front of this one (router chains) reports a frame it refused. Answering
      // with another error would bounce it back; log and count instead.
      this.metrics.badFrame("client", ErrorCode.PEER_REPORTED_ERROR);
      this.log.warn({ requestId: data.readUInt32BE(4) }, "the client reported an error frame");
      return;
    }
    if (kind & KIND_TOWARD_CLIENT)
      return this.client.refuse(
        data,
        ErrorCode.FRAME_WRONG_DIRECTION,
        `kind ${kind} of family ${family} travels toward the client, not from it`,
      );
    const hello = family === F.CONTROL && kind === ControlKind.HELLO;
    if (!this.helloDone) {
      if (hello) return this.clientHello(data);
      return this.client.refuse(
        data,
        ErrorCode.HELLO_REQUIRED,
        "the first frame on a session must be a control Hello",
      );
    }
    if (hello)
      return this.client.refuse(
        data,
        ErrorCode.HELLO_REPEATED,
        "hello was already exchanged on this connection",
      );
    this.routing.fromClient(data);
  }

  private clientHello(data: Buffer): void {
    let hello;
    try {
      hello = decodePayload(data, HelloSchema);
    } catch (err) {
      return this.client.badFrame(err as FrameError);
    }
    const version = negotiateVersion(
      { min: PROTOCOL_VERSION_MIN, max: PROTOCOL_VERSION_MAX },
      { min: hello.minVersion, max: hello.maxVersion },
    );
    if (version === undefined) {
      this.metrics.badFrame("client", ErrorCode.PROTOCOL_VERSION_UNSUPPORTED);
      this.client.error(
        ErrorCode.PROTOCOL_VERSION_UNSUPPORTED,
        `client speaks protocol versions ${hello.minVersion}-${hello.maxVersion}, this router ${PROTOCOL_VERSION_MIN}-${PROTOCOL_VERSION_MAX}; upgrade the older side`,
        { requestId: data.readUInt32BE(4) },
      );
      this.client.ws.close(CloseCode.ProtocolError, "protocol version unsupported");
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
    for (const link of this.routing.upstreams()) {
      if (link.state === "open") this.client.upstreamStatus(link, UpstreamState.UP);
      else if (link.state === "down") this.client.upstreamStatus(link, UpstreamState.DOWN, link.lastError);
    }
  }

  private clientTooSlow(): void {
    this.log.warn({ buffered: this.client.ws.bufferedAmount }, "client does not read its frames; closing it");
    this.client.ws.close(CloseCode.TooSlow, "client too slow");
    this.dispose("client too slow");
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
        serverName: u.serverName,
        isDefault: u.isDefault,
        limits: this.limits.flow,
        maxPayloadBytes: this.limits.maxPayloadBytes,
        backoff: this.limits.backoff,
        connectTimeoutMs: this.limits.connectTimeoutMs,
        pingIntervalMs: this.limits.wsPingIntervalMs,
        unmasked: this.limits.unmasked,
        mux: u.mux,
        ...(this.muxPool ? { muxPool: this.muxPool } : {}),
        counters: this.metrics.clusterCounters(metricsCluster(u)),
        log: this.log,
      },
      {
        frame: (l, data, isBinary) => this.routing.fromUpstream(l, data, isBinary),
        up: (l, reconnected) => this.linkUp(l, reconnected),
        down: (l, error, retryInMs, unsent) => this.linkLost(l, error, retryInMs, unsent),
        drained: (l) => this.flow.upstreamDrained(l),
      },
    );
    this.routing.attach(link);
    link.connect();
  }

  private linkUp(link: UpstreamLink, reconnected: boolean): void {
    this.log.info({ cluster: link.cluster, reconnected }, "upstream link up");
    // A link that returns, or one added to the route mid-session (a replaced agent), gets
    // the session's subscriptions.
    this.routing.upstreamUp(link);
    if (this.helloDone) this.client.upstreamStatus(link, UpstreamState.UP);
  }

  /** The link is gone (for now): close its connections, stop waiting for it, tell the client. */
  private linkLost(link: UpstreamLink, error: string, retryInMs: number, unsent: Buffer[]): void {
    const closed = this.routing.upstreamLost(link, error);
    this.routing.unsent(link, unsent);
    this.flow.upstreamDrained(link);
    if (this.helloDone) this.client.upstreamStatus(link, UpstreamState.DOWN, error, retryInMs, closed);
  }

  /** The route changed in the table: reconcile the links (credentials checked by the registry). */
  updateRoute(route: SessionRoute): void {
    this.route = route;
    const wanted = new Map(route.upstreams.map((u) => [u.cluster, u]));
    for (const link of [...this.routing.upstreams()]) {
      const u = wanted.get(link.cluster);
      const o = link.opts;
      if (
        u &&
        u.url === o.url &&
        u.secret === o.secret &&
        u.caPem === o.caPem &&
        u.serverName === o.serverName &&
        u.isDefault === o.isDefault &&
        u.mux === o.mux
      )
        continue;
      link.close("upstream removed from the route");
      const closed = this.routing.detach(link, "upstream removed from the route");
      this.flow.upstreamRemoved(link);
      if (this.helloDone)
        this.client.upstreamStatus(link, UpstreamState.DOWN, "removed from the route", 0, closed);
    }
    for (const u of route.upstreams) if (!this.routing.upstream(u.cluster)) this.addLink(u);
    this.flow.resumeClientIfFree();
  }

  // ---------------------------------------------------------------- housekeeping

  /**
   * The router's coarse sweep: merge timeouts, WebSocket pings, liveness. The client is
   * dead once nothing came from it for two ping intervals while the router read it; while
   * the router does not read it (an upstream is congested) that silence does not count, up
   * to 10× (lib/peer-liveness.ts).
   */
  sweep(now: number): void {
    if (this.client.closed) return;
    this.routing.sweep(now);
    for (const link of this.routing.upstreams()) link.sweep(now);
    const liveness = this.clientLiveness;
    if (liveness.expired(now)) {
      this.log.info(
        { silentMs: liveness.allowedSilenceMs, paused: liveness.paused },
        "nothing came from the client (no pong, no frame); closing",
      );
      this.client.ws.terminate();
      this.dispose("client ping timeout");
      return;
    }
    if (now - this.clientLastPing >= this.limits.wsPingIntervalMs) {
      this.clientLastPing = now;
      this.client.ws.ping();
    }
  }

  /**
   * Closes the client (with `code`) and every upstream link. The session being removed
   * from the routing table ends it at the agents too; any other reason (shutdown, a newer
   * connection, credentials) may be followed by the client returning, so agents hold on.
   */
  close(code: number, reason: string): void {
    if (this.client.closed) return;
    this.client.ws.close(code, reason);
    this.dispose(reason, code === CloseCode.SessionRemoved ? reason : undefined);
  }

  private dispose(reason: string, farewell?: string): void {
    if (this.client.closed) return;
    this.client.closed = true;
    for (const link of this.routing.upstreams()) link.close(farewell);
    this.routing.clear();
    this.log.info({ reason }, "session detached");
    this.onClosed(this);
  }
}
