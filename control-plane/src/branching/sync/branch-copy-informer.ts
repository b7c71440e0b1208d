// The watch on this Primary's branch copies in the Default cluster, for one branch kind
// (label-selected: `switchyard.dev/primary=<id>` with a `switchyard.dev/primary-uid`), kept in
// step with the configuration the way primary/child-informer-set.ts follows workload
// clusters: a new Default cluster, a replaced client (new server or credentials) or a new
// Primary id gets a fresh informer on the current client. Its events wake the Primary CR of
// the same namespace and name at once — that is what keeps "copy Ready → Primary Ready" fast.
// It is not part of the Controller's cache sync: an unreachable Default must not stop the
// reconciles that report it.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { BranchDatabase, CrdDefinition } from "../../../../proto/api/v1alpha1/index.js";
import type { WorkloadClusters } from "../../primary/workload-clusters.js";
import { customResourceInformer, type ResourceInformer } from "../../runtime/index.js";
import { copySelector } from "./branch-sync-plan.js";

/** The Default cluster as the sync sees it now. */
export interface DefaultTarget {
  /** The Default cluster's name. */
  cluster: string;
  /** This Primary's cluster id (the copies' `switchyard.dev/primary` label). */
  primaryClusterId: string;
  /** Its current client; undefined while it has none (broken credentials, not connected yet). */
  kubeConfig: KubeConfig | undefined;
}

/** The Default cluster of `clusters`; undefined while the configuration is not loaded or names none. */
export function defaultTarget(clusters: WorkloadClusters): DefaultTarget | undefined {
  const topology = clusters.topology();
  const cluster = topology?.clusters.find((c) => c.isDefault)?.name;
  if (!topology || !cluster) return undefined;
  return { cluster, primaryClusterId: topology.primaryClusterId, kubeConfig: clusters.kubeConfig(cluster) };
}

export interface BranchCopyInformerOptions {
  /** The branch kind's definition (plural, scope). */
  crd: Pick<CrdDefinition, "plural" | "scope" | "kind">;
  /** The informer stops when this aborts. */
  signal: AbortSignal;
  resyncMs: number;
  logger?: Logger;
  /** Every add/update/delete of a copy. */
  onCopy: (copy: BranchDatabase) => void;
  /** The Default cluster got a (new) client: every branch should be looked at now. */
  onReachable: () => void;
}

interface Running {
  informer: ResourceInformer<BranchDatabase>;
  target: DefaultTarget & { kubeConfig: KubeConfig };
  stop: AbortController;
}

export class BranchCopyInformer {
  private running: Running | undefined;
  private readonly finished: Promise<void>[] = [];

  constructor(private readonly options: BranchCopyInformerOptions) {}

  /** Brings the informer in line with the current Default cluster and client. Cheap when nothing changed. */
  sync(clusters: WorkloadClusters): void {
    if (this.options.signal.aborted) return;
    const target = defaultTarget(clusters);
    const r = this.running;
    if (
      r &&
      target?.kubeConfig === r.target.kubeConfig &&
      target.cluster === r.target.cluster &&
      target.primaryClusterId === r.target.primaryClusterId
    )
      return;
    if (r) {
      this.options.logger?.info(
        { cluster: r.target.cluster, kind: this.options.crd.kind },
        "stopping the branch copy informer of a changed Default cluster or client",
      );
      r.stop.abort();
      this.running = undefined;
    }
    if (!target?.kubeConfig || target.cluster === target.primaryClusterId) return;
    const informer = customResourceInformer<BranchDatabase>(target.kubeConfig, this.options.crd, {
      what: `${this.options.crd.plural} copied to cluster ${target.cluster}`,
      labelSelector: copySelector(target.primaryClusterId),
      resyncMs: this.options.resyncMs,
      ...(this.options.logger ? { logger: this.options.logger } : {}),
    });
    informer.subscribe((_event, copy) => this.options.onCopy(copy));
    const stop = new AbortController();
    this.finished.push(informer.start(AbortSignal.any([this.options.signal, stop.signal])));
    this.running = { informer, target: { ...target, kubeConfig: target.kubeConfig }, stop };
    this.options.onReachable();
  }

  /**
   * Our copy `namespace/name` from the watch cache when it serves `kubeConfig` and has listed:
   * the copy, or null when absent. Undefined when the cache cannot answer (then GET). A null
   * says nothing of objects that are not ours: the cache holds only labelled copies.
   */
  cached(kubeConfig: KubeConfig, namespace: string, name: string): BranchDatabase | null | undefined {
    const r = this.running;
    if (!r || r.target.kubeConfig !== kubeConfig || !r.informer.hasSynced) return undefined;
    return r.informer.get(name, namespace) ?? null;
  }

  /** Resolves when every informer ever started has stopped (after the signal aborts). */
  async stopped(): Promise<void> {
    await Promise.all(this.finished);
  }
}
