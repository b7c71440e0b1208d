// What a session object says about its start, in one shape for both kinds: phase, each
// cluster's readiness (a MultiClusterSession's status.children; a ClusterSession is its one
// cluster), the Ready condition's message, the single-cluster gateway, and its queue splits
// with the overlap warning (session-queues.ts). `describeProblems` names what holds it back.
import type {
  ClusterSession,
  MultiClusterSession,
  QueueSplitStatus,
} from "../../../../proto/api/v1alpha1/index.js";
import { overlapOf, queuesOf } from "./session-queues.js";

export interface ClusterProgress {
  cluster: string;
  ready: boolean;
  isDefault: boolean;
  error?: string;
}

export interface SessionProgress {
  phase: string;
  clusters: ClusterProgress[];
  /** The Ready condition's message while not ready. */
  message?: string;
  /** Single-cluster mode: the gateway router URL of the ClusterSession, once Ready. */
  gateway?: string;
  /** The session's queue splits (status.queues), when it has any. */
  queues?: QueueSplitStatus[];
  /** The QueueSplitOverlap condition's message while it is True. */
  overlap?: string;
}

function readyCondition(obj: { status?: { conditions?: Array<{ type: string; message: string }> } }) {
  return obj.status?.conditions?.find((c) => c.type === "Ready");
}

export function progressOfMulti(s: MultiClusterSession): SessionProgress {
  const clusters = Object.entries(s.status?.children ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([cluster, c]) => ({
      cluster,
      ready: c.ready,
      isDefault: c.defaultCluster === true,
      ...(c.error ? { error: c.error } : {}),
    }));
  const msg = readyCondition(s)?.message;
  return {
    phase: s.status?.phase ?? "Creating",
    clusters,
    ...(msg ? { message: msg } : {}),
    ...queuePart(s),
  };
}

/** The queue splits and overlap warning of a session object, when it has any. */
function queuePart(s: MultiClusterSession | ClusterSession): Pick<SessionProgress, "queues" | "overlap"> {
  const queues = queuesOf(s);
  const overlap = overlapOf(s);
  return { ...(queues.length ? { queues } : {}), ...(overlap ? { overlap } : {}) };
}

export function progressOfSingle(s: ClusterSession, clusterName: string): SessionProgress {
  const phase = s.status?.phase ?? "Creating";
  const msg = readyCondition(s)?.message;
  return {
    phase,
    clusters: [
      {
        cluster: clusterName,
        ready: phase === "Ready",
        isDefault: true,
        ...(phase !== "Ready" && msg ? { error: msg } : {}),
      },
    ],
    ...(msg ? { message: msg } : {}),
    ...(s.status?.gateway ? { gateway: s.status.gateway } : {}),
    ...queuePart(s),
  };
}

/** "west: target not found; east: not ready" — the clusters holding a session back. */
export function describeProblems(p: SessionProgress): string {
  return p.clusters
    .filter((c) => !c.ready)
    .map((c) => `${c.cluster}: ${c.error ?? "not ready yet"}`)
    .join("; ");
}
