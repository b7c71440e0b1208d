// Reconnect policy for a lost router connection: attempts after 1, 2, 4, 8, 8, … seconds
// (doubling, capped), a bounded number of tries, stopping at once on a fatal answer (the
// session is gone, or the secret is refused) since retrying cannot fix those.

export interface BackoffOptions {
  /** First delay, ms (default 1000). */
  initialMs?: number;
  /** Largest delay, ms (default 8000). */
  maxMs?: number;
  /** Attempts before giving up (default 6: about 31 s of trying with the defaults). */
  maxAttempts?: number;
}

export interface ResolvedBackoff {
  initialMs: number;
  maxMs: number;
  maxAttempts: number;
}

export function resolveBackoff(o: BackoffOptions = {}): ResolvedBackoff {
  const r = { initialMs: o.initialMs ?? 1000, maxMs: o.maxMs ?? 8000, maxAttempts: o.maxAttempts ?? 6 };
  for (const [k, v] of Object.entries(r))
    if (!Number.isFinite(v) || v <= 0)
      throw new RangeError(`backoff option ${k} must be a positive number, got ${v}`);
  if (r.maxMs < r.initialMs) throw new RangeError("backoff option maxMs must be at least initialMs");
  return r;
}

/** Delay before attempt `n` (0-based): initial·2ⁿ, capped. */
export function backoffDelay(o: ResolvedBackoff, attempt: number): number {
  return Math.min(o.maxMs, o.initialMs * 2 ** Math.min(attempt, 30));
}

export interface RetryHooks<T> {
  /** One attempt; `attempt` is 0-based. */
  attempt(attempt: number): Promise<T>;
  /** True when an error must not be retried. */
  isFatal(err: unknown): boolean;
  /** Called before waiting for the next attempt. */
  onRetry?(info: { attempt: number; delayMs: number; error: unknown }): void;
  /** A server-suggested wait (e.g. Retry-After), ms, used instead of the backoff when larger. */
  suggestedDelayMs?(err: unknown): number | undefined;
  signal?: AbortSignal;
}

/**
 * Waits the backoff delay, then tries, up to maxAttempts times. Resolves with the first
 * success; rejects with a fatal error at once, or with the last error when tries run out.
 */
export async function retryWithBackoff<T>(o: ResolvedBackoff, hooks: RetryHooks<T>): Promise<T> {
  let lastError: unknown;
  for (let attempt = 0; attempt < o.maxAttempts; attempt++) {
    const delayMs = Math.max(backoffDelay(o, attempt), hooks.suggestedDelayMs?.(lastError) ?? 0);
    hooks.onRetry?.({ attempt, delayMs, error: lastError });
    await sleep(delayMs, hooks.signal);
    try {
      return await hooks.attempt(attempt);
    } catch (err) {
      if (hooks.isFatal(err)) throw err;
      lastError = err;
    }
  }
  throw lastError;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason as Error);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
