// Prometheus metrics of the branch sync controller, on a per-instance Registry. Labels are
// bounded: the two branch kinds and the fixed results below — never a branch name or
// namespace. Counters are plain numbers published at scrape. Reconcile duration and errors
// come from the runtime's ControllerMetrics (controller="pgbranch-sync", "mysqlbranch-sync").
import { Counter, Histogram, Registry } from "prom-client";
import type { BranchKind } from "../../../../proto/api/v1alpha1/index.js";

/** What one sync step did (or why it could not). */
export const BRANCH_SYNC_RESULTS = [
  /** A copy was created on the Default cluster. */
  "created",
  /** A copy's spec (ttlSeconds) was updated from the Primary's CR. */
  "updated",
  /** The Primary's CR status or its credentials Secret was written from the copy. */
  "status",
  /** An object of that name on the Default cluster is not ours. */
  "conflict",
  /** The Default cluster did not answer or had no client. */
  "unreachable",
  /** The Default cluster refused a request. */
  "refused",
  /** A Primary CR was deleted: its copy was deleted. */
  "copy_deleted",
  /** A copy was deleted on the Default cluster (its TTL lapsed): the Primary's CR was deleted. */
  "primary_deleted",
] as const;
export type BranchSyncResult = (typeof BRANCH_SYNC_RESULTS)[number];

export class BranchSyncMetrics {
  readonly registry: Registry;
  private readonly counts = new Map<string, number>();
  private readonly ready: Histogram<"kind">;

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    const counts = this.counts;
    new Counter({
      name: "switchyard_branch_syncs_total",
      help:
        "Branch sync steps between the Primary and the Default cluster, by branch kind and result " +
        `(${BRANCH_SYNC_RESULTS.join(", ")}).`,
      labelNames: ["kind", "result"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [key, v] of counts) {
          const [kind, result] = key.split("/") as [string, string];
          this.inc({ kind, result }, v);
        }
      },
    });
    this.ready = new Histogram({
      name: "switchyard_branch_ready_seconds",
      help:
        "From when the sync controller first saw a new branch CR on the Primary (a watch delay after " +
        "its creation) to the Primary's CR becoming Ready, by branch kind.",
      labelNames: ["kind"],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers: [registry],
    });
  }

  count(kind: BranchKind, result: BranchSyncResult): void {
    const key = `${kind}/${result}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** How many steps of `kind` ended in `result` so far. */
  value(kind: BranchKind, result: BranchSyncResult): number {
    return this.counts.get(`${kind}/${result}`) ?? 0;
  }

  observeReady(kind: BranchKind, seconds: number): void {
    this.ready.observe({ kind }, seconds);
  }
}
