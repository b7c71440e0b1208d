// The routing core of one session (DESIGN §5), decided from the frame header alone. This
// class owns the session's routing state (routing-state.ts) and its upstream set; each
// direction is a module of its own: client → upstreams in client-frames.ts, upstreams →
// client in upstream-frames.ts. The session (routed-session.ts) owns the sockets' lifecycle
// and hands frames in here once the client said hello.
import type { Logger } from "pino";
import { DEFAULT_ONLY_FAMILIES } from "../../../proto/frame-catalog.js";
import { ErrorCode } from "../../../proto/error-codes.js";
import { encodeFrame } from "../../../proto/frame-codec.js";
import { FrameFamily, StreamCloseSchema, TrafficKind } from "../../../proto/gen/session_pb.js";
import { BroadcastsInFlight } from "./broadcasts-in-flight.js";
import type { ClientChannel } from "./client-channel.js";
import { mergedReply, routeFromClient } from "./client-frames.js";
import { ConnectionMap } from "./connection-map.js";
import type { RouterMetrics } from "./router-metrics.js";
import type { RoutingLimits, RoutingState } from "./routing-state.js";
import type { SessionFlowControl } from "./session-flow-control.js";
import { SubscriptionReplay } from "./subscription-replay.js";
import { routeFromUpstream } from "./upstream-frames.js";
import type { UpstreamLink } from "./upstream-link.js";

export type { RoutingLimits } from "./routing-state.js";

const F = FrameFamily;

export class FrameRouting {
  private readonly s: RoutingState;

  constructor(
    client: ClientChannel,
    flow: SessionFlowControl,
    limits: RoutingLimits,
    metrics: RouterMetrics,
    log: Logger,
  ) {
    this.s = {
      client,
      flow,
      limits,
      metrics,
      log,
      links: new Map(),
      defaultLink: undefined,
      conns: new ConnectionMap<UpstreamLink>(),
      subscriptions: new SubscriptionReplay<UpstreamLink>(),
      broadcasts: new BroadcastsInFlight(limits.mergeTimeoutMs, metrics, (m) => mergedReply(this.s, m)),
    };
  }

  // ---------------------------------------------------------------- the upstream set

  /** Adds `link` to the upstreams frames are routed to. */
  attach(link: UpstreamLink): void {
    this.s.links.set(link.cluster, link);
    if (link.isDefault) this.s.defaultLink = link;
  }

  /** Removes `link` from the route; returns how many of its connections were closed. */
  detach(link: UpstreamLink, error: string): number {
    this.s.links.delete(link.cluster);
    if (this.s.defaultLink === link) this.s.defaultLink = undefined;
    return this.upstreamLost(link, error);
  }

  upstreams(): IterableIterator<UpstreamLink> {
    return this.s.links.values();
  }

  upstream(cluster: string): UpstreamLink | undefined {
    return this.s.links.get(cluster);
  }

  /** Open incoming connections of the session. */
  get connectionCount(): number {
    return this.s.conns.size;
  }

  /** Open incoming connections owned by `link`. */
  connectionsOn(link: UpstreamLink): number {
    return this.s.conns.countOn(link);
  }

  /**
   * `link` is up (first time, reconnected, or added mid-session): give it the session's
   * subscriptions. (A subscription the client sent while this link was connecting may
   * arrive twice: renewing one's own subscription is idempotent at the agent.)
   */
  upstreamUp(link: UpstreamLink): void {
    for (const frame of this.s.subscriptions.replayFor(link)) link.send(frame);
  }

  /**
   * `link` is gone (for now): its connections are closed toward the client, broadcasts
   * stop waiting for it. Returns how many connections were closed.
   */
  upstreamLost(link: UpstreamLink, error: string): number {
    const closed = this.s.conns.dropUpstream(link);
    for (const id of closed)
      this.s.client.send(
        encodeFrame({ family: F.TRAFFIC, kind: TrafficKind.CLOSE, connectionId: id }, StreamCloseSchema, {
          error: `upstream ${link.cluster} lost: ${error}`,
        }),
      );
    this.s.subscriptions.forget(link);
    this.s.broadcasts.upstreamGone(link, error);
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
      this.s.client.error(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        `upstream ${link.cluster} did not come up (${link.lastError}); retry after its UpstreamStatus UP`,
        { requestId: data.readUInt32BE(4), family: data[0], kind: data[1], cluster: link.cluster },
      );
    }
  }

  /** The router's coarse sweep: completes broadcasts past the merge timeout. */
  sweep(now: number): void {
    this.s.broadcasts.sweep(now);
  }

  clear(): void {
    this.s.links.clear();
    this.s.conns.clear();
    this.s.broadcasts.clear();
    this.s.subscriptions.clear();
    this.s.flow.clear();
  }

  // ---------------------------------------------------------------- the two directions

  /** Routes a checked client frame (after hello) by its family (client-frames.ts). */
  fromClient(data: Buffer): void {
    routeFromClient(this.s, data);
  }

  /** Checks and relays a frame from `link` (upstream-frames.ts). */
  fromUpstream(link: UpstreamLink, data: Buffer, isBinary: boolean): void {
    routeFromUpstream(this.s, link, data, isBinary);
  }
}
