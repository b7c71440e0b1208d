// Errors the agent answers on the wire. Each carries a catalogue code (proto/error-codes.ts)
// that travels in ProtocolError frames, subscription results and the errors metric, so
// peers and tests match on codes, not messages. Invalid options and flags are
// `OptionError`s (lib/option-error.ts); a bad secrets file is a `SecretsFileError`.
import { ErrorCode } from "../../../proto/error-codes.js";

export type AgentErrorCode = typeof ErrorCode.AGENT_NO_TARGET_POD | typeof ErrorCode.PORT_NOT_SERVED;

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
  ErrorCode.HELLO_REQUIRED,
  ErrorCode.PROTOCOL_VERSION_UNSUPPORTED,
  ErrorCode.FRAME_WRONG_DIRECTION,
  ErrorCode.UNKNOWN_CONNECTION,
  ErrorCode.CONNECTION_ID_IN_USE,
  ErrorCode.TOO_MANY_CONNECTIONS,
  ErrorCode.AGENT_NO_TARGET_POD,
  ErrorCode.PORT_NOT_SERVED,
  ErrorCode.SESSION_TOO_SLOW,
  ErrorCode.SESSION_CLOSED,
  ErrorCode.AGENT_INTERNAL,
  ErrorCode.SUBSCRIPTION_CONFLICT,
  ErrorCode.HTTP_FILTER_INVALID,
  ErrorCode.FRAME_TRUNCATED,
  ErrorCode.FRAME_OVERSIZED,
  ErrorCode.FRAME_BAD_LENGTH,
  ErrorCode.FRAME_RESERVED_BITS,
  ErrorCode.FRAME_UNKNOWN_FAMILY,
  ErrorCode.FRAME_UNKNOWN_KIND,
  ErrorCode.FRAME_BAD_PAYLOAD,
  ErrorCode.FRAME_NOT_BINARY,
  ErrorCode.FRAME_BAD_WEBSOCKET,
  ErrorCode.ENV_SOURCE_NOT_FOUND,
  ErrorCode.ENV_KEY_NOT_FOUND,
  ErrorCode.ENV_UNSUPPORTED,
  ErrorCode.ENV_CONTAINER_NOT_FOUND,
  ErrorCode.ENV_UNAVAILABLE,
  ErrorCode.FILE_NOT_FOUND,
  ErrorCode.FILE_NOT_AVAILABLE,
  ErrorCode.FILE_NOT_DIRECTORY,
  ErrorCode.FILE_IS_DIRECTORY,
  "auth_failed",
  "ping_timeout",
]);
