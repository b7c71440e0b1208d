// The sessions attached to this router, kept in step with the routing table: a session
// removed from the table loses its client and upstream sockets; a session whose client
// key or readiness changed drops its client (it must authenticate again); other route
// changes reconcile the session's upstream links in place. Also runs the router's one
// coarse sweep timer (merge timeouts, WebSocket pings) instead of per-frame timers.
import type { Logger } from "pino";
import type { SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import { SessionState } from "../../../proto/gen/route_discovery_pb.js";
import { CloseCode, RoutedSession, type SessionLimits } from "./routed-session.js";
import { metricsCluster, type RouterMetrics } from "./router-metrics.js";
import type { RouteChange, RoutingTable } from "./routing-table.js";
import type { MuxPool } from "./mux-pool.js";
import type { SessionSocket } from "./session-socket.js";

export class SessionRegistry {
  private readonly sessions = new Map<string, RoutedSession>();
  private readonly liveListeners = new Set<(ids: string[]) => void>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly table: RoutingTable,
    private readonly limits: SessionLimits,
    private readonly metrics: RouterMetrics,
    private readonly log: Logger,
    sweepIntervalMs = 1000,
    /** Shared connections to gateways for upstreams marked `mux`. */
    private readonly muxPool?: MuxPool,
  ) {
    this.unsubscribe = table.onChange((c) => this.tableChanged(c));
    this.sweepTimer = setInterval(() => this.sweep(), sweepIntervalMs);
    this.sweepTimer.unref();
  }

  /** Attaches an authenticated client; a previous client of the same session on this router is replaced. */
  attach(route: SessionRoute, ws: SessionSocket): RoutedSession {
    const previous = this.sessions.get(route.sessionId);
    if (previous) {
      this.metrics.event("client_replaced");
      previous.close(CloseCode.Replaced, "replaced by a newer connection");
    }
    const session = new RoutedSession(
      route,
      ws,
      this.limits,
      this.metrics,
      this.log.child({ session: route.sessionId }),
      (s) => {
        if (this.sessions.get(s.id) === s) {
          this.sessions.delete(s.id);
          this.notifyLive();
        }
      },
      this.muxPool,
    );
    this.sessions.set(route.sessionId, session);
    this.log.info({ session: route.sessionId }, "client attached");
    this.notifyLive();
    return session;
  }

  get(sessionId: string): RoutedSession | undefined {
    return this.sessions.get(sessionId);
  }

  get size(): number {
    return this.sessions.size;
  }

  values(): IterableIterator<RoutedSession> {
    return this.sessions.values();
  }

  /** Session ids with a live client, for the RouteDiscovery liveness report. */
  liveSessionIds(): string[] {
    return [...this.sessions.keys()].sort();
  }

  /** Called with the full live list whenever a client attaches or leaves. */
  onLiveSessionsChanged(listener: (ids: string[]) => void): () => void {
    this.liveListeners.add(listener);
    return () => this.liveListeners.delete(listener);
  }

  private notifyLive(): void {
    if (this.liveListeners.size === 0) return;
    const ids = this.liveSessionIds();
    for (const l of this.liveListeners) l(ids);
  }

  private tableChanged(change: RouteChange): void {
    const labels = new Set<string>();
    for (const route of this.table.all()) for (const u of route.upstreams) labels.add(metricsCluster(u));
    this.metrics.retainClusters(labels);
    for (const id of change.removed) {
      const s = this.sessions.get(id);
      if (!s) continue;
      this.metrics.event("session_removed");
      this.log.info({ session: id }, "session removed from the routing table; closing its sockets");
      s.close(CloseCode.SessionRemoved, "session removed");
    }
    for (const route of change.upserted) {
      const s = this.sessions.get(route.sessionId);
      if (!s) continue;
      if (route.clientKeyHash !== s.clientKeyHash)
        s.close(CloseCode.CredentialsChanged, "session credentials changed");
      else if (route.state !== SessionState.READY) s.close(CloseCode.SessionNotReady, "session is not ready");
      else s.updateRoute(route);
    }
  }

  private sweep(): void {
    const now = Date.now();
    for (const s of [...this.sessions.values()]) s.sweep(now);
  }

  /** Closes every session (router shutdown). */
  close(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
    this.unsubscribe();
    for (const s of [...this.sessions.values()]) s.close(CloseCode.RouterShutdown, "router shutting down");
    this.muxPool?.close();
  }
}
