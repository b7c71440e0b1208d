// What the queue split controller writes on a ClusterSession: its finalizer (held until the
// session's output queues are drained back and deleted), `status.queues` (this cluster's
// part of each split) and the `QueueSplitOverlap` condition (told at admission, DESIGN §7).
// Every write carries the resourceVersion it read, so it never overwrites the member
// reconciler's concurrent status write: the loser's reconcile runs again.
import {
  clusterSessionClient,
  GROUP,
  setConditions,
  type ClusterSession,
  type ConditionUpdate,
  type QueueSplitStatus,
} from "../../../proto/api/v1alpha1/index.js";
import type { KubeConfig } from "@kubernetes/client-node";

/** Held on a session with splits until its output queues are drained back and deleted. */
export const QUEUE_SPLIT_FINALIZER = `${GROUP}/queue-split`;

export const OVERLAP_CONDITION = "QueueSplitOverlap";

export class QueueSplitStatusWriter {
  readonly #client;
  readonly #now: () => number;

  constructor(kc: KubeConfig, now: () => number = Date.now) {
    this.#client = clusterSessionClient(kc);
    this.#now = now;
  }

  static ref(s: ClusterSession) {
    return { namespace: s.metadata.namespace!, name: s.metadata.name! };
  }

  /** Adds the finalizer; returns the updated session (or the same when it had it). */
  async holdFinalizer(s: ClusterSession): Promise<ClusterSession> {
    const finalizers = s.metadata.finalizers ?? [];
    if (finalizers.includes(QUEUE_SPLIT_FINALIZER) || s.metadata.deletionTimestamp) return s;
    return this.#client.patch(
      QueueSplitStatusWriter.ref(s),
      { metadata: { finalizers: [...finalizers, QUEUE_SPLIT_FINALIZER] } },
      { resourceVersion: s.metadata.resourceVersion },
    );
  }

  async releaseFinalizer(s: ClusterSession): Promise<void> {
    const finalizers = s.metadata.finalizers ?? [];
    if (!finalizers.includes(QUEUE_SPLIT_FINALIZER)) return;
    await this.#client.patch(
      QueueSplitStatusWriter.ref(s),
      { metadata: { finalizers: finalizers.filter((f) => f !== QUEUE_SPLIT_FINALIZER) } },
      { resourceVersion: s.metadata.resourceVersion },
    );
  }

  /** Writes `queues` and the overlap condition when they differ from what the session shows. */
  async write(s: ClusterSession, queues: QueueSplitStatus[], overlap: string | undefined): Promise<void> {
    const st = s.status ?? {};
    const update: ConditionUpdate = overlap
      ? { type: OVERLAP_CONDITION, status: "True", reason: "FiltersOverlap", message: overlap }
      : {
          type: OVERLAP_CONDITION,
          status: "False",
          reason: "NoOverlap",
          message: "no earlier session's filter can take this session's messages",
        };
    const conditions = setConditions(st.conditions, [update], new Date(this.#now()), s.metadata.generation);
    if (!conditions.changed && JSON.stringify(st.queues ?? []) === JSON.stringify(queues)) return;
    await this.#client.patchStatus(
      QueueSplitStatusWriter.ref(s),
      { queues, conditions: conditions.conditions },
      { resourceVersion: s.metadata.resourceVersion },
    );
  }
}
