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
