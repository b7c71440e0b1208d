// Waiting for something to become true, for suites and benchmarks: one poller, so every
// wait times out the same way and its failure names what was awaited and why the last
// attempt failed (with the error's cause chain: fetch's "fetch failed" says why only there).
import { sleep } from "../../lib/abortable-sleep.js";

export interface PollOptions {
  /** Give up after this many ms (default 30 000; Infinity waits for ever). */
  timeoutMs?: number;
  /** Pause between attempts, in ms (default 100; 0 polls again at once, for probes that await I/O). */
  intervalMs?: number;
  /**
   * Asked after every attempt that did not succeed: an error returned here ends the wait at
   * once with that error (e.g. the process being waited for has exited).
   */
  giveUp?: () => Error | undefined;
}

/** What a probe returns while the awaited state has not been reached yet. */
export type NotYet = undefined | false;

export class PollTimeoutError extends Error {
  readonly code = "SWITCHYARD_TEST_POLL_TIMEOUT";
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
    readonly lastError: unknown,
  ) {
    super(
      `timed out waiting for ${what} (${timeoutMs} ms)` +
        (lastError === undefined ? "" : `: ${describeError(lastError)}`),
      lastError === undefined ? undefined : { cause: lastError },
    );
  }
}

/**
 * Calls `probe` until it returns something other than undefined or false, and resolves
 * with that. A probe that throws counts as "not yet"; on timeout the latest attempt's
 * error (if the latest attempt threw) explains the failure.
 */
export async function eventually<T>(
  what: string,
  probe: () => T | NotYet | Promise<T | NotYet>,
  opts: PollOptions = {},
): Promise<Exclude<T, NotYet>> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const intervalMs = opts.intervalMs ?? 100;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let last: unknown;
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v as Exclude<T, NotYet>;
    } catch (err) {
      last = err;
    }
    const fatal = opts.giveUp?.();
    if (fatal) throw fatal;
    if (Date.now() > deadline) throw new PollTimeoutError(what, timeoutMs, last);
    if (intervalMs > 0) await sleep(intervalMs);
  }
}

/** An error with its causes, outermost first: `Error: a <- Error: b`. */
export function describeError(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e !== undefined && e !== null && parts.length < 4; e = causeOf(e))
    parts.push(String(e));
  return parts.join(" <- ");
}

function causeOf(e: unknown): unknown {
  return typeof e === "object" ? (e as { cause?: unknown }).cause : undefined;
}
