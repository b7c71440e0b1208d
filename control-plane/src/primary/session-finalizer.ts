// The finalizer of a MultiClusterSession (DESIGN §3): when a parent is deleted, every
// child listed in its *status* is deleted (never what memory remembers, so a leader that
// died between "create" and "record" leaves nothing behind), clusters that cannot be
// reached are retried with backoff while status shows what is pending, and only when
// every child is gone are the per-child secrets deleted and the finalizer released.
import type { Logger } from "pino";
import { apiStatus, describeApiError } from "../../../lib/api-error.js";
import {
  CHILDREN_FINALIZER,
  setConditions,
  type ChildSessionStatus,
  type MultiClusterSession,
} from "../../../proto/api/v1alpha1/index.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import type { RouteSnapshotCache } from "../route-discovery/index.js";
import { TransientReconcileError, withContext } from "../runtime/index.js";
import type { ChildSecretStore } from "./child-secrets.js";
import type { ChildSessions } from "./child-sessions.js";
import { writeParentStatus, type ParentClient } from "./parent-status-writer.js";
import type { WorkloadClusters } from "./workload-clusters.js";

export interface SessionFinalizerOptions {
  parents: ParentClient;
  children: ChildSessions;
  secrets: ChildSecretStore;
  clusters: WorkloadClusters;
  routes: RouteSnapshotCache | undefined;
  log: Logger;
  now: () => number;
}

/** Cleanup of one deleted parent, one step per call; throws a transient error while children remain. */
export class SessionFinalizer {
  constructor(private readonly o: SessionFinalizerOptions) {}

  async finalize(parent: MultiClusterSession): Promise<void> {
    const namespace = parent.metadata.namespace!;
    const name = parent.metadata.name!;
    this.o.routes?.remove(sessionKey(namespace, name));
    if (!(parent.metadata.finalizers ?? []).includes(CHILDREN_FINALIZER)) return;
    const primaryClusterId = this.o.clusters.topology()?.primaryClusterId;
    if (!primaryClusterId) throw new TransientReconcileError("the cluster configuration is not loaded yet");
    const owner = { parentName: name, primaryClusterId };
    const entries = Object.entries(parent.status?.children ?? {});
    const errors = new Map<string, string>();
    await Promise.all(
      entries.map(async ([cluster, entry]) => {
        try {
          await this.o.children.delete(cluster, namespace, entry.name, owner);
        } catch (err) {
          errors.set(
            cluster,
            `deleting child session ${entry.name} on cluster ${cluster}: ${describeApiError(err)}`,
          );
        }
      }),
    );
    const pending = entries.filter(([cluster]) => errors.has(cluster)).map(([cluster]) => cluster);
    if (parent.status?.phase !== "Terminating" || entries.length > 0) {
      await this.recordProgress(parent, entries, errors, pending);
    }
    if (pending.length > 0) {
      this.o.log.warn({ session: name, namespace, clusters: pending }, "child cleanup pending; retrying");
      throw new TransientReconcileError(pending.map((c) => errors.get(c)).join("; "));
    }
    await this.o.secrets.delete(namespace, name, parent.metadata.uid);
    if (!(await this.release(parent))) return;
    this.o.log.info(
      { session: name, namespace, children: entries.length },
      "children deleted; finalizer released",
    );
  }

  /** Deleted children leave status; the others show why they remain. A parent already gone is fine. */
  private async recordProgress(
    parent: MultiClusterSession,
    entries: [string, ChildSessionStatus][],
    errors: ReadonlyMap<string, string>,
    pending: string[],
  ): Promise<void> {
    const children: Record<string, ChildSessionStatus | null> = {};
    for (const [cluster, entry] of entries) {
      const error = errors.get(cluster);
      children[cluster] = error ? { ...entry, ready: false, error: error.slice(0, 1000) } : null;
    }
    const message =
      pending.length > 0 ? `waiting to delete children on ${pending.join(", ")}` : "children deleted";
    try {
      await writeParentStatus(this.o.parents, parent, {
        phase: "Terminating",
        children: children as Record<string, ChildSessionStatus>,
        conditions: setConditions(
          parent.status?.conditions,
          [{ type: "Ready", status: "False", reason: "Terminating", message }],
          new Date(this.o.now()),
          parent.metadata.generation,
        ).conditions,
      });
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
  }

  /** Removes our finalizer from the parent as it is now (other finalizers stay); false when it is gone. */
  private async release(parent: MultiClusterSession): Promise<boolean> {
    const ref = { namespace: parent.metadata.namespace!, name: parent.metadata.name! };
    const fresh = await this.o.parents.get(ref);
    if (!fresh) return false;
    try {
      await this.o.parents.patch(
        ref,
        {
          metadata: { finalizers: (fresh.metadata.finalizers ?? []).filter((f) => f !== CHILDREN_FINALIZER) },
        },
        { resourceVersion: fresh.metadata.resourceVersion! },
      );
      return true;
    } catch (err) {
      throw withContext(`failed to release the finalizer of session ${ref.namespace}/${ref.name}`, err);
    }
  }
}
