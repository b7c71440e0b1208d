// A deadline on one awaited call: a remote API server that accepts the connection but never
// answers must not stall the caller (a reconcile, a health check). The call itself is not
// cancelled — its answer, if it ever comes, is ignored — so use it where a late answer is
// harmless (reads, and writes that are re-checked on the next attempt).

export class DeadlineExceededError extends Error {
  readonly code = "SWITCHYARD_DEADLINE_EXCEEDED";
  constructor(readonly ms: number) {
    super(`no answer within ${ms} ms`);
    this.name = "DeadlineExceededError";
  }
}

/** `promise`, or a `DeadlineExceededError` after `ms` milliseconds, whichever comes first. */
export function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceededError(ms)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
