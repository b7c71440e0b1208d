// Errors of the session frame format. Each has a stable `code` that travels in
// ProtocolError frames and metrics labels, so peers and tests match on codes.

export type FrameErrorCode =
  | "SWITCHYARD_FRAME_TRUNCATED"
  | "SWITCHYARD_FRAME_OVERSIZED"
  | "SWITCHYARD_FRAME_BAD_LENGTH"
  | "SWITCHYARD_FRAME_RESERVED_BITS"
  | "SWITCHYARD_FRAME_UNKNOWN_FAMILY"
  | "SWITCHYARD_FRAME_UNKNOWN_KIND"
  | "SWITCHYARD_FRAME_BAD_PAYLOAD"
  | "SWITCHYARD_FRAME_NOT_BINARY";

/** A frame that cannot be accepted. Carries the offending header fields when they could be read. */
export class FrameError extends Error {
  override readonly name = "FrameError";
  constructor(
    readonly code: FrameErrorCode,
    message: string,
    readonly family = 0,
    readonly kind = 0,
    readonly requestId = 0,
  ) {
    super(message);
  }
}
