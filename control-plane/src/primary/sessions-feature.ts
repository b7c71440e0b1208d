// The Primary as a feature of the control-plane process: the cluster registry (its
// configuration, remote credentials and health, on every replica, and the leader Lease it
// holds) and the MultiClusterSession controller, one leadership term at a time. It offers the
// registry to the features that need the configuration (branching) and to the process.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { SessionAllowListOptions } from "../allow-list/index.js";
import { ClusterRegistryMetrics } from "../metrics/cluster-registry-metrics.js";
import type { RouteSnapshotCache } from "../route-discovery/index.js";
import type { ControllerMetrics, Feature } from "../runtime/index.js";
import { ClusterRegistry } from "./cluster-registry.js";
import type { HeartbeatTracker } from "./heartbeat-tracker.js";
import { primaryFlags, type PrimaryOptions } from "./primary-options.js";
import { SessionController } from "./session-controller.js";
import { SessionMetrics } from "./session-metrics.js";
import { registryWorkloadClusters } from "./workload-clusters.js";

export interface SessionsNeeds {
  kubeConfig: KubeConfig;
  /** The control plane's namespace (ConfigMap, Secrets, Lease) and this replica's identity. */
  namespace: string;
  identity: string;
  /** Timings of the leader Lease the registry holds, ms. */
  lease: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  /** Called when this replica starts leading: the process's LeadershipTerms. */
  onStartedLeading: (leading: AbortSignal) => void;
  heartbeat: HeartbeatTracker;
  routes: RouteSnapshotCache;
  allowList: SessionAllowListOptions;
  registry: Registry;
  controllerMetrics: ControllerMetrics;
  logger: Logger;
}

export const sessionsFeature: Feature<PrimaryOptions, SessionsNeeds, { clusterRegistry: ClusterRegistry }> = {
  name: "cluster registry",
  runsIn: ["primary"],
  flags: primaryFlags,
  start(o, needs) {
    const { kubeConfig: kc, logger } = needs;
    const clusterRegistry = new ClusterRegistry({
      kubeConfig: kc,
      namespace: needs.namespace,
      identity: needs.identity,
      configMapName: o.configMap,
      checkIntervalMs: o.healthCheckIntervalMs,
      ...needs.lease,
      logger,
      metrics: new ClusterRegistryMetrics(needs.registry),
      onStartedLeading: needs.onStartedLeading,
    });
    const sessions = new SessionController({
      primaryKubeConfig: kc,
      clusters: registryWorkloadClusters(clusterRegistry, kc),
      heartbeat: needs.heartbeat,
      routes: needs.routes,
      ...(o.gatewayCaPem ? { gatewayCaPem: o.gatewayCaPem } : {}),
      allowList: needs.allowList,
      logger,
      metrics: new SessionMetrics(needs.registry),
      controllerMetrics: needs.controllerMetrics,
    });
    return {
      clusterRegistry,
      serve: (signal) => clusterRegistry.start(signal),
      lead: (leading) => sessions.start(leading),
    };
  },
};
