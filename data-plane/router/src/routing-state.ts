// What the routing of one session's frames shares between its two directions
// (client-frames.ts, upstream-frames.ts): the upstream set, the connection map, the
// subscriptions replayed and the broadcasts in flight. FrameRouting (frame-routing.ts) owns it.
import type { Logger } from "pino";
import type { BroadcastsInFlight } from "./broadcasts-in-flight.js";
import type { ClientChannel } from "./client-channel.js";
import type { ConnectionMap } from "./connection-map.js";
import type { RouterMetrics } from "./router-metrics.js";
import type { SessionFlowControl } from "./session-flow-control.js";
import type { SubscriptionReplay } from "./subscription-replay.js";
import type { UpstreamLink } from "./upstream-link.js";

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

export interface RoutingState {
  readonly client: ClientChannel;
  readonly flow: SessionFlowControl;
  readonly limits: RoutingLimits;
  readonly metrics: RouterMetrics;
  readonly log: Logger;
  /** The session's upstreams by cluster. */
  readonly links: Map<string, UpstreamLink>;
  /** The upstream that answers env, file, DNS and outgoing frames. */
  defaultLink: UpstreamLink | undefined;
  readonly conns: ConnectionMap<UpstreamLink>;
  readonly subscriptions: SubscriptionReplay<UpstreamLink>;
  readonly broadcasts: BroadcastsInFlight;
}
