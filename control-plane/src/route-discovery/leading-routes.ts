// Routes are served by the leader only. A replica that stops leading (its Lease renewal
// failed, another replica took over) keeps running as a standby: it must stop serving at
// once, or the routers on its streams keep its last table and never learn the new leader's
// sessions (a session Ready on the member, refused 404 by its gateway routers for good).
import type { RouteSnapshotCache } from "./snapshot-cache.js";

/** What ends the routers' streams (RouteDiscoveryStreamServer.closeAll). */
export interface RouterStreams {
  closeAll(reason: string): void;
}

/**
 * When `leading` aborts: the table is forgotten and not ready (a router that reconnects here
 * is refused UNAVAILABLE and retries through the Service until it reaches the leader), and
 * every open stream ends so its router does that now.
 */
export function stopServingRoutesWhenLeadershipEnds(
  leading: AbortSignal,
  routes: RouteSnapshotCache,
  streams: RouterStreams,
): void {
  const stop = () => {
    routes.reset();
    streams.closeAll("this control-plane replica stopped leading; reconnect to reach the leader");
  };
  if (leading.aborted) stop();
  else leading.addEventListener("abort", stop, { once: true });
}
