// Runs the branch sync (Primary ≠ Default, DESIGN §7) while this replica leads: for each
// branch kind, a runtime Controller fed by the kind's informer on the Primary and by an
// informer on this Primary's copies in the Default cluster (branch-copy-informer.ts), which
// follows the configuration and wakes the Primary CR of the same namespace and name. The
// Default cluster and its client are asked of `WorkloadClusters` on every reconcile; no
// client is kept here. New Controllers are built on every start, so `start` may be called
// again on the next leadership term with a fresh signal.
import type { KubeConfig } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { sleep } from "../../../../lib/abortable-sleep.js";
import { integerIn, nonNegative, positive } from "../../../../lib/option-error.js";
import {
  BRANCH_KINDS,
  mysqlBranchDatabaseCrd,
  pgBranchDatabaseCrd,
  type BranchDatabase,
  type BranchKind,
} from "../../../../proto/api/v1alpha1/index.js";
import type { WorkloadClusters } from "../../primary/workload-clusters.js";
import { Controller, customResourceInformer, keyOf, type ControllerMetrics } from "../../runtime/index.js";
import { isCopy } from "./branch-sync-plan.js";
import { BranchCopyInformer } from "./branch-copy-informer.js";
import { BranchSyncMetrics } from "./branch-sync-metrics.js";
import { BranchSyncReconciler } from "./branch-sync-reconciler.js";

export interface BranchSyncControllerOptions {
  /** The control plane's own KubeConfig for the Primary (branch CRs, mirrored Secrets). */
  primaryKubeConfig: KubeConfig;
  /** The Default cluster and its current client (`registryWorkloadClusters(registry, kc)`). */
  clusters: WorkloadClusters;
  /** Branches of one kind reconciled at once (default 4). */
  concurrency?: number;
  /** Every cached branch and copy is re-delivered this often, ms (default 60 000; 0 = never). */
  resyncMs?: number;
  /** How often the Default cluster and its client are compared with the configuration, ms (default 5 000). */
  topologyCheckMs?: number;
  /** Deadline of each request to the Default cluster, ms (default 10 000). */
  requestTimeoutMs?: number;
  /** How often a branch in Conflict, or waiting for its copy to go, is looked at again, ms (default 10 000). */
  recheckMs?: number;
  /** Branch sync metrics (default: a new one on its own Registry). */
  metrics?: BranchSyncMetrics;
  /** Shared runtime metrics of the process (reconcile duration/errors; default: a new Registry). */
  controllerMetrics?: ControllerMetrics;
  logger?: Logger;
}

const CRDS = { PgBranchDatabase: pgBranchDatabaseCrd, MysqlBranchDatabase: mysqlBranchDatabaseCrd } as const;
const CONTROLLER_NAMES = {
  PgBranchDatabase: "pgbranch-sync",
  MysqlBranchDatabase: "mysqlbranch-sync",
} as const;

export class BranchSyncController {
  readonly metrics: BranchSyncMetrics;
  private readonly concurrency: number;
  private readonly resyncMs: number;
  private readonly topologyCheckMs: number;
  private readonly requestTimeoutMs: number;
  private readonly recheckMs: number;

  constructor(private readonly options: BranchSyncControllerOptions) {
    this.concurrency = integerIn("concurrency", options.concurrency, 4, 1, 1000);
    this.resyncMs = nonNegative("resyncMs", options.resyncMs, 60_000);
    this.topologyCheckMs = positive("topologyCheckMs", options.topologyCheckMs, 5_000);
    this.requestTimeoutMs = positive("requestTimeoutMs", options.requestTimeoutMs, 10_000);
    this.recheckMs = positive("recheckMs", options.recheckMs, 10_000);
    this.metrics = options.metrics ?? new BranchSyncMetrics();
  }

  /** Syncs branches of both kinds until `signal` aborts (e.g. the leadership signal of a LeaseElector). */
  async start(signal: AbortSignal): Promise<void> {
    if (!(await this.waitForTopology(signal))) return;
    await Promise.all(BRANCH_KINDS.map((kind) => this.run(kind, signal)));
  }

  private async run(kind: BranchKind, signal: AbortSignal): Promise<void> {
    const { logger, clusters, primaryKubeConfig } = this.options;
    const log = (logger ?? pino({ level: "silent" })).child({ component: "branch-sync", kind });
    const copies: { informer?: BranchCopyInformer } = {};
    const reconciler = new BranchSyncReconciler({
      kind,
      primaryKubeConfig,
      clusters,
      cachedCopy: (kc, namespace, name) => copies.informer?.cached(kc, namespace, name),
      requestTimeoutMs: this.requestTimeoutMs,
      recheckMs: this.recheckMs,
      metrics: this.metrics,
      log,
    });
    const controller = new Controller({
      name: CONTROLLER_NAMES[kind],
      reconciler,
      concurrency: this.concurrency,
      backoff: { baseMs: 250, maxMs: 15_000 },
      ...(logger ? { logger } : {}),
      ...(this.options.controllerMetrics ? { metrics: this.options.controllerMetrics } : {}),
    });
    const branches = customResourceInformer<BranchDatabase>(primaryKubeConfig, CRDS[kind], {
      what: `${CRDS[kind].plural} on the Primary`,
      resyncMs: this.resyncMs,
      ...(logger ? { logger } : {}),
    });
    // Another Primary's copies (this cluster being its Default) are not ours to copy again.
    controller.watch(branches, { predicates: [(b) => !isCopy(b)] });
    copies.informer = new BranchCopyInformer({
      crd: CRDS[kind],
      signal,
      resyncMs: this.resyncMs,
      logger: log,
      onCopy: (copy) => {
        const key = keyOf(copy);
        if (key) controller.enqueue(key);
      },
      // Reconciles that failed while the Default had no client wait out a grown backoff: not now.
      onReachable: () => {
        for (const b of branches.list()) if (!isCopy(b)) controller.enqueue(keyOf(b)!);
      },
    });
    const follow = () => copies.informer!.sync(clusters);
    follow();
    const timer = setInterval(follow, this.topologyCheckMs);
    timer.unref?.();
    try {
      await controller.start(signal);
    } finally {
      clearInterval(timer);
      await copies.informer.stopped();
    }
  }

  private async waitForTopology(signal: AbortSignal): Promise<boolean> {
    for (;;) {
      if (this.options.clusters.topology()) return true;
      if (!(await sleep(200, signal))) return false;
    }
  }
}
