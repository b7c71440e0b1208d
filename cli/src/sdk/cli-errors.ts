// Errors of the CLI and SDK. Each has a stable `code` so the CLI, scripts (`-o json`) and
// tests match on codes; messages say what was wrong and what to do about it. The codes
// are the CLI's own (`SWITCHYARD_CLI_*`), catalogued once here; codes that crossed the
// wire from a router or agent are the protocol's (`proto/error-codes.ts`) and travel as
// a RemoteError's `remoteCode`.

export const CliErrorCode = {
  /** A flag, option or argument is wrong (the message names it). */
  INVALID_OPTION: "SWITCHYARD_CLI_INVALID_OPTION",
  /** `switchyard.json` (or the flags merged into it) does not validate. */
  CONFIG_INVALID: "SWITCHYARD_CLI_CONFIG_INVALID",
  KUBECONFIG: "SWITCHYARD_CLI_KUBECONFIG",
  /** The API server refused the user's credentials or RBAC denied the verb. */
  FORBIDDEN: "SWITCHYARD_CLI_FORBIDDEN",
  KUBE_API: "SWITCHYARD_CLI_KUBE_API",
  NOT_INSTALLED: "SWITCHYARD_CLI_NOT_INSTALLED",
  NO_ROUTER_ENDPOINT: "SWITCHYARD_CLI_NO_ROUTER_ENDPOINT",
  SESSION_FAILED: "SWITCHYARD_CLI_SESSION_FAILED",
  SESSION_TIMEOUT: "SWITCHYARD_CLI_SESSION_TIMEOUT",
  /** The session object or the router's route is gone (deleted or expired). */
  SESSION_NOT_FOUND: "SWITCHYARD_CLI_SESSION_NOT_FOUND",
  SESSION_UNAUTHORIZED: "SWITCHYARD_CLI_SESSION_UNAUTHORIZED",
  ROUTER_UNAVAILABLE: "SWITCHYARD_CLI_ROUTER_UNAVAILABLE",
  /** A database branch reported phase Failed (the message carries the branch's reason). */
  BRANCH_FAILED: "SWITCHYARD_CLI_BRANCH_FAILED",
  /** A database branch was not Ready within branchTimeoutSeconds. */
  BRANCH_TIMEOUT: "SWITCHYARD_CLI_BRANCH_TIMEOUT",
  /** A shared branch (same id) exists with another spec (the message names the field). */
  BRANCH_CONFLICT: "SWITCHYARD_CLI_BRANCH_CONFLICT",
  /** The named database branch does not exist (or was deleted while it was awaited). */
  BRANCH_NOT_FOUND: "SWITCHYARD_CLI_BRANCH_NOT_FOUND",
  /** A queue split of the session reported phase Failed (the message carries its reason). */
  QUEUE_SPLIT_FAILED: "SWITCHYARD_CLI_QUEUE_SPLIT_FAILED",
  /** The install does not advertise a feature the configuration asks for (e.g. SqsQueueSplitting). */
  FEATURE_UNAVAILABLE: "SWITCHYARD_CLI_FEATURE_UNAVAILABLE",
  /** Reconnecting gave up, or the session went away: whatever depends on it must stop. */
  SESSION_LOST: "SWITCHYARD_CLI_SESSION_LOST",
  DISCONNECTED: "SWITCHYARD_CLI_DISCONNECTED",
  REQUEST_TIMEOUT: "SWITCHYARD_CLI_REQUEST_TIMEOUT",
  /** A router or agent refused (see RemoteError.remoteCode). */
  REMOTE_ERROR: "SWITCHYARD_CLI_REMOTE_ERROR",
  PROTOCOL_VERSION: "SWITCHYARD_CLI_PROTOCOL_VERSION",
  CLOSED: "SWITCHYARD_CLI_CLOSED",
  UNEXPECTED: "SWITCHYARD_CLI_UNEXPECTED",
} as const;

export type CliErrorCode = (typeof CliErrorCode)[keyof typeof CliErrorCode];

export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    readonly code: CliErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** An error a remote peer (agent or router) reported in a ProtocolError frame or a result's error field. */
export class RemoteError extends CliError {
  constructor(
    readonly remoteCode: string,
    message: string,
    readonly cluster = "",
  ) {
    super(CliErrorCode.REMOTE_ERROR, message);
  }
}

/** True when `err` is a CliError with one of `codes`. */
export const hasCliCode = (err: unknown, ...codes: CliErrorCode[]): err is CliError =>
  err instanceof CliError && codes.includes(err.code);
