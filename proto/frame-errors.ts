// Errors of the session frame format. Each has a stable `code` that travels in
// ProtocolError frames and metrics labels, so peers and tests match on codes.

import type { ErrorCode } from "./error-codes.js";

/** The frame-format codes of the catalogue (error-codes.ts). */
export type FrameErrorCode = Extract<ErrorCode, `SWITCHYARD_FRAME_${string}`>;

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
