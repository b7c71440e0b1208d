// What the Primary wants on each workload cluster for one parent: the child
// ClusterSession's name, labels and spec (DESIGN §3, §4). Pure: the reconciler diffs
// this against what it reads and the tests check it without a cluster.
//
// Parameter split: branch names go to the Default cluster's child only (the Default
// cluster owns branches); the SQS split config goes to every child (each workload cluster
// splits its own copy of the queue, DESIGN §7), the Default child marked
// `spec.parent.defaultCluster` so that it makes the session's output queues; the map of
// those output queues (read from the Default child's status) goes to every other child,
// whose splitters send matching messages there; feature flags go to every child.
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
  outputQueues?: ConnectParams["outputQueues"],
): ConnectParams | undefined {
  if (!parent) return undefined;
  const out: ConnectParams = {};
  if (parent.featureFlags) out.featureFlags = parent.featureFlags;
  if (parent.releaseAgents) out.releaseAgents = true;
  if (parent.sqsSplit) out.sqsSplit = parent.sqsSplit;
  if (!isDefault && parent.sqsSplit && outputQueues && Object.keys(outputQueues).length > 0)
    out.outputQueues = outputQueues;
  if (isDefault && parent.databaseBranches) out.databaseBranches = parent.databaseBranches;
  return Object.keys(out).length > 0 ? out : undefined;
}

/** `{<default cluster>: {queueId: url}}` from the Default child's status.queues (undefined: none yet). */
export function outputQueuesOf(
  defaultCluster: string,
  child: ClusterSession | undefined,
): ConnectParams["outputQueues"] | undefined {
  const queues: Record<string, string> = {};
  for (const q of child?.status?.queues ?? []) if (q.outputQueueUrl) queues[q.queueId] = q.outputQueueUrl;
  return Object.keys(queues).length > 0 ? { [defaultCluster]: queues } : undefined;
}

export function desiredChild(
  parent: MultiClusterSession,
  cluster: WorkloadCluster,
  primaryClusterId: string,
  childSecret: string,
  outputQueues?: ConnectParams["outputQueues"],
): NewResource<ClusterSessionSpec> {
  const parentName = parent.metadata.name!;
  const connectParams = childConnectParams(parent.spec.connectParams, cluster.isDefault, outputQueues);
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
      parent: {
        name: parentName,
        cluster: cluster.name,
        primaryClusterId,
        ...(cluster.isDefault ? { defaultCluster: true } : {}),
      },
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
