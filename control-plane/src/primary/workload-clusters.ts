// Which clusters get a child session, which one is Default, and how to reach each: the
// seam between the session reconciler and the cluster registry. The reconciler asks on
// every reconcile (the configuration may change while sessions run) and never keeps a
// client of its own.
import type { KubeConfig } from "@kubernetes/client-node";
import type { ClusterRegistry } from "./cluster-registry.js";

export interface WorkloadCluster {
  /** Cluster name (RFC 1123 label); part of the child's name. */
  name: string;
  /** This cluster answers stateful operations and gets the Default-only parameters. */
  isDefault: boolean;
}

export interface WorkloadClusterTopology {
  /** Cluster id of this Primary: written into every child's labels and spec.parent. */
  primaryClusterId: string;
  /** Every workload cluster (the Primary itself unless management-only), in name order. */
  clusters: readonly WorkloadCluster[];
}

export interface WorkloadClusters {
  /** The current topology, or undefined while the configuration is not loaded. */
  topology(): WorkloadClusterTopology | undefined;
  /** A KubeConfig whose requests reach `cluster` with current credentials; undefined = unreachable now. */
  kubeConfig(cluster: string): KubeConfig | undefined;
}

/** Workload clusters as the cluster registry configures them; the Primary is reached with its own config. */
export function registryWorkloadClusters(
  registry: ClusterRegistry,
  primaryKubeConfig: KubeConfig,
): WorkloadClusters {
  return {
    topology() {
      const c = registry.config();
      if (!c) return undefined;
      const names = c.enabled ? c.remotes.map((r) => r.name) : [];
      if (!c.managementOnly) names.push(c.clusterName);
      names.sort();
      return {
        primaryClusterId: c.clusterName,
        clusters: names.map((name) => ({ name, isDefault: name === c.defaultCluster })),
      };
    },
    kubeConfig(cluster) {
      const c = registry.config();
      if (c && cluster === c.clusterName) return primaryKubeConfig;
      return registry.client(cluster)?.kubeConfig;
    },
  };
}
