// A Ready parent's routing table for the Primary's routers (DESIGN §2, §6): one upstream
// per ready child — its gateway URL and the per-child secret the router presents there —
// with the Default cluster's child marked, and every gateway marked `mux` (routers carry the
// sessions to one gateway on one shared connection, proto/mux.proto). Built from the parent's status (not from
// memory), so any leader rebuilds the same table. Its session id is the parent's key
// `<namespace>:<name>`: the URL clients connect to, and what no parent of another
// namespace can share.
import { create } from "@bufbuild/protobuf";
import {
  SessionRouteSchema,
  SessionState,
  UpstreamSchema,
  type SessionRoute,
} from "../../../proto/gen/route_discovery_pb.js";
import type { MultiClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import { ChildSecretMissingError } from "./session-errors.js";
import { childSecretsName } from "./child-session-plan.js";

export interface SessionRouteOptions {
  /** PEM CA bundle routers use to verify wss:// gateways (omitted: system roots). */
  gatewayCaPem?: string;
  /** Mark gateways `mux` (default true): routers share one connection per gateway. */
  gatewayMux?: boolean;
}

/**
 * The table of a parent that is routed: Ready, or Pending — a Ready session whose child went
 * back to not ready (an agent restarting, a readiness blip, a rollout) keeps its route with the
 * children that are still ready, so that connected clients stay attached and a client that
 * reconnects meanwhile is not told the session is gone; with no child ready the route is
 * CREATING (routers answer "retry"), and so it is while the Default child is not ready. Undefined (not routed) otherwise: Initializing, Failed,
 * being deleted.
 */
export function buildSessionRoute(
  parent: MultiClusterSession,
  childSecrets: Readonly<Record<string, string>>,
  options: SessionRouteOptions = {},
): SessionRoute | undefined {
  const phase = parent.status?.phase;
  if ((phase !== "Ready" && phase !== "Pending") || parent.metadata.deletionTimestamp) return undefined;
  const name = parent.metadata.name!;
  const upstreams = Object.entries(parent.status!.children ?? {})
    .filter(([, c]) => c.ready && c.gateway)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([cluster, c]) => {
      const secret = childSecrets[cluster];
      if (!secret)
        throw new ChildSecretMissingError(parent.metadata.namespace!, childSecretsName(name), cluster);
      return create(UpstreamSchema, {
        cluster,
        url: c.gateway!,
        secret,
        isDefault: c.defaultCluster === true,
        mux: options.gatewayMux !== false,
        ...(options.gatewayCaPem ? { caPem: options.gatewayCaPem } : {}),
      });
    });
  return create(SessionRouteSchema, {
    sessionId: sessionKey(parent.metadata.namespace!, name),
    clientKeyHash: parent.spec.clientKeyHash,
    // Routable only with the Default child: env, files, DNS and outgoing go nowhere else.
    // Until it is ready (another child may be first) the route says CREATING, never READY
    // without a default, which every route validator refuses.
    state: upstreams.some((u) => u.isDefault) ? SessionState.READY : SessionState.CREATING,
    upstreams,
  });
}
