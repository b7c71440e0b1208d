// Which sessions have a live client right now, from the routers' live-session reports
// on their RouteDiscovery streams (DESIGN §4 step 6). Each report is a router's complete
// list and replaces its previous one; a router that stops reporting (stream gone, pod
// killed) stops counting after `staleAfterMs`, so a dead router never keeps a session
// alive. Memory only: losing it on failover costs at most one heartbeat interval, far
// less than any TTL. Reports carry routes' session ids, which are session keys
// `<namespace>:<name>`; sessions are asked about by namespace and name, so a client of a
// same-named session in another namespace never keeps this one alive.
import type { LiveSessionsReport } from "../route-discovery/index.js";
import { positive } from "../../../lib/option-error.js";
import { sessionKey } from "../../../proto/session-endpoint.js";

export interface HeartbeatTrackerOptions {
  /** A router's report counts this long after it arrived, ms (default 30 000; routers report every 5 s). */
  staleAfterMs?: number;
  /** Milliseconds since the epoch (tests move time). */
  now?: () => number;
}

export class HeartbeatTracker {
  private readonly staleAfterMs: number;
  private readonly now: () => number;
  private readonly routers = new Map<string, { at: number; sessions: ReadonlySet<string> }>();

  constructor(options: HeartbeatTrackerOptions = {}) {
    this.staleAfterMs = positive("heartbeat.staleAfterMs", options.staleAfterMs, 30_000);
    this.now = options.now ?? Date.now;
  }

  /** Feed from `RouteDiscoveryStreamServer.onLiveSessions`. */
  observe(report: Pick<LiveSessionsReport, "routerId" | "sessionIds">): void {
    this.routers.set(report.routerId, { at: this.now(), sessions: new Set(report.sessionIds) });
  }

  /** Session keys (`<namespace>:<name>`) with a live client on any router whose last report is fresh. */
  liveSessions(): Set<string> {
    const cutoff = this.now() - this.staleAfterMs;
    const out = new Set<string>();
    for (const [id, r] of this.routers) {
      if (r.at < cutoff) {
        this.routers.delete(id);
        continue;
      }
      for (const s of r.sessions) out.add(s);
    }
    return out;
  }

  /** Whether the session object `namespace`/`name` has a live client. */
  isLive(session: { namespace: string; name: string }): boolean {
    return this.liveSessions().has(sessionKey(session.namespace, session.name));
  }
}
