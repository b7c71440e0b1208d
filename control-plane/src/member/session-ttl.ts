// When a ClusterSession expires without renewal: the member deletes it itself then (a member
// whose Primary vanished cleans up on its own).
import { TTL_SECONDS_DEFAULT, type ClusterSession } from "../../../proto/api/v1alpha1/index.js";

/** When the session expires: ttlSeconds after status.renewedAt, or after creation when never renewed. */
export function ttlDeadline(session: ClusterSession): number {
  const ttl = (session.spec.ttlSeconds ?? TTL_SECONDS_DEFAULT) * 1000;
  const renewed = Date.parse(session.status?.renewedAt ?? "");
  const created = new Date(session.metadata.creationTimestamp ?? 0).getTime();
  return (Number.isFinite(renewed) ? Math.max(renewed, created) : created) + ttl;
}
