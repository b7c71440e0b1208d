// The ledger of the queue-splitting pod tests: an HTTP server on this machine that the demo's
// queue consumers (test/env/images/fixtures/queue-consumer.mjs) report to — from pods, at the
// node link's host address of their cluster; from the developer's consumer, the same address
// (this machine owns it). A pod reports /started and /exit with the queue it read, and every
// batch it handled (/received) before deleting it: what a message went through, and when each
// pod read which queue, are on the ledger.
import { createServer, type Server } from "node:http";

/** One reader of a queue: a pod (or `local-<name>`) and the queue its environment named. */
export interface LedgerPod {
  pod: string;
  cluster: string;
  queue: string;
  startedAt: number;
  /** When it stopped reading (after its last batch); undefined while it reads. */
  exitAt?: number;
}

/** One handling of a message: by whom, from which queue, when. */
export interface Handling {
  pod: string;
  queue: string;
  at: number;
}

export interface Ledger {
  pods(): LedgerPod[];
  /** Every handling of message `id` (`<cluster>-<n>`). */
  handled(id: string): Handling[];
  close(): Promise<void>;
}

interface Record {
  pod: string;
  cluster: string;
  queue: string;
  at: number;
  ids?: string[];
}

/** Listens on `port` of every address of `hosts` (this machine's node-link addresses). */
export async function startLedger(hosts: readonly string[], port: number): Promise<Ledger> {
  const pods = new Map<string, LedgerPod>();
  const handlings = new Map<string, Handling[]>();
  const take = (path: string, r: Record): boolean => {
    switch (path) {
      case "/started":
        pods.set(r.pod, { pod: r.pod, cluster: r.cluster, queue: r.queue, startedAt: r.at });
        return true;
      case "/exit": {
        const p = pods.get(r.pod);
        if (p) p.exitAt = r.at;
        return p !== undefined;
      }
      case "/received":
        for (const id of r.ids ?? []) {
          const list = handlings.get(id) ?? [];
          list.push({ pod: r.pod, queue: r.queue, at: r.at });
          handlings.set(id, list);
        }
        return true;
      default:
        return false;
    }
  };
  const servers: Server[] = [];
  for (const host of hosts) {
    const server = createServer((req, res) => {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (c: string) => (body += c));
      req.on("end", () => {
        let ok: boolean;
        try {
          ok = req.method === "POST" && take(req.url ?? "", JSON.parse(body) as Record);
        } catch {
          ok = false; // not JSON
        }
        res.statusCode = ok ? 204 : 400;
        res.end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    servers.push(server);
  }
  return {
    pods: () => [...pods.values()],
    handled: (id) => handlings.get(id) ?? [],
    close: async () => {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
    },
  };
}
