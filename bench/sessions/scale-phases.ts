// Where a session's create → Ready goes, for the scale benchmark: one watch per workload
// cluster on its ClusterSessions (the children the Primary creates) records when this process
// first saw each child and when it first saw it Ready. With the create call's start and the
// parent seen Ready (KubeSessions.waitReady), a session's time splits into three parts that
// add up to it: the Primary creating the children (create → last child seen), the members
// making them Ready (→ last child Ready, agents included) and the Primary mirroring that onto
// the parent (→ parent Ready).
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import { API_VERSION, LABELS, type ClusterSession } from "../../proto/api/v1alpha1/index.js";

interface ChildSeen {
  seenAt: number;
  readyAt?: number;
}

export interface SessionPhases {
  childrenCreatedMs: number;
  childrenReadyMs: number;
  parentReadyMs: number;
}

export class ChildWatch {
  /** parent name → cluster → when its child was seen, and seen Ready. */
  readonly #children = new Map<string, Map<string, ChildSeen>>();
  readonly #controllers: AbortController[] = [];
  #stopped = false;

  constructor(clusters: Record<string, KubeConfig>) {
    for (const [name, kc] of Object.entries(clusters)) this.#watch(name, kc);
  }

  #watch(cluster: string, kc: KubeConfig): void {
    if (this.#stopped) return;
    const again = () => setTimeout(() => this.#watch(cluster, kc), 200);
    new Watch(kc)
      .watch(
        `/apis/${API_VERSION}/clustersessions`,
        { allowWatchBookmarks: false },
        (type, obj: ClusterSession) => {
          if (type !== "ADDED" && type !== "MODIFIED") return;
          const parent = obj.metadata.labels?.[LABELS.parent];
          if (!parent) return;
          const t = performance.now();
          const byCluster = this.#children.get(parent) ?? new Map<string, ChildSeen>();
          this.#children.set(parent, byCluster);
          const seen = byCluster.get(cluster) ?? { seenAt: t };
          byCluster.set(cluster, seen);
          if (seen.readyAt === undefined && obj.status?.phase === "Ready") seen.readyAt = t;
        },
        () => void (this.#stopped || again()),
      )
      .then(
        (c) => (this.#stopped ? c.abort() : this.#controllers.push(c)),
        () => void (this.#stopped || again()),
      );
  }

  /** The three parts of `parent`'s create (at `startAt`) → Ready (at `readyAt`), or undefined when a child was missed. */
  phases(parent: string, startAt: number, readyAt: number, clusters: number): SessionPhases | undefined {
    const seen = [...(this.#children.get(parent)?.values() ?? [])];
    if (seen.length < clusters || seen.some((s) => s.readyAt === undefined)) return undefined;
    const created = Math.max(...seen.map((s) => s.seenAt));
    const ready = Math.max(...seen.map((s) => s.readyAt!));
    return {
      childrenCreatedMs: created - startAt,
      childrenReadyMs: ready - created,
      parentReadyMs: readyAt - ready,
    };
  }

  stop(): void {
    this.#stopped = true;
    for (const c of this.#controllers.splice(0)) c.abort();
  }
}
