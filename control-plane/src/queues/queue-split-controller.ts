// The queue split controller wired together (member side, `--sqs-splitting`): informers on
// this cluster's ClusterSessions and QueueConsumers, one Controller running
// QueueSplitReconciler keyed by consuming workload, and the leftover sweep at the start of
// each leadership term and every `sweepEveryMs`. `start` runs one term and may be called
// again for the next; a term's end stops its splitters (the next leader starts its own).
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import {
  clusterSessionClient,
  clusterSessionCrd,
  parseTarget,
  queueConsumerCrd,
  type ClusterSession,
  type QueueConsumer,
} from "../../../proto/api/v1alpha1/index.js";
import { sleep } from "../../../lib/abortable-sleep.js";
import {
  Controller,
  customResourceInformer,
  type ControllerMetrics,
  type ObjectKey,
  type ResourceInformer,
} from "../runtime/index.js";
import { ConsumerEnv } from "./consumer-env.js";
import { sweepLeftoverQueues } from "./queue-leftovers.js";
import type { SplitterMetrics } from "./queue-metrics.js";
import { consumerKey, QueueSplitReconciler } from "./queue-split-reconciler.js";
import { QueueSplitStatusWriter, QUEUE_SPLIT_FINALIZER } from "./queue-split-status.js";
import { SplitterRegistry } from "./splitter-registry.js";
import type { SqsClients } from "./sqs-clients.js";

export interface QueueSplitControllerOptions {
  kubeConfig: KubeConfig;
  clients: SqsClients;
  clusterId: string;
  logger: Logger;
  metrics?: SplitterMetrics;
  controllerMetrics?: ControllerMetrics;
  resyncMs?: number;
  /** Leftover sweep period, ms (default 300 000). */
  sweepEveryMs?: number;
}

export class QueueSplitController {
  readonly #o: QueueSplitControllerOptions;
  readonly #sessions: ResourceInformer<ClusterSession>;
  readonly #consumers: ResourceInformer<QueueConsumer>;
  readonly #splitters: SplitterRegistry;
  readonly #reconciler: QueueSplitReconciler;
  readonly #consumerEnv: ConsumerEnv;
  readonly #sessionClient;

  constructor(o: QueueSplitControllerOptions) {
    this.#o = o;
    const kc = o.kubeConfig;
    const resyncMs = o.resyncMs ?? 60_000;
    this.#sessions = customResourceInformer<ClusterSession>(kc, clusterSessionCrd, {
      resyncMs,
      logger: o.logger,
    });
    this.#consumers = customResourceInformer<QueueConsumer>(kc, queueConsumerCrd, {
      resyncMs,
      logger: o.logger,
    });
    this.#splitters = new SplitterRegistry({
      clients: o.clients,
      logger: o.logger,
      ...(o.metrics ? { metrics: o.metrics } : {}),
    });
    this.#consumerEnv = new ConsumerEnv(kc);
    this.#sessionClient = clusterSessionClient(kc);
    this.#reconciler = new QueueSplitReconciler({
      kubeConfig: kc,
      consumerEnv: this.#consumerEnv,
      status: new QueueSplitStatusWriter(kc),
      clients: o.clients,
      splitters: this.#splitters,
      clusterId: o.clusterId,
      sessions: () => this.#sessions.list(),
      consumers: () => this.#consumers.list(),
      logger: o.logger,
    });
  }

  /**
   * Reconciles until `signal` aborts: one leadership term (the runtime's LeadershipTerms never
   * overlaps two). Resolves once every splitter stopped, its in-flight messages forwarded.
   */
  async start(signal: AbortSignal): Promise<void> {
    try {
      if (signal.aborted) return;
      const c = new Controller({
        name: "queue-split",
        reconciler: this.#reconciler,
        concurrency: 4,
        logger: this.#o.logger,
        ...(this.#o.controllerMetrics ? { metrics: this.#o.controllerMetrics } : {}),
      });
      c.watch(this.#sessions, { map: sessionWorkload });
      c.watch(this.#consumers, { map: consumerWorkload });
      await Promise.all([c.start(signal), this.#sweep(c, signal)]);
    } finally {
      await this.#splitters.stopAll();
    }
  }

  async #sweep(c: Controller, signal: AbortSignal): Promise<void> {
    const every = this.#o.sweepEveryMs ?? 300_000;
    // The first pass reads sessions from the informer: let it fill first.
    await this.#sessions.waitForSync(signal).catch(() => undefined);
    while (!signal.aborted) {
      try {
        await sweepLeftoverQueues(
          {
            kubeConfig: this.#o.kubeConfig,
            clients: this.#o.clients,
            consumerEnv: this.#consumerEnv,
            clusterId: this.#o.clusterId,
            sessions: () => this.#sessions.list(),
            sessionExists: async (key) => {
              const [namespace, name] = key.split(":") as [string, string];
              return (await this.#sessionClient.get({ namespace, name })) !== undefined;
            },
            enqueue: (key: ObjectKey) => c.enqueue(key),
            logger: this.#o.logger,
          },
          signal,
        );
      } catch (err) {
        this.#o.logger.warn(
          { err: (err as Error).message },
          "leftover queue sweep failed; trying again later",
        );
      }
      await sleep(every, signal);
    }
  }
}

function sessionWorkload(s: ClusterSession): ObjectKey | undefined {
  const ns = s.metadata?.namespace;
  if (!ns) return undefined;
  const splits = s.spec.connectParams?.sqsSplit?.length ?? 0;
  if (splits === 0 && !s.metadata.finalizers?.includes(QUEUE_SPLIT_FINALIZER)) return undefined;
  const t = parseTarget(s.spec.target);
  if (t.kind === "pod") return undefined;
  return consumerKey(ns, t.kind, t.name);
}

function consumerWorkload(c: QueueConsumer): ObjectKey | undefined {
  const ns = c.metadata?.namespace;
  const [kind, name] = c.spec.consumer.split("/");
  return ns && kind && name ? consumerKey(ns, kind, name) : undefined;
}
