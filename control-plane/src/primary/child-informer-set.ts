// One informer per workload cluster on the child ClusterSessions this Primary owns
// (label `switchyard.dev/primary=<id>`), kept in step with the configuration: a cluster
// added gets an informer, a removed one has its informer stopped, and a cluster whose
// client was replaced (new server or credentials) gets a fresh informer on the new client.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { clusterSessionCrd, type ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { customResourceInformer, type ResourceInformer } from "../runtime/index.js";
import { ownedChildrenSelector } from "./child-session-plan.js";
import type { WorkloadClusters } from "./workload-clusters.js";

export interface ChildInformerSetOptions {
  /** Every informer stops when this aborts. */
  signal: AbortSignal;
  resyncMs: number;
  logger?: Logger;
  /** Called on every add/update/delete of a child on any cluster. */
  onChild: (child: ClusterSession) => void;
  /**
   * Called when a cluster gets a (new) client: reachable for the first time since this set
   * started (a new leader's first check round), or again with new credentials.
   */
  onReachable?: (cluster: string) => void;
}

interface Running {
  informer: ResourceInformer<ClusterSession>;
  kubeConfig: KubeConfig;
  primaryClusterId: string;
  stop: AbortController;
  done: Promise<void>;
}

export class ChildInformerSet {
  private readonly running = new Map<string, Running>();
  /** Cluster → informer, for cache reads (live view; entries come and go with the configuration). */
  readonly informers = new Map<string, ResourceInformer<ClusterSession>>();
  private readonly finished: Promise<void>[] = [];

  constructor(private readonly options: ChildInformerSetOptions) {}

  /** Brings the informers in line with the current topology. Cheap when nothing changed. */
  sync(clusters: WorkloadClusters): void {
    if (this.options.signal.aborted) return;
    const topology = clusters.topology();
    if (!topology) return;
    const wanted = new Set(topology.clusters.map((c) => c.name));
    for (const [name, r] of this.running) {
      const kc = clusters.kubeConfig(name);
      if (!wanted.has(name) || kc !== r.kubeConfig || r.primaryClusterId !== topology.primaryClusterId) {
        this.options.logger?.info(
          { cluster: name },
          "stopping the child informer of a changed or removed cluster",
        );
        r.stop.abort();
        this.running.delete(name);
        this.informers.delete(name);
      }
    }
    for (const name of wanted) {
      if (this.running.has(name)) continue;
      const kubeConfig = clusters.kubeConfig(name);
      if (!kubeConfig) continue; // no client yet (broken credentials): retried on the next sync
      const informer = customResourceInformer<ClusterSession>(kubeConfig, clusterSessionCrd, {
        what: `clustersessions in cluster ${name}`,
        labelSelector: ownedChildrenSelector(topology.primaryClusterId),
        resyncMs: this.options.resyncMs,
        ...(this.options.logger ? { logger: this.options.logger } : {}),
      });
      informer.subscribe((_event, child) => this.options.onChild(child));
      const stop = new AbortController();
      const done = informer.start(AbortSignal.any([this.options.signal, stop.signal]));
      this.finished.push(done);
      this.running.set(name, {
        informer,
        kubeConfig,
        primaryClusterId: topology.primaryClusterId,
        stop,
        done,
      });
      this.informers.set(name, informer);
      this.options.onReachable?.(name);
    }
  }

  /** Resolves when every informer ever started has stopped (after the signal aborts). */
  async stopped(): Promise<void> {
    await Promise.all(this.finished);
  }
}
