// Errors of the multi-cluster configuration. Each names the cluster (or "(global)"),
// the field, what was wrong and how to fix it, so an operator reading a crash-looping
// pod's log can fix values.yaml without reading our code.

export type ClusterConfigErrorCode =
  | "SWITCHYARD_CLUSTER_CONFIG_INVALID"
  | "SWITCHYARD_CLUSTER_CONFIG_MISSING"
  | "SWITCHYARD_CLUSTER_SECRET_INVALID";

export class ClusterConfigError extends Error {
  override readonly name = "ClusterConfigError";
  constructor(
    readonly code: ClusterConfigErrorCode,
    /** The cluster the problem is about, or undefined for a top-level field. */
    readonly cluster: string | undefined,
    /** Dotted path of the offending field, e.g. `clusters.east.authType` or `tls.key`. */
    readonly field: string,
    readonly problem: string,
    readonly fix: string,
  ) {
    super(`${cluster ? `cluster "${cluster}": ` : ""}${field}: ${problem}. Fix: ${fix}`);
  }
}

/** Several problems found at once; `errors` holds each, the message lists them all. */
export class ClusterConfigErrors extends Error {
  override readonly name = "ClusterConfigErrors";
  readonly code = "SWITCHYARD_CLUSTER_CONFIG_INVALID";
  constructor(readonly errors: readonly ClusterConfigError[]) {
    super(
      `multi-cluster configuration is invalid (${errors.length} problem${errors.length === 1 ? "" : "s"}):\n` +
        errors.map((e) => `  - ${e.message}`).join("\n"),
    );
  }
}

/** `snapshot()` was called before `load()` succeeded: a wiring mistake, not a bad configuration. */
export class ClusterConfigNotLoadedError extends Error {
  override readonly name = "ClusterConfigNotLoadedError";
  readonly code = "SWITCHYARD_CLUSTER_CONFIG_NOT_LOADED";
  constructor() {
    super("the cluster configuration is not loaded: call load() and wait for it before snapshot()");
  }
}
