// Runs the Primary's session lifecycle while this replica leads: a runtime Controller
// fed by the MultiClusterSession informer on the Primary and, per workload cluster, an
// informer on the ClusterSessions this Primary owns (label-selected by its cluster id),
// mapped back to their parent. On start it lists every parent and publishes the routing
// table of the Ready ones as one snapshot (`replaceAll`), which also tells the snapshot
// cache it may serve routers; afterwards the reconciler upserts and removes tables.
// A new Controller is built on every start, so `start` may be called again on the next
// leadership term with a fresh signal.
import type { Logger } from "pino";
import { pino } from "pino";
import { sleep } from "../../../lib/abortable-sleep.js";
import { nonNegative, positive } from "../../../lib/option-error.js";
import type { SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import {
  LABELS,
  PARENT_NAME_PATTERN,
  multiClusterSessionCrd,
  type ClusterSession,
  type MultiClusterSession,
} from "../../../proto/api/v1alpha1/index.js";
import { parseSessionKey } from "../../../proto/session-endpoint.js";
import type { RouteSnapshotCache } from "../route-discovery/index.js";
import {
  Controller,
  customResourceInformer,
  type ControllerMetrics,
  type ObjectKey,
  type ResourceInformer,
} from "../runtime/index.js";
import { ChildInformerSet } from "./child-informer-set.js";
import { refusalReasons } from "../allow-list/index.js";
import { ChildSecretStore } from "./child-secrets.js";
import { SessionReconciler, type SessionReconcilerOptions } from "./session-reconciler.js";
import { buildSessionRoute } from "./session-route.js";

export interface SessionControllerOptions extends SessionReconcilerOptions {
  /** Parents reconciled at once (default 8). */
  concurrency?: number;
  /** Every cached parent and child is re-delivered this often, ms (default 60 000). */
  resyncMs?: number;
  /** How often the set of watched workload clusters is compared with the configuration, ms (default 5 000). */
  topologyCheckMs?: number;
  /** Shared runtime metrics of the process (reconcile duration/errors; default: a new Registry). */
  controllerMetrics?: ControllerMetrics;
}

export class SessionController {
  private readonly reconciler: SessionReconciler;
  /** Session metrics (`options.metrics` of the reconciler, or its own). */
  get sessionMetrics() {
    return this.reconciler.metrics;
  }
  /** Watch events of the reconciler's own writes that did not wake it again (own-writes.ts). */
  get ownWriteEventsSkipped(): number {
    return this.reconciler.ownWrites.skipped;
  }
  private readonly log: Logger;
  private readonly resyncMs: number;
  private readonly topologyCheckMs: number;

  /** This term's child informers by cluster: the reconciler reads children from them once synced. */
  private childCaches: ReadonlyMap<string, ResourceInformer<ClusterSession>> = new Map();

  constructor(private readonly options: SessionControllerOptions) {
    this.reconciler = new SessionReconciler({
      ...options,
      cachedChild: (cluster, namespace, name) => {
        const informer = this.childCaches.get(cluster);
        if (!informer?.hasSynced) return undefined;
        return informer.get(name, namespace) ?? null;
      },
    });
    this.resyncMs = nonNegative("resyncMs", options.resyncMs, 60_000);
    this.topologyCheckMs = positive("topologyCheckMs", options.topologyCheckMs, 5_000);
    this.log = (options.logger ?? pino({ level: "silent" })).child({ component: "session-controller" });
  }

  /** Reconciles sessions until `signal` aborts (e.g. the leadership signal of a LeaseElector). */
  async start(signal: AbortSignal): Promise<void> {
    const topology = await this.waitForTopology(signal);
    if (!topology) return;
    const logger = this.options.logger;
    const controller = new Controller({
      name: "multi-cluster-session",
      reconciler: this.reconciler,
      concurrency: this.options.concurrency ?? 8,
      backoff: { baseMs: 250, maxMs: 15_000 },
      ...(logger ? { logger } : {}),
      ...(this.options.controllerMetrics ? { metrics: this.options.controllerMetrics } : {}),
    });
    const parents = customResourceInformer<MultiClusterSession>(
      this.options.primaryKubeConfig,
      multiClusterSessionCrd,
      {
        what: "multiclustersessions",
        resyncMs: this.resyncMs,
        ...(logger ? { logger } : {}),
      },
    );
    // Its own writes' events do not wake it again: the pass that wrote went on from there.
    controller.watch(parents, { predicates: [this.reconciler.ownWrites.notOwn] });
    this.reconciler.metrics.setPhaseSource(() => parents.list().map((p) => p.status?.phase));
    this.reconciler.metrics.setRefusalSource(() => refusalReasons(parents.list()));
    const toParent = (child: ClusterSession): ObjectKey | undefined => {
      const parent = child.spec?.parent?.name ?? child.metadata?.labels?.[LABELS.parent];
      return parent && child.metadata?.namespace
        ? { namespace: child.metadata.namespace, name: parent }
        : undefined;
    };
    // Child informers are not `watch`ed: the Controller waits for every watched informer's
    // first LIST, and one unreachable workload cluster must not stop the other sessions.
    // Their events only wake parents early; requeues cover a cluster whose informer is
    // still failing. They follow the configuration: clusters added, removed or reconnected
    // with new credentials get their informer started, stopped or replaced.
    const children = new ChildInformerSet({
      signal,
      resyncMs: this.resyncMs,
      ...(logger ? { logger } : {}),
      onChild: (child) => {
        const key = toParent(child);
        if (key) controller.enqueue(key);
      },
      // A parent whose reconciles failed while a cluster had no client (a new leader before its
      // first check round) waits out a growing backoff — up to a minute, longer than a fresh
      // session's TTL without a client. Reachable again: every parent is looked at now.
      onReachable: (cluster) => {
        const all = parents.list();
        logger?.info(
          { cluster, sessions: all.length },
          "workload cluster reachable; reconciling every session",
        );
        for (const p of all) controller.enqueue({ namespace: p.metadata.namespace!, name: p.metadata.name! });
      },
    });
    this.childCaches = children.informers;
    const follow = () => children.sync(this.options.clusters);
    follow();
    const timer = setInterval(follow, this.topologyCheckMs);
    timer.unref?.();
    signal.addEventListener("abort", () => clearInterval(timer), { once: true });
    // The initial table goes out before any reconcile can upsert, so a stale list never
    // overwrites a fresher route. The informer keeps running; the controller reuses it.
    const informing = parents.start(signal);
    try {
      await parents.waitForSync(signal);
    } catch {
      await Promise.all([informing, children.stopped()]);
      return; // aborted before the first list
    }
    await this.publishInitialRoutes(parents.list());
    await controller.start(signal);
    clearInterval(timer);
    await Promise.all([informing, children.stopped()]);
  }

  /** The whole table at once, from the API server's state, before any delta. */
  private async publishInitialRoutes(parents: readonly MultiClusterSession[]): Promise<void> {
    const cache: RouteSnapshotCache | undefined = this.options.routes;
    if (!cache) return;
    const store = new ChildSecretStore(this.options.primaryKubeConfig);
    const routes: SessionRoute[] = [];
    for (const p of parents) {
      if ((p.status?.phase !== "Ready" && p.status?.phase !== "Pending") || p.metadata.deletionTimestamp)
        continue;
      try {
        const secrets = await store.get(p.metadata.namespace!, p.metadata.name!);
        const route = buildSessionRoute(
          p,
          secrets ?? {},
          this.options.gatewayCaPem ? { gatewayCaPem: this.options.gatewayCaPem } : {},
        );
        if (route) routes.push(route);
      } catch (err) {
        // The reconcile of that parent reports it; the rest of the table must not wait.
        this.log.warn(
          { session: p.metadata.name, namespace: p.metadata.namespace, err: (err as Error).message },
          "route not published at start",
        );
      }
    }
    // Only the parents' entries are this controller's: a member controller in the same
    // process (mode "both") may already have published its children's tables.
    const parentId = new RegExp(PARENT_NAME_PATTERN);
    const isParent = (id: string) => parentId.test(parseSessionKey(id)?.name ?? "");
    const others = [...cache.snapshot().routes.values()].filter((r) => !isParent(r.sessionId));
    cache.replaceAll([...others, ...routes]);
    this.log.info({ sessions: routes.length }, "initial routing table published");
  }

  private async waitForTopology(signal: AbortSignal) {
    for (;;) {
      const t = this.options.clusters.topology();
      if (t) return t;
      if (!(await sleep(200, signal))) return undefined;
    }
  }
}
