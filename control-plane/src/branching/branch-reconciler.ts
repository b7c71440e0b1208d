// One branch CR in the cluster that makes databases (the Default cluster, DESIGN §7),
// level-triggered, one step per call:
//   deleted   → drop the database and user named in its Secret, delete the Secret, release
//               the finalizer;
//   new       → finalizer; identifiers generated and written to the Secret before anything
//               is made (a restart finds the same names); status Pending;
//   Pending   → source resolved, copy planned, the provisioner makes the branch; the Secret
//               gets the address and URL; status Ready (or Failed with the reason);
//   Ready/Failed → lifetime: expiresAt kept ahead while sessions use it, CR deleted when it lapses.
// Failures take the runtime's error kinds: one a retry cannot fix (a source variable that is
// not a URL, bad credentials, a filter the source rejects) is a TerminalReconcileError, which
// the Controller hands to onTerminalError: Failed with its reason. Others are transient: the
// Controller retries them with backoff, the Ready condition shows the attempt, and the
// `maxAttempts`-th in a row is terminal, so the CLI waiting for the branch gets an answer. The
// attempts are counted in that condition, not in memory: a restart or failover goes on counting.
import type { Logger } from "pino";
import {
  BRANCH_TTL_SECONDS_DEFAULT,
  branchSecretName,
  setConditions,
  type BranchDatabase,
  type BranchDatabaseStatus,
  type BranchKind,
  type ClusterSession,
  type CustomResourceClient,
} from "../../../proto/api/v1alpha1/index.js";
import {
  reconcileErrorKind,
  TerminalReconcileError,
  TransientReconcileError,
  type ObjectKey,
  type ReconcileResult,
  type Reconciler,
} from "../runtime/index.js";
import { BranchError, type BranchErrorKind } from "./branch-error.js";
import { generateBranchIdentifiers } from "./branch-identifiers.js";
import type { BranchKubeReads } from "./branch-kube-reads.js";
import { decideLifetime, sessionsUsingBranch } from "./branch-lifetime.js";
import type { BranchMetrics } from "./branch-metrics.js";
import type { BranchProvisioner } from "./branch-provisioner.js";
import type { BranchSecretStore } from "./branch-secret-store.js";
import { resolveBranchSource } from "./branch-source.js";
import { branchConnectionUrl } from "./connection-url.js";
import { CopyPlanError, planCopy } from "./copy-plan.js";

/** Finalizer of a branch CR in the cluster that made its database. */
export const BRANCH_CLEANUP_FINALIZER = "switchyard.dev/branch-cleanup";

type BranchClient = CustomResourceClient<BranchDatabase["spec"], BranchDatabaseStatus>;

export interface BranchReconcilerOptions {
  kind: BranchKind;
  client: BranchClient;
  secrets: BranchSecretStore;
  reads: BranchKubeReads;
  /** This cluster's ClusterSessions (an informer's cache): who uses a branch. */
  sessions: () => readonly ClusterSession[];
  /** The provisioner for this kind; undefined when none is configured (branches fail with the fix). */
  provisioner: BranchProvisioner | undefined;
  /** What configures a provisioner, for the message of a branch that has none. */
  provisionerHint: string;
  metrics: BranchMetrics;
  logger: Logger;
  /** Failed after this many retryable errors in a row (default 5). */
  maxAttempts?: number;
  now?: () => number;
}

interface Failure {
  reason: string;
  message: string;
}

// The Ready message of a branch whose last attempt failed and is retried.
const RETRYING = /^attempt (\d+) failed, retrying: /;
const retryingMessage = (attempt: number, message: string) =>
  `attempt ${attempt} failed, retrying: ${message}`;

/** Attempts in a row that failed so far, as the CR's Ready condition says (0 when it shows none). */
export function failedAttempts(status: BranchDatabaseStatus | undefined): number {
  const ready = status?.conditions?.find((c) => c.type === "Ready");
  const n = ready?.status === "False" ? RETRYING.exec(ready.message ?? "")?.[1] : undefined;
  return n === undefined ? 0 : Number(n);
}

/** A failed attempt's reason and kind: whether retrying can help. */
function failureOf(err: unknown): Failure & { kind: BranchErrorKind } {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof BranchError) return { reason: err.reason, message, kind: err.kind };
  // A spec.copy the plan refuses, as the CR wrote it.
  if (err instanceof CopyPlanError) return { reason: "CopyInvalid", message, kind: "terminal" };
  if (err instanceof TerminalReconcileError) return { reason: err.reason, message, kind: "terminal" };
  return { reason: "ProvisionFailed", message, kind: "transient" };
}

export class BranchReconciler implements Reconciler {
  readonly #o: BranchReconcilerOptions;

  constructor(o: BranchReconcilerOptions) {
    this.#o = o;
  }

  async reconcile(key: ObjectKey, signal: AbortSignal): Promise<ReconcileResult> {
    const ref = { namespace: key.namespace!, name: key.name };
    const cr = await this.#o.client.get(ref);
    if (!cr) return;
    const secretName = branchSecretName(this.#o.kind, ref.name);
    if (cr.metadata.deletionTimestamp) return this.#finalize(cr, secretName, signal);
    const finalizers = cr.metadata.finalizers ?? [];
    if (!finalizers.includes(BRANCH_CLEANUP_FINALIZER)) {
      await this.#o.client.patch(
        ref,
        { metadata: { finalizers: [...finalizers, BRANCH_CLEANUP_FINALIZER] } },
        { resourceVersion: cr.metadata.resourceVersion! },
      );
      return { requeueAfterMs: 0 };
    }
    const phase = cr.status?.phase;
    if (phase === "Ready" || phase === "Failed") return this.#lifetime(cr);
    return this.#make(cr, secretName, signal);
  }

  async #make(cr: BranchDatabase, secretName: string, signal: AbortSignal): Promise<ReconcileResult> {
    const { kind } = this.#o;
    const namespace = cr.metadata.namespace!;
    const name = cr.metadata.name!;
    const provisioner = this.#o.provisioner;
    if (!provisioner) {
      throw new TerminalReconcileError(
        "NoProvisioner",
        `no ${kind === "PgBranchDatabase" ? "PostgreSQL" : "MySQL/MariaDB"} branch provisioner is configured in this cluster: ${this.#o.provisionerHint}`,
      );
    }
    const uid = cr.metadata.uid!;
    const stored = await this.#o.secrets.read(namespace, secretName, uid);
    if (stored.state === "foreign") {
      throw new TerminalReconcileError(
        "SecretConflict",
        `Secret ${secretName} in namespace ${namespace} exists and is not this branch's; rename or delete it, or give the branch another name`,
      );
    }
    let credentials = stored.state === "ours" ? stored.credentials : undefined;
    if (stored.state === "ours" && !credentials) {
      throw new TransientReconcileError(`Secret ${secretName} is incomplete; reading it again`);
    }
    if (!credentials) {
      const ids = generateBranchIdentifiers(kind, name);
      const fresh = {
        host: "",
        port: "",
        database: ids.database,
        user: ids.user,
        password: ids.password,
        url: "",
      };
      if (!(await this.#o.secrets.create(kind, cr, secretName, fresh))) {
        throw new TransientReconcileError(`Secret ${secretName} was created meanwhile; reading it again`);
      }
      credentials = fresh;
    }
    if (cr.status?.phase !== "Pending" || cr.status.branchName !== credentials.database) {
      await this.#writeStatus(
        cr,
        { phase: "Pending", branchName: credentials.database, secretName },
        {
          status: "False",
          reason: "Provisioning",
          message: `making ${credentials.database}`,
        },
      );
    }
    const started = (this.#o.now ?? Date.now)();
    let made;
    try {
      const reads = await this.#o.reads.target(namespace, cr.spec.target);
      const source = await resolveBranchSource(kind, namespace, cr.spec, reads, this.#o.reads);
      const plan = planCopy(cr.spec.copy);
      made = await provisioner.create(
        {
          kind,
          cr: { namespace, name, uid },
          copy: { mode: cr.spec.copy?.mode ?? "schema", filters: cr.spec.copy?.filters ?? [] },
          plan,
          source,
          identifiers: {
            database: credentials.database,
            user: credentials.user,
            password: credentials.password,
          },
        },
        signal,
      );
    } catch (err) {
      if (signal.aborted) throw err;
      throw await this.#failedAttempt(cr, err);
    }
    const url = branchConnectionUrl(kind, {
      host: made.host,
      port: made.port,
      database: made.branchName,
      user: made.user,
      password: made.password,
    });
    await this.#o.secrets.update(namespace, secretName, {
      host: made.host,
      port: String(made.port),
      database: made.branchName,
      user: made.user,
      password: made.password,
      url,
    });
    const ms = (this.#o.now ?? Date.now)() - started;
    this.#o.metrics.made(kind, made.method ?? "unknown", ms / 1000);
    const ttl = cr.spec.ttlSeconds ?? BRANCH_TTL_SECONDS_DEFAULT;
    const now = (this.#o.now ?? Date.now)();
    await this.#writeStatus(
      cr,
      {
        phase: "Ready",
        branchName: made.branchName,
        secretName,
        expiresAt: new Date(now + ttl * 1000).toISOString(),
      },
      {
        status: "True",
        reason: "Provisioned",
        message: `${made.branchName} made by ${made.method ?? provisioner.name} copy in ${ms} ms`,
      },
    );
    this.#o.logger.info(
      { kind, namespace, name, branch: made.branchName, method: made.method, ms },
      "database branch ready",
    );
    return { requeueAfterMs: ttl * 1000 };
  }

  /**
   * A failed attempt to make the branch, as the error the Controller acts on: terminal when
   * retrying cannot help or this was the last attempt; else transient, the attempt shown.
   */
  async #failedAttempt(
    cr: BranchDatabase,
    err: unknown,
  ): Promise<TerminalReconcileError | TransientReconcileError> {
    const failure = failureOf(err);
    this.#o.metrics.failed(this.#o.kind, failure.reason);
    const attempt = failedAttempts(cr.status) + 1;
    if (failure.kind === "terminal" || attempt >= (this.#o.maxAttempts ?? 5))
      return new TerminalReconcileError(failure.reason, failure.message, { cause: err });
    await this.#writeStatus(
      cr,
      {},
      { status: "False", reason: failure.reason, message: retryingMessage(attempt, failure.message) },
    );
    return new TransientReconcileError(failure.message, { cause: err });
  }

  /** A terminal failure of a branch being made: Failed with its reason, expiring a TTL later. */
  async onTerminalError(key: ObjectKey, error: TerminalReconcileError): Promise<void> {
    const cr = await this.#o.client.get({ namespace: key.namespace!, name: key.name });
    // Gone or going: the finalizer (this reconciler's) decides what is left to do.
    if (!cr || cr.metadata.deletionTimestamp) return;
    await this.#fail(cr, { reason: error.reason, message: error.message });
  }

  async #lifetime(cr: BranchDatabase): Promise<ReconcileResult> {
    const namespace = cr.metadata.namespace!;
    const name = cr.metadata.name!;
    const decision = decideLifetime({
      now: (this.#o.now ?? Date.now)(),
      ttlSeconds: cr.spec.ttlSeconds ?? BRANCH_TTL_SECONDS_DEFAULT,
      phase: cr.status?.phase,
      expiresAt: cr.status?.expiresAt,
      sessions: sessionsUsingBranch(this.#o.sessions(), namespace, this.#o.kind, name),
      recordedSessions: cr.status?.sessions,
    });
    if (decision.expire) {
      this.#o.logger.info({ kind: this.#o.kind, namespace, name }, "database branch expired; deleting it");
      this.#o.metrics.expired(this.#o.kind);
      await this.#o.client.delete({ namespace, name });
      return;
    }
    if (decision.write) {
      await this.#o.client.patchStatus({ namespace, name }, decision.write, {
        resourceVersion: cr.metadata.resourceVersion!,
      });
    }
    return decision.recheckMs !== undefined ? { requeueAfterMs: decision.recheckMs } : undefined;
  }

  async #finalize(cr: BranchDatabase, secretName: string, signal: AbortSignal): Promise<ReconcileResult> {
    const finalizers = cr.metadata.finalizers ?? [];
    if (!finalizers.includes(BRANCH_CLEANUP_FINALIZER)) return;
    const namespace = cr.metadata.namespace!;
    const name = cr.metadata.name!;
    const stored = await this.#o.secrets.read(namespace, secretName, cr.metadata.uid!);
    const credentials = stored.state === "ours" ? stored.credentials : undefined;
    if (credentials && this.#o.provisioner) {
      try {
        await this.#o.provisioner.drop(
          {
            kind: this.#o.kind,
            cr: { namespace, name },
            branchName: credentials.database,
            user: credentials.user,
          },
          signal,
        );
      } catch (err) {
        // A branch being deleted is never Failed: whatever stops the drop is retried.
        if (reconcileErrorKind(err) !== "terminal") throw err;
        throw new TransientReconcileError(err instanceof Error ? err.message : String(err), { cause: err });
      }
    }
    await this.#o.secrets.delete(namespace, secretName, cr.metadata.uid!);
    await this.#o.client.patch(
      { namespace, name },
      { metadata: { finalizers: finalizers.filter((f) => f !== BRANCH_CLEANUP_FINALIZER) } },
      { resourceVersion: cr.metadata.resourceVersion! },
    );
    this.#o.logger.info({ kind: this.#o.kind, namespace, name }, "database branch dropped");
  }

  async #fail(cr: BranchDatabase, f: Failure): Promise<void> {
    const now = (this.#o.now ?? Date.now)();
    const ttl = cr.spec.ttlSeconds ?? BRANCH_TTL_SECONDS_DEFAULT;
    await this.#writeStatus(
      cr,
      { phase: "Failed", expiresAt: new Date(now + ttl * 1000).toISOString() },
      { status: "False", reason: f.reason, message: f.message },
    );
    this.#o.logger.warn(
      {
        kind: this.#o.kind,
        namespace: cr.metadata.namespace,
        name: cr.metadata.name,
        reason: f.reason,
        err: f.message,
      },
      "database branch failed",
    );
  }

  async #writeStatus(
    cr: BranchDatabase,
    fields: Partial<BranchDatabaseStatus>,
    ready: { status: "True" | "False"; reason: string; message: string },
  ): Promise<void> {
    const { conditions } = setConditions(
      cr.status?.conditions,
      [{ type: "Ready", ...ready }],
      new Date((this.#o.now ?? Date.now)()),
      cr.metadata.generation,
    );
    const status = { ...fields, conditions, observedGeneration: cr.metadata.generation ?? 0 };
    const updated = await this.#o.client.patchStatus(
      { namespace: cr.metadata.namespace!, name: cr.metadata.name! },
      status,
      { resourceVersion: cr.metadata.resourceVersion! },
    );
    // Later writes of this call build on what was stored.
    cr.metadata.resourceVersion = updated.metadata.resourceVersion;
    cr.status = updated.status;
  }
}
