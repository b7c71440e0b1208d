// Error classes of the RouteDiscovery server side. Each carries a stable `code` so callers
// and tests match on codes, never on message text. Invalid options are `OptionError`s
// (lib/option-error.ts).

/** A SessionRoute handed to the snapshot cache is inconsistent; nothing was published. */
export class RouteValidationError extends Error {
  readonly code = "SWITCHYARD_ROUTE_INVALID";
  constructor(
    readonly sessionId: string,
    message: string,
  ) {
    super(`routing table of session "${sessionId}" rejected: ${message}`);
    this.name = "RouteValidationError";
  }
}

/** Why a router was refused before any route was sent to it. */
export type RouterAuthFailure = "unauthenticated" | "permission_denied" | "unavailable";

/** A router could not be authenticated or is not allowed; mapped to a gRPC status. */
export class RouterAuthError extends Error {
  readonly code = "SWITCHYARD_ROUTER_AUTH_FAILED";
  constructor(
    readonly failure: RouterAuthFailure,
    message: string,
  ) {
    super(message);
    this.name = "RouterAuthError";
  }
}

/**
 * Ends one router stream with a gRPC status: a protocol violation, a refused router, or a
 * shutdown. `status` is a @grpc/grpc-js `status` code; the message becomes the status details.
 */
export class DiscoveryStreamError extends Error {
  readonly code = "SWITCHYARD_ROUTE_DISCOVERY_STREAM_ENDED";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "DiscoveryStreamError";
  }
}
