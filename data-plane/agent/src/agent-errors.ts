// Errors of the agent process. Each has a stable `code` that travels in ProtocolError
// frames and the errors metric, so peers and tests match on codes, not messages.

export type AgentErrorCode =
  | "SWITCHYARD_AGENT_CONFIG"
  | "SWITCHYARD_AGENT_SECRETS_FILE"
  | "SWITCHYARD_HELLO_REQUIRED"
  | "SWITCHYARD_PROTOCOL_VERSION_UNSUPPORTED"
  | "SWITCHYARD_FRAME_WRONG_DIRECTION"
  | "SWITCHYARD_UNKNOWN_CONNECTION"
  | "SWITCHYARD_CONNECTION_ID_IN_USE"
  | "SWITCHYARD_TOO_MANY_CONNECTIONS"
  | "SWITCHYARD_AGENT_NO_TARGET_POD"
  | "SWITCHYARD_PORT_NOT_SERVED"
  | "SWITCHYARD_SESSION_TOO_SLOW"
  | "SWITCHYARD_SESSION_CLOSED"
  | "SWITCHYARD_AGENT_INTERNAL";

export class AgentError extends Error {
  override readonly name = "AgentError";
  constructor(
    readonly code: AgentErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Every code the agent may count as an error: the `code` label of
 * switchyard_agent_errors_total only takes these values (anything else counts as "other"),
 * which keeps the label bounded whatever a peer sends.
 */
export const COUNTED_ERROR_CODES: ReadonlySet<string> = new Set([
  "SWITCHYARD_HELLO_REQUIRED",
  "SWITCHYARD_PROTOCOL_VERSION_UNSUPPORTED",
  "SWITCHYARD_FRAME_WRONG_DIRECTION",
  "SWITCHYARD_UNKNOWN_CONNECTION",
  "SWITCHYARD_CONNECTION_ID_IN_USE",
  "SWITCHYARD_TOO_MANY_CONNECTIONS",
  "SWITCHYARD_AGENT_NO_TARGET_POD",
  "SWITCHYARD_PORT_NOT_SERVED",
  "SWITCHYARD_SESSION_TOO_SLOW",
  "SWITCHYARD_SESSION_CLOSED",
  "SWITCHYARD_AGENT_INTERNAL",
  "SWITCHYARD_SUBSCRIPTION_CONFLICT",
  "SWITCHYARD_HTTP_FILTER_INVALID",
  "SWITCHYARD_FRAME_TRUNCATED",
  "SWITCHYARD_FRAME_OVERSIZED",
  "SWITCHYARD_FRAME_BAD_LENGTH",
  "SWITCHYARD_FRAME_RESERVED_BITS",
  "SWITCHYARD_FRAME_UNKNOWN_FAMILY",
  "SWITCHYARD_FRAME_UNKNOWN_KIND",
  "SWITCHYARD_FRAME_BAD_PAYLOAD",
  "SWITCHYARD_FRAME_NOT_BINARY",
  "SWITCHYARD_ENV_SOURCE_NOT_FOUND",
  "SWITCHYARD_ENV_KEY_NOT_FOUND",
  "SWITCHYARD_ENV_UNSUPPORTED",
  "SWITCHYARD_ENV_CONTAINER_NOT_FOUND",
  "auth_failed",
  "ping_timeout",
]);
