// Errors of the Primary's session lifecycle, each with a stable code. What they mean for
// the reconcile is a runtime error kind (child-sessions.ts classifies): a child owned by
// another parent or Primary is terminal for that child (recorded, never overwritten); an
// unreachable cluster is transient (retried with backoff). Invalid options are
// `OptionError`s (lib/option-error.ts).

/** A child with our name exists on a workload cluster but belongs to another parent or Primary. */
export class ChildOwnershipError extends Error {
  readonly code = "SWITCHYARD_CHILD_OWNED_ELSEWHERE";
  constructor(cluster: string, child: string, owner: string) {
    super(
      `child session ${child} on cluster ${cluster} already exists and belongs to ${owner}; ` +
        `delete it there or check that two Primaries do not share a cluster id`,
    );
    this.name = "ChildOwnershipError";
  }
}

/** A workload cluster has no usable client (not configured, broken credentials, or not loaded yet). */
export class ClusterUnavailableError extends Error {
  readonly code = "SWITCHYARD_CLUSTER_UNAVAILABLE";
  constructor(cluster: string, why: string) {
    super(`workload cluster ${cluster} is unavailable: ${why}; check the cluster registry status`);
    this.name = "ClusterUnavailableError";
  }
}

/** A Ready session's per-child secret Secret is missing or lacks a cluster's key. */
export class ChildSecretMissingError extends Error {
  readonly code = "SWITCHYARD_CHILD_SECRET_MISSING";
  constructor(namespace: string, secret: string, cluster: string) {
    super(
      `Secret ${namespace}/${secret} has no key for cluster ${cluster}; the session's routing table cannot ` +
        `be built. It is recreated on the next reconcile unless the session was created by another Primary`,
    );
    this.name = "ChildSecretMissingError";
  }
}
