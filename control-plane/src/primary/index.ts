// Public surface of the Primary (see README.md): the cluster registry and the
// MultiClusterSession lifecycle.
export { ClusterRegistry } from "./cluster-registry.js";
export type { ClusterRegistryOptions } from "./cluster-registry.js";
export { SessionController } from "./session-controller.js";
export type { SessionControllerOptions } from "./session-controller.js";
export { SessionReconciler } from "./session-reconciler.js";
export type { SessionReconcilerOptions } from "./session-reconciler.js";
export { HeartbeatTracker } from "./heartbeat-tracker.js";
export type { HeartbeatTrackerOptions } from "./heartbeat-tracker.js";
export { registryWorkloadClusters } from "./workload-clusters.js";
export type { WorkloadCluster, WorkloadClusters, WorkloadClusterTopology } from "./workload-clusters.js";
export {
  childName,
  childSecretsName,
  childConnectParams,
  ownedChildrenSelector,
} from "./child-session-plan.js";
export { ChildOwnershipError, ChildSecretMissingError, ClusterUnavailableError } from "./session-errors.js";
export { SessionMetrics } from "./session-metrics.js";
export { buildSessionRoute } from "./session-route.js";
