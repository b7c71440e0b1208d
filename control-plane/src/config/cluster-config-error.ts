// Errors of the multi-cluster configuration. Each names the cluster (or "(global)"),
// the field, what was wrong and how to fix it, so an operator reading a crash-looping
// pod's log can fix values.yaml without reading our code.

export type ClusterConfigErrorCode =
  | "SWITCHYARD_CLUSTER_CONFIG_INVALID"
  | "SWITCHYARD_CLUSTER_CONFIG_MISSING"
  | "SWITCHYARD_CLUSTER_SECRET_INVALID";

/** Longest part of a written value an error quotes: a message lands in logs and status, never a whole document. */
export const QUOTED_VALUE_MAX = 80;
/** Longest field path, problem or fix an error carries (a backstop for lists of many keys). */
const PART_MAX = 600;

const cut = (s: string, max: number): string =>
  s.length > max ? `${s.slice(0, max)}… (${s.length} characters)` : s;

/** A written value as errors quote it: JSON-escaped (no raw newlines or terminal escapes), cut when long. */
export function quoted(value: unknown): string {
  const s = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  return JSON.stringify(s.length > QUOTED_VALUE_MAX ? `${s.slice(0, QUOTED_VALUE_MAX)}…` : s);
}

/** A map key as it appears in a field path (`clusters.<key>`), cut when long. */
export function keyInPath(key: string): string {
  return key.length > QUOTED_VALUE_MAX ? `${key.slice(0, QUOTED_VALUE_MAX)}…` : key;
}

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
    super(
      `${cluster ? `cluster ${quoted(cluster)}: ` : ""}${cut(field, PART_MAX)}: ${cut(problem, PART_MAX)}. ` +
        `Fix: ${cut(fix, PART_MAX)}`,
    );
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
