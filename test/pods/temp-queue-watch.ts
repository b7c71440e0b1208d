// When each temporary queue (`sy-t-…`) of the queue-splitting pod tests existed: ListQueues on
// every cluster's SQS every 100 ms, so that a queue's deletion can be compared with when the
// last pod reading it exited (ledger.ts).
import { ListQueuesCommand, type SQSClient } from "@aws-sdk/client-sqs";

export interface TempQueueWatch {
  /**
   * The last moment `url` is known to have existed (when the last listing that still named it
   * was sent), once a later listing no longer names it; undefined while it exists (or was never
   * seen). Its deletion came after this moment.
   */
  lastSeenBeforeDeletion(url: string): number | undefined;
  /**
   * Resolves once every cluster has answered a listing sent after this call: what was deleted
   * before the call is then known to the watch. (A check of its own may see a deletion a
   * round before the watch does.)
   */
  caughtUp(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export function watchTempQueues(clients: readonly SQSClient[], intervalMs = 100): TempQueueWatch {
  const lastSeen = clients.map(() => new Map<string, number>());
  const gone = new Map<string, number>();
  /** Per cluster, when the last answered listing was sent. */
  const answeredSince = clients.map(() => 0);
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      for (const [i, client] of clients.entries()) {
        const sentAt = Date.now();
        let urls: string[];
        try {
          urls = (await client.send(new ListQueuesCommand({ QueueNamePrefix: "sy-t-" }))).QueueUrls ?? [];
        } catch {
          continue; // busy: the next round asks again
        }
        const now = new Set(urls);
        for (const u of urls) lastSeen[i]!.set(u, sentAt);
        for (const [u, at] of lastSeen[i]!) if (!now.has(u) && !gone.has(u)) gone.set(u, at);
        answeredSince[i] = sentAt;
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    lastSeenBeforeDeletion: (url) => gone.get(url),
    caughtUp: async (timeoutMs = 30_000) => {
      const from = Date.now();
      while (answeredSince.some((at) => at < from)) {
        if (stopped) throw new Error("the temporary-queue watch is stopped");
        if (Date.now() - from > timeoutMs)
          throw new Error(`the temporary-queue watch had no answer from every cluster in ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, intervalMs));
      }
    },
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
