// Waiting that a stop can cut short. Long-running parts sleep between attempts and must
// end promptly when their AbortSignal fires; a plain setTimeout would keep them (and the
// process) alive until it runs out.

/**
 * Waits `ms`, or less when `signal` aborts first. Never rejects: resolves `true` when the
 * whole time passed and `false` when the signal cut it short (or had already fired), so
 * a loop reads `if (!(await sleep(ms, signal))) return;`.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Resolves when `signal` aborts (at once when it already has). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}
