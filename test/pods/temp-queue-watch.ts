// When each temporary queue (`sy-t-…`) of the queue-splitting pod tests existed: ListQueues on
// every cluster's SQS every 100 ms, so that a queue's deletion can be compared with when the
// last pod reading it exited (ledger.ts).
import { ListQueuesCommand, type SQSClient } from "@aws-sdk/client-sqs";

export interface TempQueueWatch {
  /** The first time `url` was seen gone after it was seen; undefined while it exists (or was never seen). */
  deletedAt(url: string): number | undefined;
  stop(): Promise<void>;
}

export function watchTempQueues(clients: readonly SQSClient[], intervalMs = 100): TempQueueWatch {
  const seen = clients.map(() => new Set<string>());
  const deleted = new Map<string, number>();
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      for (const [i, client] of clients.entries()) {
        let urls: string[];
        try {
          urls = (await client.send(new ListQueuesCommand({ QueueNamePrefix: "sy-t-" }))).QueueUrls ?? [];
        } catch {
          continue; // busy: the next round asks again
        }
        const at = Date.now();
        const now = new Set(urls);
        for (const u of urls) seen[i]!.add(u);
        for (const u of seen[i]!) if (!now.has(u) && !deleted.has(u)) deleted.set(u, at);
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    deletedAt: (url) => deleted.get(url),
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
