// One level-triggered step of the branch sync (Primary ≠ Default, DESIGN §7) for one branch
// CR on the Primary. Given its key it reads the Primary's CR and its copy on the Default
// cluster (watch cache, else GET) and moves one step:
//   finalizer → copy deleted there? delete the Primary's CR → an object of that name that is
//   not ours? Conflict, never touched → create the copy → record its uid on the Primary's CR
//   → ttlSeconds down → credentials Secret up → status up.
// A deleted Primary CR deletes its copy, waits until the copy is gone, deletes the mirrored
// Secret and releases the finalizer. Nothing is kept in memory between calls but the
// first-seen times of the Ready histogram: a crash at any line converges, because a copy is
// recognised by its labels (Primary cluster id + Primary CR uid), not by what was recorded.
import { isDeepStrictEqual } from "node:util";
import { CustomObjectsApi, type KubeConfig, type V1Secret } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { describeApiError } from "../../../../lib/api-error.js";
import {
  BRANCH_ENGINES,
  BRANCH_SYNC_FINALIZER,
  type BranchDatabase,
  type BranchDatabaseStatus,
  type BranchKind,
  type ConditionUpdate,
} from "../../../../proto/api/v1alpha1/index.js";
import type { WorkloadClusters } from "../../primary/workload-clusters.js";
import {
  TransientReconcileError,
  keyString,
  withContext,
  type ObjectKey,
  type ReconcileResult,
  type Reconciler,
} from "../../runtime/index.js";
import {
  BranchCopies,
  DefaultClusterError,
  branchClient,
  deleteExact,
  type ReachableDefault,
} from "./branch-copies.js";
import { defaultTarget, type DefaultTarget } from "./branch-copy-informer.js";
import {
  SYNCED_CONDITION,
  SYNC_REASONS,
  conflictCondition,
  copyRecord,
  desiredCopy,
  foreignCopyOwner,
  isCopy,
  mirroredStatus,
  recordedCopyUid,
  syncedOnlyStatus,
} from "./branch-sync-plan.js";
import { BranchSecretConflictError, BranchSecretMirror } from "./branch-secret-mirror.js";
import type { BranchSyncMetrics } from "./branch-sync-metrics.js";

export interface BranchSyncReconcilerOptions {
  kind: BranchKind;
  /** The control plane's own KubeConfig for the Primary (branch CRs, mirrored Secrets). */
  primaryKubeConfig: KubeConfig;
  /** Which cluster is the Default and its current client, asked on every reconcile. */
  clusters: WorkloadClusters;
  /** Our copy from the Default's watch cache: object, null (synced, absent), undefined (cannot answer). */
  cachedCopy?: (kubeConfig: KubeConfig, namespace: string, name: string) => BranchDatabase | null | undefined;
  /** Deadline of each request to the Default cluster, ms. */
  requestTimeoutMs: number;
  /** How often a branch in Conflict, or waiting for its copy to go, is looked at again, ms. */
  recheckMs: number;
  metrics: BranchSyncMetrics;
  log: Logger;
  /** Milliseconds since the epoch (tests only). */
  now?: () => number;
}

type Ref = { namespace: string; name: string };
const refOf = (obj: BranchDatabase): Ref => ({
  namespace: obj.metadata.namespace!,
  name: obj.metadata.name!,
});

export class BranchSyncReconciler implements Reconciler {
  private readonly kind: BranchKind;
  private readonly primaries: ReturnType<typeof branchClient>;
  private readonly primaryApi: CustomObjectsApi;
  private readonly secrets: BranchSecretMirror;
  private readonly copies: BranchCopies;
  /** When each new branch was first seen (by key), for the Ready histogram. */
  private readonly firstSeen = new Map<string, { uid: string; at: number }>();
  private readonly now: () => number;

  constructor(private readonly o: BranchSyncReconcilerOptions) {
    this.kind = o.kind;
    this.primaries = branchClient(o.kind, o.primaryKubeConfig);
    this.primaryApi = o.primaryKubeConfig.makeApiClient(CustomObjectsApi);
    this.secrets = new BranchSecretMirror(o.primaryKubeConfig);
    this.copies = new BranchCopies(o.kind, o.requestTimeoutMs);
    this.now = o.now ?? Date.now;
  }

  async reconcile(key: ObjectKey): Promise<ReconcileResult> {
    const ref = { namespace: key.namespace!, name: key.name };
    const primary = await this.primaries.get(ref);
    if (!primary || isCopy(primary)) {
      this.firstSeen.delete(keyString(ref));
      return;
    }
    const target = defaultTarget(this.o.clusters);
    if (!target)
      throw new TransientReconcileError(
        "the cluster configuration is not loaded yet or names no Default cluster; branches wait for it",
      );
    // The Primary is the Default: its own branching controllers serve the CR, there is nothing to copy.
    if (target.cluster === target.primaryClusterId) return;
    try {
      if (primary.metadata.deletionTimestamp) return await this.finalize(primary, target);
      return await this.sync(primary, target);
    } catch (err) {
      if (err instanceof DefaultClusterError) return this.reportDefaultFailure(primary, err);
      throw err;
    }
  }

  private async sync(primary: BranchDatabase, target: DefaultTarget): Promise<ReconcileResult> {
    await this.ensureFinalizer(primary);
    const ref = refOf(primary);
    const uid = primary.metadata.uid!;
    const recorded = recordedCopyUid(primary, target.cluster);
    this.noteFirstSeen(primary, recorded);
    const at = this.copies.reachable(target, "copy the branch");
    const cached = this.o.cachedCopy?.(at.kubeConfig, ref.namespace, ref.name);
    let copy = cached === undefined ? await this.copies.get(at, ref) : cached;
    // A copy that existed and is gone, replaced or going was deleted on the Default (its TTL
    // lapsed there): the branch ends on the Primary too. A watch cache may lag, so the API
    // server confirms before anything is deleted.
    const deletedThere = (c: BranchDatabase | null) =>
      (recorded !== undefined && c?.metadata.uid !== recorded) ||
      (c !== null && !foreignCopyOwner(c, at.primaryClusterId, uid) && !!c.metadata.deletionTimestamp);
    if (deletedThere(copy) && cached !== undefined) copy = await this.copies.get(at, ref);
    if (deletedThere(copy)) return this.deletePrimary(primary, at);
    if (!copy) {
      const made = await this.copies.create(at, desiredCopy(primary, at.primaryClusterId));
      copy = made.copy;
      if (made.created) {
        this.o.metrics.count(this.kind, "created");
        this.o.log.info(
          { branch: keyString(ref), cluster: at.cluster },
          "branch copied to the Default cluster",
        );
      }
    }
    const owner = foreignCopyOwner(copy, at.primaryClusterId, uid);
    if (owner) return this.conflict(primary, conflictCondition(this.kind, primary, at.cluster, owner));
    if (recorded !== copy.metadata.uid) await this.recordCopy(primary, at.cluster, copy.metadata.uid!);
    const ttlSeconds = primary.spec.ttlSeconds;
    if (ttlSeconds !== undefined && copy.spec.ttlSeconds !== ttlSeconds) {
      // The one field that changes after creation (the CRD refuses changes to the others).
      copy = await this.copies.setTtl(at, copy, ttlSeconds);
      this.o.metrics.count(this.kind, "updated");
    }
    let secretReady: boolean;
    try {
      secretReady = await this.mirrorSecret(at, primary, copy);
    } catch (err) {
      if (!(err instanceof BranchSecretConflictError)) throw err;
      const condition = { type: SYNCED_CONDITION, status: "False" as const, reason: SYNC_REASONS.conflict };
      return this.conflict(primary, { ...condition, message: err.message });
    }
    return this.writeMirrored(primary, copy, at, secretReady);
  }

  /** Status up: the copy's fields and conditions, `Synced`, and the Ready latency once. */
  private async writeMirrored(
    primary: BranchDatabase,
    copy: BranchDatabase,
    at: ReachableDefault,
    secretReady: boolean,
  ): Promise<ReconcileResult> {
    const waiting = copy.status?.phase === "Ready" && !secretReady;
    const secret = `${primary.metadata.namespace}/${copy.status?.secretName}`;
    const synced: ConditionUpdate = waiting
      ? {
          type: SYNCED_CONDITION,
          status: "False",
          reason: SYNC_REASONS.waitingForSecret,
          message:
            `the copy on the Default cluster ${at.cluster} is Ready but its Secret ${secret} is not ` +
            `there yet (or not owned by the copy)`,
        }
      : {
          type: SYNCED_CONDITION,
          status: "True",
          reason: SYNC_REASONS.copied,
          message: `copied to the Default cluster ${at.cluster} (uid ${copy.metadata.uid})`,
        };
    const before = primary.status?.phase;
    const now = new Date(this.now());
    const status = mirroredStatus(primary, copy, synced, now, waiting ? { phase: "Pending" } : {});
    if (await this.writeStatus(primary, status)) this.o.metrics.count(this.kind, "status");
    if (status.phase === "Ready" && before !== "Ready") this.observeReady(primary);
    // The Secret is not watched (the Default grants `get` only): look again shortly.
    return waiting ? { requeueAfterMs: Math.min(1_000, this.o.recheckMs) } : undefined;
  }

  /** Secret up. False while the copy names a Secret that is not there (or not the copy's) yet. */
  private async mirrorSecret(at: ReachableDefault, primary: BranchDatabase, copy: BranchDatabase) {
    const name = copy.status?.secretName;
    if (!name) return true;
    const source = await this.copies.readSecret(at, copy.metadata.namespace!, name);
    if (!source || !ownedBy(source, copy)) return false;
    if ((await this.secrets.mirror(this.kind, primary, source)) !== "unchanged")
      this.o.metrics.count(this.kind, "status");
    return true;
  }

  /** Primary CR deleted: the copy goes first, then the mirrored Secret and the finalizer. */
  private async finalize(primary: BranchDatabase, target: DefaultTarget): Promise<ReconcileResult> {
    const finalizers = primary.metadata.finalizers ?? [];
    if (!finalizers.includes(BRANCH_SYNC_FINALIZER)) return;
    const ref = refOf(primary);
    const at = this.copies.reachable(target, "delete the branch's copy");
    const copy = await this.copies.get(at, ref);
    if (copy && !foreignCopyOwner(copy, at.primaryClusterId, primary.metadata.uid!)) {
      if (!copy.metadata.deletionTimestamp) {
        await this.copies.delete(at, copy);
        this.o.metrics.count(this.kind, "copy_deleted");
        this.o.log.info({ branch: keyString(ref), cluster: at.cluster }, "branch deleted; deleting its copy");
      }
      const message = `deleting the copy on the Default cluster ${at.cluster}; the branch goes once it is gone`;
      const condition = {
        type: SYNCED_CONDITION,
        status: "False" as const,
        reason: SYNC_REASONS.deletingCopy,
      };
      await this.writeStatus(
        primary,
        syncedOnlyStatus(primary, { ...condition, message }, new Date(this.now())),
      );
      // The copy informer's delete event usually wakes this branch first.
      return { requeueAfterMs: this.o.recheckMs };
    }
    const secretName = primary.status?.secretName;
    if (secretName) await this.secrets.remove(this.kind, primary, secretName);
    try {
      await this.primaries.patch(
        ref,
        { metadata: { finalizers: finalizers.filter((f) => f !== BRANCH_SYNC_FINALIZER) } },
        { resourceVersion: primary.metadata.resourceVersion! },
      );
    } catch (err) {
      throw withContext(`failed to remove the finalizer of ${this.kind} ${keyString(ref)}`, err);
    }
    this.firstSeen.delete(keyString(ref));
  }

  private async ensureFinalizer(primary: BranchDatabase): Promise<void> {
    const finalizers = primary.metadata.finalizers ?? [];
    if (finalizers.includes(BRANCH_SYNC_FINALIZER)) return;
    await this.patchMetadata(
      primary,
      { finalizers: [...finalizers, BRANCH_SYNC_FINALIZER] },
      "add the finalizer to",
    );
  }

  /** Records the copy's cluster and uid on the Primary CR, so a copy deleted there is told from one not made yet. */
  private async recordCopy(primary: BranchDatabase, cluster: string, copyUid: string): Promise<void> {
    await this.patchMetadata(primary, { annotations: copyRecord(cluster, copyUid) }, "record the copy of");
  }

  private async patchMetadata(
    primary: BranchDatabase,
    metadata: { finalizers?: string[]; annotations?: Record<string, string> },
    doing: string,
  ): Promise<void> {
    const ref = refOf(primary);
    try {
      const updated = await this.primaries.patch(
        ref,
        { metadata },
        { resourceVersion: primary.metadata.resourceVersion! },
      );
      primary.metadata = updated.metadata;
    } catch (err) {
      throw withContext(`failed to ${doing} ${this.kind} ${keyString(ref)}`, err);
    }
  }

  private async deletePrimary(primary: BranchDatabase, at: ReachableDefault): Promise<void> {
    this.o.log.info(
      { branch: keyString(refOf(primary)), cluster: at.cluster },
      "the branch's copy was deleted on the Default cluster; deleting the branch on the Primary",
    );
    await deleteExact(this.primaryApi, BRANCH_ENGINES[this.kind].plural, primary);
    this.o.metrics.count(this.kind, "primary_deleted");
  }

  /** Never adopted: the Primary's CR fails with the condition; looked at again until the object goes. */
  private async conflict(primary: BranchDatabase, condition: ConditionUpdate): Promise<ReconcileResult> {
    this.o.metrics.count(this.kind, "conflict");
    await this.writeStatus(primary, syncedOnlyStatus(primary, condition, new Date(this.now()), "Failed"));
    return { requeueAfterMs: this.o.recheckMs };
  }

  /** The Default did not answer or refused: say so in `Synced`, then retry with backoff. */
  private async reportDefaultFailure(primary: BranchDatabase, err: DefaultClusterError): Promise<never> {
    this.o.metrics.count(this.kind, err.reason === SYNC_REASONS.unreachable ? "unreachable" : "refused");
    const deleting = !!primary.metadata.deletionTimestamp;
    const message = deleting
      ? `${err.message} (the branch stays until its copy on the Default cluster is deleted)`
      : err.message;
    const condition = { type: SYNCED_CONDITION, status: "False" as const, reason: err.reason, message };
    const phase = deleting || primary.status?.phase ? undefined : "Pending";
    try {
      await this.writeStatus(primary, syncedOnlyStatus(primary, condition, new Date(this.now()), phase));
    } catch (writeErr) {
      this.o.log.warn({ err: describeApiError(writeErr) }, "could not record the Default cluster failure");
    }
    throw new TransientReconcileError(message, { cause: err });
  }

  /** Merge-patches the status when it changes anything (null removes a field); true when written. */
  private async writeStatus(primary: BranchDatabase, status: Record<string, unknown>): Promise<boolean> {
    const current = (primary.status ?? {}) as Record<string, unknown>;
    const next: Record<string, unknown> = { ...current };
    for (const [k, v] of Object.entries(status)) {
      if (v === null) delete next[k];
      else next[k] = v;
    }
    if (isDeepStrictEqual(next, current)) return false;
    const updated = await this.primaries.patchStatus(
      refOf(primary),
      status as Partial<BranchDatabaseStatus>,
      {
        resourceVersion: primary.metadata.resourceVersion!,
      },
    );
    primary.metadata = updated.metadata;
    primary.status = updated.status;
    return true;
  }

  private noteFirstSeen(primary: BranchDatabase, recorded: string | undefined): void {
    const key = keyString(refOf(primary));
    if (this.firstSeen.get(key)?.uid === primary.metadata.uid) return;
    // Only a branch seen before it had a copy or a status: older ones would measure this process's start.
    if (recorded === undefined && primary.status?.phase === undefined)
      this.firstSeen.set(key, { uid: primary.metadata.uid!, at: this.now() });
  }

  private observeReady(primary: BranchDatabase): void {
    const key = keyString(refOf(primary));
    const seen = this.firstSeen.get(key);
    if (!seen || seen.uid !== primary.metadata.uid) return;
    this.o.metrics.observeReady(this.kind, (this.now() - seen.at) / 1000);
    this.firstSeen.delete(key);
  }
}

/** The Secret the branching controller wrote for this copy (owned by it), not any Secret of that name. */
function ownedBy(secret: V1Secret, copy: BranchDatabase): boolean {
  return (secret.metadata?.ownerReferences ?? []).some((o) => o.uid === copy.metadata.uid);
}
