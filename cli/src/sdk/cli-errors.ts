// Errors of the CLI and SDK. Each has a stable `code` so the CLI, scripts (`-o json`) and
// tests match on codes; messages say what was wrong and what to do about it.

export type CliErrorCode =
  | "SWITCHYARD_CLI_INVALID_OPTION"
  | "SWITCHYARD_CLI_CONFIG_INVALID"
  | "SWITCHYARD_CLI_KUBECONFIG"
  | "SWITCHYARD_CLI_FORBIDDEN"
  | "SWITCHYARD_CLI_KUBE_API"
  | "SWITCHYARD_CLI_NOT_INSTALLED"
  | "SWITCHYARD_CLI_NO_ROUTER_ENDPOINT"
  | "SWITCHYARD_CLI_SESSION_FAILED"
  | "SWITCHYARD_CLI_SESSION_TIMEOUT"
  | "SWITCHYARD_CLI_SESSION_NOT_FOUND"
  | "SWITCHYARD_CLI_SESSION_UNAUTHORIZED"
  | "SWITCHYARD_CLI_ROUTER_UNAVAILABLE"
  | "SWITCHYARD_CLI_SESSION_LOST"
  | "SWITCHYARD_CLI_DISCONNECTED"
  | "SWITCHYARD_CLI_REQUEST_TIMEOUT"
  | "SWITCHYARD_CLI_REMOTE_ERROR"
  | "SWITCHYARD_CLI_PROTOCOL_VERSION"
  | "SWITCHYARD_CLI_CLOSED"
  | "SWITCHYARD_CLI_UNEXPECTED";

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
    super("SWITCHYARD_CLI_REMOTE_ERROR", message);
  }
}
