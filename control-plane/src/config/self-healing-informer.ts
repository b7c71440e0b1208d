// Keeps a client-node ListWatch running for as long as a signal is live: the library
// stops an informer on a watch error (API server restart, network blip), so we restart
// it with capped exponential backoff. The restart re-lists, which also repairs any
// events missed while disconnected.
import type { KubernetesObject, ListWatch } from "@kubernetes/client-node";
import type { Logger } from "pino";

export interface SelfHealingInformerOptions {
  /** First restart delay in ms (default 500); doubles per consecutive failure. */
  initialBackoffMs?: number;
  /** Upper bound of the restart delay in ms (default 15 000). */
  maxBackoffMs?: number;
}

/** Starts `informer` and keeps it running until `signal` aborts; resolves after the first successful list. */
export async function runSelfHealingInformer<T extends KubernetesObject>(
  informer: ListWatch<T>,
  what: string,
  signal: AbortSignal,
  logger: Logger,
  options: SelfHealingInformerOptions = {},
): Promise<void> {
  const initial = options.initialBackoffMs ?? 500;
  const max = options.maxBackoffMs ?? 15_000;
  let delay = initial;
  let timer: NodeJS.Timeout | undefined;
  let failedSinceStart = false;
  const startOnce = async () => {
    failedSinceStart = false;
    try {
      await informer.start();
    } catch (err) {
      onError(err);
      return;
    }
    // start() resolves even when its list failed (it reports through "error"), so only
    // a clean start resets the backoff.
    if (!failedSinceStart) delay = initial;
  };
  const onError = (err?: unknown) => {
    failedSinceStart = true;
    if (signal.aborted || timer !== undefined) return;
    logger.warn(
      { what, err: err instanceof Error ? err.message : String(err), retryInMs: delay },
      "watch failed; restarting",
    );
    timer = setTimeout(() => {
      timer = undefined;
      if (!signal.aborted) void startOnce();
    }, delay);
    delay = Math.min(delay * 2, max);
  };
  informer.on("error", onError);
  signal.addEventListener(
    "abort",
    () => {
      if (timer) clearTimeout(timer);
      void informer.stop();
    },
    { once: true },
  );
  await startOnce();
}
