// What the Primary wants on each workload cluster for one parent: the child
// ClusterSession's name, labels and spec (DESIGN §3, §4). Pure: the reconciler diffs
// this against what it reads and the tests check it without a cluster.
//
// Parameter split: branch names and the SQS split config go to the Default cluster's
// child only (DESIGN §4 — the Default cluster owns branches and, by the same rule, we
// let only it split queues so a message is never consumed twice by two clusters'
// sessions); the map of temporary output queues and the feature flags go to every
// child. DESIGN §7 says the split config goes to every child; §4 wins here, and the
// choice is recorded in this folder's README.
import {
  LABELS,
  TTL_SECONDS_DEFAULT,
  type ClusterSession,
  type ClusterSessionSpec,
  type ConnectParams,
  type MultiClusterSession,
  type NewResource,
} from "../../../proto/api/v1alpha1/index.js";
import { hashSecret } from "../../../proto/session-auth.js";
import type { WorkloadCluster } from "./workload-clusters.js";

/** `mc-<16 hex>-<cluster>`: the CRD's CEL rule enforces the same. */
export function childName(parentName: string, cluster: string): string {
  return `${parentName}-${cluster}`;
}

/** The Secret on the Primary (parent's namespace) holding one secret per child, keyed by cluster. */
export function childSecretsName(parentName: string): string {
  return `${parentName}-child-secrets`;
}

export function childLabels(
  parentName: string,
  cluster: string,
  primaryClusterId: string,
): Record<string, string> {
  return { [LABELS.parent]: parentName, [LABELS.primary]: primaryClusterId, [LABELS.cluster]: cluster };
}

/** Label selector for every child this Primary owns on a cluster (what its child informers watch). */
export function ownedChildrenSelector(primaryClusterId: string): string {
  return `${LABELS.primary}=${primaryClusterId}`;
}

/** The connect parameters one child gets (see the module comment for the split). */
export function childConnectParams(
  parent: ConnectParams | undefined,
  isDefault: boolean,
): ConnectParams | undefined {
  if (!parent) return undefined;
  const out: ConnectParams = {};
  if (parent.featureFlags) out.featureFlags = parent.featureFlags;
  if (parent.outputQueues) out.outputQueues = parent.outputQueues;
  if (isDefault) {
    if (parent.databaseBranches) out.databaseBranches = parent.databaseBranches;
    if (parent.sqsSplit) out.sqsSplit = parent.sqsSplit;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

export function desiredChild(
  parent: MultiClusterSession,
  cluster: WorkloadCluster,
  primaryClusterId: string,
  childSecret: string,
): NewResource<ClusterSessionSpec> {
  const parentName = parent.metadata.name!;
  const connectParams = childConnectParams(parent.spec.connectParams, cluster.isDefault);
  return {
    metadata: {
      name: childName(parentName, cluster.name),
      namespace: parent.metadata.namespace!,
      labels: childLabels(parentName, cluster.name, primaryClusterId),
    },
    spec: {
      target: parent.spec.target,
      clientKeyHash: hashSecret(childSecret),
      ttlSeconds: parent.spec.ttlSeconds ?? TTL_SECONDS_DEFAULT,
      ...(connectParams ? { connectParams } : {}),
      parent: { name: parentName, cluster: cluster.name, primaryClusterId },
    },
  };
}

/** Why an existing child is not ours to manage, or undefined when it is. */
export function foreignOwner(
  child: ClusterSession,
  parentName: string,
  primaryClusterId: string,
): string | undefined {
  const p = child.spec.parent;
  if (!p) return "a single-cluster session (no spec.parent)";
  if (p.primaryClusterId !== primaryClusterId) return `Primary ${p.primaryClusterId}`;
  if (p.name !== parentName) return `parent ${p.name}`;
  return undefined;
}
