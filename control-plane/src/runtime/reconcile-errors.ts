// The kinds of failure a reconcile can end in, and how the controller treats each:
// transient → retried with per-key exponential backoff; terminal → recorded (the
// reconciler's onTerminalError writes a condition) and not retried until the object
// changes; conflict → the object moved under us, re-read and retry at once. Anything
// not classified is transient, except an API 409 which is a conflict.
import { ApiException } from "@kubernetes/client-node";

export type ReconcileErrorKind = "transient" | "terminal" | "conflict";

export abstract class ReconcileError extends Error {
  abstract readonly kind: ReconcileErrorKind;
  abstract readonly code: string;
}

/** Worth retrying later: an unreachable API server, a 5xx, a missing dependency that may appear. */
export class TransientReconcileError extends ReconcileError {
  readonly kind = "transient";
  readonly code = "SWITCHYARD_RECONCILE_TRANSIENT";
  /** Overrides the backoff delay for this failure (ms), e.g. from a Retry-After. */
  readonly retryAfterMs: number | undefined;
  constructor(message: string, options: { cause?: unknown; retryAfterMs?: number } = {}) {
    super(message, { cause: options.cause });
    this.name = "TransientReconcileError";
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** Retrying cannot help until someone changes the object (bad spec, refused target). */
export class TerminalReconcileError extends ReconcileError {
  readonly kind = "terminal";
  readonly code = "SWITCHYARD_RECONCILE_TERMINAL";
  /** CamelCase condition reason the reconciler records, e.g. "InvalidTarget". */
  readonly reason: string;
  constructor(reason: string, message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "TerminalReconcileError";
    this.reason = reason;
  }
}

/** An optimistic-concurrency conflict: the read was stale; re-read and retry at once. */
export class ConflictReconcileError extends ReconcileError {
  readonly kind = "conflict";
  readonly code = "SWITCHYARD_RECONCILE_CONFLICT";
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "ConflictReconcileError";
  }
}

/** Kind of any thrown value: our classes say it; a Kubernetes 409 is a conflict; the rest is transient. */
export function reconcileErrorKind(err: unknown): ReconcileErrorKind {
  if (err instanceof ReconcileError) return err.kind;
  if (err instanceof ApiException && err.code === 409) return "conflict";
  const cause = err instanceof Error ? err.cause : undefined;
  if (cause !== undefined && cause !== err) {
    if (cause instanceof ReconcileError) return cause.kind;
    if (cause instanceof ApiException && cause.code === 409) return "conflict";
  }
  return "transient";
}

/** Wraps `err` with context (`failed to patch deployment x: …`) keeping its kind. */
export function withContext(context: string, err: unknown): ReconcileError {
  const detail = err instanceof Error ? err.message : String(err);
  const message = `${context}: ${detail}`;
  switch (reconcileErrorKind(err)) {
    case "terminal":
      return new TerminalReconcileError(
        err instanceof TerminalReconcileError ? err.reason : "ReconcileFailed",
        message,
        { cause: err },
      );
    case "conflict":
      return new ConflictReconcileError(message, { cause: err });
    default:
      return new TransientReconcileError(message, {
        cause: err,
        retryAfterMs: err instanceof TransientReconcileError ? err.retryAfterMs : undefined,
      });
  }
}
