// Names every Switchyard custom resource shares: the API group and version, and the
// label and finalizer keys that tie objects to each other. Reconcilers, the CLI and
// the chart import these instead of spelling the strings again.

export const GROUP = "switchyard.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}` as const;

/** Category every Switchyard kind is listed under: `kubectl get switchyard`. */
export const CATEGORY = "switchyard";

/** Finalizer the Primary puts on a MultiClusterSession until every child is gone. */
export const CHILDREN_FINALIZER = `${GROUP}/children`;

/** Name of the cluster-scoped SwitchyardOperator singleton. */
export const OPERATOR_OBJECT_NAME = "operator";

/** Labels that tie a child ClusterSession to its parent and to the Primary that owns it. */
export const LABELS = {
  /** Parent MultiClusterSession name (`mc-<16 hex>`). */
  parent: `${GROUP}/parent`,
  /** Cluster id of the Primary that created the child (two Primaries never fight over objects). */
  primary: `${GROUP}/primary`,
  /** Name of the workload cluster the child lives in. */
  cluster: `${GROUP}/cluster`,
} as const;

/**
 * Finalizer the Primary's branch sync controller puts on a branch CR (PgBranchDatabase,
 * MysqlBranchDatabase) it copies to the Default cluster: released once the copy is gone.
 */
export const BRANCH_SYNC_FINALIZER = `${GROUP}/branch-sync`;

/**
 * Labels on a branch CR's copy in the Default cluster. A copy carries `LABELS.primary` (the
 * Primary's cluster id) and `primaryUid` (the uid of the CR it copies); an object of that name
 * without both, or with another uid, was not made by this sync and is never modified or deleted.
 */
export const BRANCH_SYNC_LABELS = {
  /** uid of the branch CR on the Primary that this copy mirrors. */
  primaryUid: `${GROUP}/primary-uid`,
} as const;

/**
 * Annotations on a branch CR on the Primary, recording its copy once created: the Default
 * cluster's name and the copy's uid. A recorded copy that is gone was deleted there (its TTL
 * lapsed), so the Primary's CR goes too; no record means the copy was not created yet.
 */
export const BRANCH_SYNC_ANNOTATIONS = {
  copyCluster: `${GROUP}/copy-cluster`,
  copyUid: `${GROUP}/copy-uid`,
} as const;
