// How the SDK retries a router connection: the one policy for the first connect and for
// every reconnect. Waits grow as capped exponential backoff (lib/backoff) — 1, 2, 4, 8,
// 8… s by default — a router's Retry-After stretches a wait, and a fatal answer (the
// session is gone, the secret is refused, no common protocol version) ends it at once,
// since retrying cannot fix those.
//
// A reconnect waits before its first try (the router just went away) and gives up after
// maxAttempts. The first connect tries at once and gives up at a deadline rather than
// after a count; its waits start at 250 ms (never above maxMs) because the session was
// just reported Ready and its route is moments away from reaching every router.
import { retry, checkBackoff, type BackoffPolicy } from "../../../../lib/backoff.js";
import { positive } from "../../../../lib/option-error.js";

export interface BackoffOptions {
  /** First reconnect delay, ms (default 1000). */
  initialMs?: number;
  /** Largest delay, ms (default 8000). */
  maxMs?: number;
  /** Reconnect attempts before giving up (default 6: about 31 s of trying with the defaults). */
  maxAttempts?: number;
}

export interface ReconnectPolicy {
  backoff: Required<BackoffPolicy>;
  maxAttempts: number;
}

/** The first connect's first wait, ms (capped at maxMs). */
export const FIRST_CONNECT_RETRY_MS = 250;

/** The policy of `o`, defaults filled in; an invalid field throws an OptionError naming it. */
export function reconnectPolicy(o: BackoffOptions = {}): ReconnectPolicy {
  return {
    backoff: checkBackoff({ initialMs: o.initialMs ?? 1000, maxMs: o.maxMs ?? 8000 }),
    maxAttempts: positive("backoff.maxAttempts", o.maxAttempts, 6),
  };
}

export interface RetryInfo {
  /** 0-based number of the attempt about to be made. */
  attempt: number;
  delayMs: number;
  /** Why the previous attempt failed (undefined before a reconnect's first attempt). */
  error: unknown;
}

export interface ConnectHooks<T> {
  /** One dial; `attempt` is 0-based. */
  attempt(attempt: number): Promise<T>;
  /** True when the error must not be retried. */
  isFatal(err: unknown): boolean;
  onRetry?(info: RetryInfo): void;
  signal?: AbortSignal;
}

/** A server's Retry-After, carried as `retryAfterMs` by dial errors. */
const retryAfterOf = (err: unknown): number | undefined =>
  (err as { retryAfterMs?: number } | undefined)?.retryAfterMs;

/**
 * Reconnects after a loss: waits, tries, up to maxAttempts times. Resolves with the
 * first success; rejects with a fatal error at once, with the last error when the tries
 * run out, or with the signal's reason when aborted.
 */
export function reconnectWithBackoff<T>(p: ReconnectPolicy, hooks: ConnectHooks<T>): Promise<T> {
  return retry({
    policy: p.backoff,
    maxAttempts: p.maxAttempts,
    delayFirst: true,
    suggestedDelayMs: retryAfterOf,
    attempt: hooks.attempt,
    isFatal: hooks.isFatal,
    ...(hooks.onRetry ? { onRetry: hooks.onRetry } : {}),
    ...(hooks.signal ? { signal: hooks.signal } : {}),
  });
}

/**
 * The first connect: tries at once, then again after each wait until `timeoutMs` has
 * passed or `signal` aborts. Resolves with the first success; rejects with a fatal error
 * as it is, otherwise with `giveUp(lastError)`.
 */
export async function connectWithBackoff<T>(
  p: ReconnectPolicy,
  hooks: ConnectHooks<T> & { timeoutMs: number; giveUp(lastError: unknown): Error },
): Promise<T> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), hooks.timeoutMs);
  const signal = hooks.signal ? AbortSignal.any([hooks.signal, deadline.signal]) : deadline.signal;
  let lastError: unknown;
  let fatal = false;
  try {
    return await retry({
      policy: { ...p.backoff, initialMs: Math.min(FIRST_CONNECT_RETRY_MS, p.backoff.maxMs) },
      maxAttempts: Infinity,
      suggestedDelayMs: retryAfterOf,
      attempt: hooks.attempt,
      isFatal: (err) => {
        lastError = err;
        fatal = hooks.isFatal(err);
        return fatal;
      },
      ...(hooks.onRetry ? { onRetry: hooks.onRetry } : {}),
      signal,
    });
  } catch (err) {
    if (fatal) throw err;
    throw hooks.giveUp(lastError);
  } finally {
    clearTimeout(timer);
  }
}
