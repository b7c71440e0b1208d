// How many sessions this control plane serves, for SwitchyardOperator `status.sessions`.
// A session is live while it exists, is not being deleted and has not Failed (a Failed one
// only waits for its TTL or a fix; one being deleted is on its way out): `Initializing`,
// `Pending`, `Ready`, or no phase yet. Counted from watch caches, never by listing:
//   multiClusterSessions — MultiClusterSessions on this cluster, when it orchestrates
//                          (primary, both); an informer of our own, run per leadership term;
//   clusterSessions      — ClusterSessions on this cluster, when a member serves them
//                          (member, both): children of any Primary and single-cluster
//                          sessions, read from the member controller's informer.
// A kind this process does not serve counts 0. Counts are unknown until every cache synced.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import {
  multiClusterSessionCrd,
  type ClusterSession,
  type MultiClusterSession,
} from "../../proto/api/v1alpha1/index.js";
import { customResourceInformer, type ResourceInformer } from "./runtime/index.js";

export interface SessionCounts {
  multiClusterSessions: number;
  clusterSessions: number;
}

/** What the counts read: a synced cache of one kind. */
export interface SessionCache<T> {
  readonly hasSynced: boolean;
  list(): readonly T[];
}

type Session = Pick<MultiClusterSession | ClusterSession, "metadata" | "status">;

/** Not being deleted, not Failed or Terminating. */
export function isLiveSession(s: Session): boolean {
  const phase = s.status?.phase;
  return !s.metadata?.deletionTimestamp && phase !== "Failed" && phase !== "Terminating";
}

export interface LiveSessionCountsOptions {
  kubeConfig: KubeConfig;
  /** Count MultiClusterSessions (this process orchestrates: primary or both). */
  parents: boolean;
  /** The member controller's ClusterSession cache (member or both); omit when no member runs. */
  children?: SessionCache<ClusterSession>;
  logger?: Logger;
}

export class LiveSessionCounts {
  private parents: ResourceInformer<MultiClusterSession> | undefined;

  constructor(private readonly options: LiveSessionCountsOptions) {}

  /** Watches MultiClusterSessions (when counted) until `signal` aborts: one leadership term. */
  async start(signal: AbortSignal): Promise<void> {
    if (!this.options.parents) return;
    const informer = customResourceInformer<MultiClusterSession>(
      this.options.kubeConfig,
      multiClusterSessionCrd,
      {
        what: "multiclustersessions (session counts)",
        resyncMs: 0,
        ...(this.options.logger ? { logger: this.options.logger } : {}),
      },
    );
    this.parents = informer;
    try {
      await informer.start(signal);
    } finally {
      if (this.parents === informer) this.parents = undefined;
    }
  }

  /** The counts now; undefined until every cache counted has synced. */
  counts(): SessionCounts | undefined {
    const live = (cache: SessionCache<Session> | undefined): number | undefined =>
      cache === undefined ? 0 : cache.hasSynced ? cache.list().filter(isLiveSession).length : undefined;
    const parents = this.options.parents ? live(this.parents ?? { hasSynced: false, list: () => [] }) : 0;
    const children = live(this.options.children);
    if (parents === undefined || children === undefined) return undefined;
    return { multiClusterSessions: parents, clusterSessions: children };
  }
}
