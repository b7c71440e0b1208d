// Cluster names. Every cluster is known by an RFC 1123 label: it ends up in object names
// (child sessions `mc-<id>-<cluster>`, Secrets `switchyard-cluster-<cluster>`), label
// values and status map keys. EKS names cluster `^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`, so an
// eks cluster may be configured under its EKS name as AWS spells it (capitals, '_'): that
// name is what EKS tokens sign, and the label used everywhere else is derived from it —
// lowercased, '_' → '-', cut to 63 characters, trailing '-' dropped. A key that is already a
// label derives itself. Two keys deriving the same label are a configuration error (the
// validator's), never a silent merge. The chart's _validate.tpl derives it the same way.

/** RFC 1123 DNS label: cluster names end up in object names and label values. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** An EKS cluster name as the EKS API accepts it (CreateCluster `name`). */
export const EKS_CLUSTER_NAME = /^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$/;

/** The RFC 1123 label an EKS cluster name stands for in object names, labels and status. */
export function clusterLabelOf(eksClusterName: string): string {
  return eksClusterName.toLowerCase().replace(/_/g, "-").slice(0, 63).replace(/-+$/, "");
}
