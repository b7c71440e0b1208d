// Capped exponential backoff, the one policy every retry loop uses: the n-th delay is
// initialMs·multiplierⁿ capped at maxMs, optionally spread by ±jitter so a fleet that
// failed together does not retry in lockstep. `Backoff` tracks consecutive failures for
// loops that retry forever (watches, streams, token renewal); `retry` runs a bounded
// number of attempts (the CLI's reconnects).
import { sleep } from "./abortable-sleep.js";
import { atLeast, fraction, OptionError, positive } from "./option-error.js";

export interface BackoffPolicy {
  /** First delay, ms. */
  initialMs: number;
  /** Largest delay, ms (≥ initialMs). */
  maxMs: number;
  /** Growth per consecutive failure (default 2, ≥ 1). */
  multiplier?: number;
  /** Fraction of each delay randomised, 0–1 (default 0: delay × [1 − j, 1 + j]). */
  jitter?: number;
}

/** Checks a policy, naming the bad field as `<prefix>.<field>`; returns it with defaults filled in. */
export function checkBackoff(policy: BackoffPolicy, prefix = "backoff"): Required<BackoffPolicy> {
  const initialMs = positive(`${prefix}.initialMs`, policy.initialMs, NaN);
  const maxMs = atLeast(
    `${prefix}.maxMs`,
    positive(`${prefix}.maxMs`, policy.maxMs, NaN),
    `${prefix}.initialMs`,
    initialMs,
  );
  const multiplier = policy.multiplier ?? 2;
  if (!(multiplier >= 1)) throw new OptionError(`${prefix}.multiplier`, `must be ≥ 1, got ${multiplier}`);
  return { initialMs, maxMs, multiplier, jitter: fraction(`${prefix}.jitter`, policy.jitter, 0) };
}

/** The delay before retry `attempt` (0-based), without jitter. */
export function backoffDelay(policy: BackoffPolicy, attempt: number): number {
  const m = policy.multiplier ?? 2;
  return Math.min(policy.maxMs, policy.initialMs * m ** Math.min(attempt, 64));
}

/** Consecutive-failure state of one retry loop. */
export class Backoff {
  readonly policy: Required<BackoffPolicy>;
  #attempt = 0;

  constructor(
    policy: BackoffPolicy,
    private readonly random: () => number = Math.random,
    prefix = "backoff",
  ) {
    this.policy = checkBackoff(policy, prefix);
  }

  /** Failures since the last reset. */
  get failures(): number {
    return this.#attempt;
  }

  /** The delay before the next attempt; each call counts one more failure. */
  next(): number {
    const base = backoffDelay(this.policy, this.#attempt++);
    const spread = base * this.policy.jitter * (2 * this.random() - 1);
    return Math.max(0, Math.round(base + spread));
  }

  /** A success: the next failure starts again at initialMs. */
  reset(): void {
    this.#attempt = 0;
  }
}

export interface RetryOptions<T> {
  policy: BackoffPolicy;
  /** Attempts before giving up (≥ 1). */
  maxAttempts: number;
  /** One attempt; `attempt` is 0-based. */
  attempt(attempt: number): Promise<T>;
  /** True when an error must not be retried (retrying cannot fix it). */
  isFatal(err: unknown): boolean;
  /** Called before each wait. */
  onRetry?(info: { attempt: number; delayMs: number; error: unknown }): void;
  /** A server-suggested wait (e.g. Retry-After), ms, used instead of the backoff when larger. */
  suggestedDelayMs?(err: unknown): number | undefined;
  /** Wait before the first attempt too (a reconnect after a loss), default false. */
  delayFirst?: boolean;
  signal?: AbortSignal;
}

/**
 * Tries up to maxAttempts times with the policy's delays between tries. Resolves with
 * the first success; rejects with a fatal error at once, with the signal's reason when
 * aborted, or with the last error when tries run out.
 */
export async function retry<T>(o: RetryOptions<T>): Promise<T> {
  const backoff = new Backoff(o.policy);
  let lastError: unknown;
  for (let attempt = 0; attempt < o.maxAttempts; attempt++) {
    if (attempt > 0 || o.delayFirst) {
      const delayMs = Math.max(backoff.next(), o.suggestedDelayMs?.(lastError) ?? 0);
      o.onRetry?.({ attempt, delayMs, error: lastError });
      if (!(await sleep(delayMs, o.signal))) throw o.signal?.reason ?? new Error("aborted");
    }
    try {
      return await o.attempt(attempt);
    } catch (err) {
      if (o.isFatal(err)) throw err;
      lastError = err;
    }
  }
  throw lastError;
}
