// A Ready parent's routing table for the Primary's routers (DESIGN §2, §6): one upstream
// per ready child — its gateway URL and the per-child secret the router presents there —
// with the Default cluster's child marked. Built from the parent's status (not from
// memory), so any leader rebuilds the same table.
import { create } from "@bufbuild/protobuf";
import {
  SessionRouteSchema,
  SessionState,
  UpstreamSchema,
  type SessionRoute,
} from "../../../proto/gen/route_discovery_pb.js";
import type { MultiClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { ChildSecretMissingError } from "./session-errors.js";
import { childSecretsName } from "./child-session-plan.js";

export interface SessionRouteOptions {
  /** PEM CA bundle routers use to verify wss:// gateways (omitted: system roots). */
  gatewayCaPem?: string;
}

/** The table of a Ready parent, or undefined when the session must not be routed (not Ready). */
export function buildSessionRoute(
  parent: MultiClusterSession,
  childSecrets: Readonly<Record<string, string>>,
  options: SessionRouteOptions = {},
): SessionRoute | undefined {
  if (parent.status?.phase !== "Ready" || parent.metadata.deletionTimestamp) return undefined;
  const name = parent.metadata.name!;
  const upstreams = Object.entries(parent.status.children ?? {})
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
        ...(options.gatewayCaPem ? { caPem: options.gatewayCaPem } : {}),
      });
    });
  return create(SessionRouteSchema, {
    sessionId: name,
    clientKeyHash: parent.spec.clientKeyHash,
    state: SessionState.READY,
    upstreams,
  });
}
