// The branching controllers wired together (they run only where databases are made: see
// controller-placement.ts): informers on both branch kinds and on this cluster's
// ClusterSessions, one Controller per kind running BranchReconciler, and a session's
// changes mapped to the branches its connect params name (so a session's start or end
// moves a branch's expiry at once). `start` runs one leadership term and may be called
// again for the next, like MemberController.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import {
  BRANCH_KINDS,
  clusterSessionCrd,
  mysqlBranchDatabaseClient,
  mysqlBranchDatabaseCrd,
  pgBranchDatabaseClient,
  pgBranchDatabaseCrd,
  type BranchDatabase,
  type BranchKind,
  type ClusterSession,
} from "../../../proto/api/v1alpha1/index.js";
import type { ControllerMetrics } from "../runtime/index.js";
import {
  Controller,
  customResourceInformer,
  type ObjectKey,
  type ResourceInformer,
} from "../runtime/index.js";
import { BranchKubeReads } from "./branch-kube-reads.js";
import { BranchMetrics } from "./branch-metrics.js";
import type { BranchProvisioner } from "./branch-provisioner.js";
import { BranchReconciler } from "./branch-reconciler.js";
import { BranchSecretStore } from "./branch-secret-store.js";

export interface BranchControllerOptions {
  kubeConfig: KubeConfig;
  /** Provisioner per kind; a kind without one gets Failed branches that say how to configure it. */
  provisioners: Partial<Record<BranchKind, BranchProvisioner>>;
  /** How a provisioner is configured (the flag or chart value), quoted to users whose branch has none. */
  provisionerHint: string;
  logger: Logger;
  metrics?: BranchMetrics;
  controllerMetrics?: ControllerMetrics;
  /** Failed after this many retryable errors in a row (default 5). */
  maxAttempts?: number;
  /** Informer resync, ms (default 60 000). */
  resyncMs?: number;
}

export class BranchController {
  readonly metrics: BranchMetrics;
  readonly #o: BranchControllerOptions;
  readonly #branches: Record<BranchKind, ResourceInformer<BranchDatabase>>;
  readonly #sessions: ResourceInformer<ClusterSession>;
  readonly #reconcilers: Record<BranchKind, BranchReconciler>;

  constructor(o: BranchControllerOptions) {
    this.#o = o;
    const kc = o.kubeConfig;
    const resyncMs = o.resyncMs ?? 60_000;
    this.metrics = o.metrics ?? new BranchMetrics();
    this.#branches = {
      PgBranchDatabase: customResourceInformer<BranchDatabase>(kc, pgBranchDatabaseCrd, {
        resyncMs,
        logger: o.logger,
      }),
      MysqlBranchDatabase: customResourceInformer<BranchDatabase>(kc, mysqlBranchDatabaseCrd, {
        resyncMs,
        logger: o.logger,
      }),
    };
    this.#sessions = customResourceInformer<ClusterSession>(kc, clusterSessionCrd, {
      resyncMs,
      logger: o.logger,
    });
    this.metrics.observe(() => BRANCH_KINDS.map((kind) => ({ kind, items: this.#branches[kind].list() })));
    const secrets = new BranchSecretStore(kc);
    const reads = new BranchKubeReads(kc);
    const clients = {
      PgBranchDatabase: pgBranchDatabaseClient(kc),
      MysqlBranchDatabase: mysqlBranchDatabaseClient(kc),
    };
    const make = (kind: BranchKind) =>
      new BranchReconciler({
        kind,
        client: clients[kind] as never,
        secrets,
        reads,
        sessions: () => this.#sessions.list(),
        provisioner: o.provisioners[kind],
        provisionerHint: o.provisionerHint,
        metrics: this.metrics,
        logger: o.logger,
        ...(o.maxAttempts !== undefined ? { maxAttempts: o.maxAttempts } : {}),
      });
    this.#reconcilers = {
      PgBranchDatabase: make("PgBranchDatabase"),
      MysqlBranchDatabase: make("MysqlBranchDatabase"),
    };
  }

  /** Reconciles until `signal` aborts: one leadership term (the runtime's LeadershipTerms never overlaps two). */
  async start(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    this.#o.logger.info(
      {
        provisioners: Object.fromEntries(
          BRANCH_KINDS.map((k) => [k, this.#o.provisioners[k]?.describe() ?? "none"]),
        ),
      },
      "branching controllers started",
    );
    await Promise.all(BRANCH_KINDS.map((kind) => this.#controller(kind).start(signal)));
  }

  #controller(kind: BranchKind): Controller {
    const c = new Controller({
      name: kind === "PgBranchDatabase" ? "pg-branch" : "mysql-branch",
      reconciler: this.#reconcilers[kind],
      concurrency: 4,
      logger: this.#o.logger,
      ...(this.#o.controllerMetrics ? { metrics: this.#o.controllerMetrics } : {}),
    });
    c.watch(this.#branches[kind]);
    c.watch(this.#sessions, { map: (s) => branchesNamedBy(s, kind) });
    return c;
  }
}

function branchesNamedBy(s: ClusterSession, kind: BranchKind): ObjectKey[] {
  const namespace = s.metadata?.namespace;
  if (!namespace) return [];
  return (s.spec.connectParams?.databaseBranches ?? [])
    .filter((b) => b.kind === kind)
    .map((b) => ({ namespace, name: b.name }));
}
