// The running splitters of this control plane: one per (namespace, consuming workload, queue
// id), with the routes its decisions read. Routes change in place (the next message sees the
// new ones); a splitter whose original or temporary queue changed is replaced. The only state
// of the queue split controller that lives in memory: a restart rebuilds it by reconciling.
import type { Logger } from "pino";
import type { SplitterMetrics } from "./queue-metrics.js";
import { ParsedMessage } from "./queue-filter.js";
import { decide, type SplitSession } from "./split-routing.js";
import { QueueSplitter } from "./splitter.js";
import type { SqsClients } from "./sqs-clients.js";

interface Entry {
  original: string;
  target: string;
  routes: readonly SplitSession[];
  splitter: QueueSplitter;
}

export interface SplitterRegistryOptions {
  clients: SqsClients;
  metrics?: SplitterMetrics;
  logger?: Logger;
}

export class SplitterRegistry {
  readonly #o: SplitterRegistryOptions;
  readonly #entries = new Map<string, Entry>();

  constructor(o: SplitterRegistryOptions) {
    this.#o = o;
  }

  static #key(namespace: string, workload: string, id: string): string {
    return `${namespace}\u0000${workload}\u0000${id}`;
  }

  /** Queue ids with a running splitter for this workload. */
  queueIds(namespace: string, workload: string): string[] {
    const prefix = `${namespace}\u0000${workload}\u0000`;
    return [...this.#entries.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
  }

  /** Starts the splitter, or gives a running one its new routes. */
  async ensure(
    namespace: string,
    workload: string,
    id: string,
    want: { original: string; target: string; routes: readonly SplitSession[] },
  ): Promise<void> {
    const key = SplitterRegistry.#key(namespace, workload, id);
    const have = this.#entries.get(key);
    if (have && have.original === want.original && have.target === want.target) {
      have.routes = want.routes;
      return;
    }
    if (have) await this.stop(namespace, workload, id);
    const entry: Entry = { ...want, splitter: undefined as unknown as QueueSplitter };
    entry.splitter = new QueueSplitter({
      clients: this.#o.clients,
      originalQueueUrl: want.original,
      targetQueueUrl: want.target,
      decide: (m) => decide(entry.routes, new ParsedMessage(m.attributes, m.body)),
      ...(this.#o.metrics ? { metrics: this.#o.metrics } : {}),
      ...(this.#o.logger ? { logger: this.#o.logger.child({ namespace, queue: id }) } : {}),
    });
    this.#entries.set(key, entry);
    this.#o.metrics?.splitterStarted();
    entry.splitter.start();
  }

  /** Gives a running splitter new routes (none: every message to the deployed consumers). */
  setRoutes(namespace: string, workload: string, id: string, routes: readonly SplitSession[]): void {
    const e = this.#entries.get(SplitterRegistry.#key(namespace, workload, id));
    if (e) e.routes = routes;
  }

  /** Stops a splitter once its in-flight messages are forwarded. */
  async stop(namespace: string, workload: string, id: string): Promise<void> {
    const key = SplitterRegistry.#key(namespace, workload, id);
    const e = this.#entries.get(key);
    if (!e) return;
    this.#entries.delete(key);
    await e.splitter.stop();
    this.#o.metrics?.splitterStopped();
  }

  async stopAll(): Promise<void> {
    await Promise.all(
      [...this.#entries.keys()].map((k) => {
        const [ns, w, id] = k.split("\u0000") as [string, string, string];
        return this.stop(ns, w, id);
      }),
    );
  }
}
