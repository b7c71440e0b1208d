// Pure decisions of the branch sync (Primary ≠ Default, DESIGN §7): what a branch CR's copy
// on the Default cluster looks like, whether an object found there is ours, which copy the
// Primary's CR has recorded, and the status the Primary's CR gets from its copy. No I/O:
// branch-sync-reconciler.ts acts on these answers.
import {
  BRANCH_SYNC_ANNOTATIONS,
  BRANCH_SYNC_LABELS,
  LABELS,
  setConditions,
  type BranchDatabase,
  type BranchDatabaseSpec,
  type BranchDatabaseStatus,
  type BranchKind,
  type ConditionUpdate,
  type NewResource,
} from "../../../../proto/api/v1alpha1/index.js";

/** The condition the sync controller owns on a Primary branch CR. */
export const SYNCED_CONDITION = "Synced";

/** Reasons of `Synced` (True: Copied; False: the others). */
export const SYNC_REASONS = {
  /** The copy exists on the Default cluster and its status is mirrored. */
  copied: "Copied",
  /** An object of that name on the Default cluster was not made by this sync; it is left alone. */
  conflict: "Conflict",
  /** The Default cluster did not answer (or has no usable client); retried with backoff. */
  unreachable: "DefaultClusterUnreachable",
  /** The Default cluster answered with a refusal (permissions, a missing namespace, validation). */
  refused: "CopyRefused",
  /** The copy is Ready but its credentials Secret is not there (yet). */
  waitingForSecret: "WaitingForSecret",
  /** The Primary CR is being deleted: its copy is deleted first. */
  deletingCopy: "DeletingCopy",
} as const;

/** Status fields the Default cluster's branching controller writes and the Primary's CR mirrors. */
export const MIRRORED_FIELDS = ["phase", "branchName", "secretName", "expiresAt", "sessions"] as const;

/** Label selector of every copy this Primary made (for the Default cluster's informer). */
export function copySelector(primaryClusterId: string): string {
  return `${LABELS.primary}=${primaryClusterId},${BRANCH_SYNC_LABELS.primaryUid}`;
}

/**
 * A branch CR that is itself some Primary's copy (it has the uid label). A cluster can be the
 * Default of another Primary: its copies are never copied again.
 */
export function isCopy(obj: BranchDatabase): boolean {
  return obj.metadata.labels?.[BRANCH_SYNC_LABELS.primaryUid] !== undefined;
}

/** The copy of `primary` to create on the Default cluster: same namespace, name, labels and spec. */
export function desiredCopy(
  primary: BranchDatabase,
  primaryClusterId: string,
): NewResource<BranchDatabaseSpec> {
  return {
    metadata: {
      name: primary.metadata.name!,
      namespace: primary.metadata.namespace!,
      labels: {
        ...primary.metadata.labels,
        [LABELS.primary]: primaryClusterId,
        [BRANCH_SYNC_LABELS.primaryUid]: primary.metadata.uid!,
      },
    },
    spec: primary.spec,
  };
}

/** Undefined when `copy` is ours; otherwise who it belongs to, for the Conflict message. */
export function foreignCopyOwner(
  copy: BranchDatabase,
  primaryClusterId: string,
  primaryUid: string,
): string | undefined {
  const labels = copy.metadata.labels ?? {};
  const uid = labels[BRANCH_SYNC_LABELS.primaryUid];
  const cluster = labels[LABELS.primary];
  if (uid === primaryUid && cluster === primaryClusterId) return undefined;
  if (uid === undefined) return `no Primary (it has no ${BRANCH_SYNC_LABELS.primaryUid} label)`;
  if (cluster !== primaryClusterId) return `Primary ${cluster ?? "(unnamed)"}`;
  return `another branch CR of this name (uid ${uid}), deleted or recreated since`;
}

/** The copy the Primary's CR recorded on `cluster`, if any. */
export function recordedCopyUid(primary: BranchDatabase, cluster: string): string | undefined {
  const a = primary.metadata.annotations ?? {};
  return a[BRANCH_SYNC_ANNOTATIONS.copyCluster] === cluster ? a[BRANCH_SYNC_ANNOTATIONS.copyUid] : undefined;
}

/** The annotations that record `copy` on `cluster`. */
export function copyRecord(cluster: string, copyUid: string): Record<string, string> {
  return { [BRANCH_SYNC_ANNOTATIONS.copyCluster]: cluster, [BRANCH_SYNC_ANNOTATIONS.copyUid]: copyUid };
}

/**
 * What a Primary CR's status becomes from its copy's: the mirrored fields (a field the copy
 * lacks is null, which a merge patch removes), the copy's conditions plus `Synced`, and
 * `observedGeneration` once the copy's status describes the copy's current spec. Until the
 * copy has a phase the Primary shows `Pending`.
 */
export function mirroredStatus(
  primary: BranchDatabase,
  copy: BranchDatabase,
  synced: ConditionUpdate,
  now: Date,
  overrides: Partial<Pick<BranchDatabaseStatus, "phase">> = {},
): Record<string, unknown> {
  const from = (copy.status ?? {}) as Record<string, unknown>;
  const status: Record<string, unknown> = {};
  for (const f of MIRRORED_FIELDS) status[f] = from[f] ?? null;
  status.phase = overrides.phase ?? copy.status?.phase ?? "Pending";
  const own = primary.status?.conditions?.filter((c) => c.type === SYNCED_CONDITION);
  const syncedNow = setConditions(own, [synced], now, primary.metadata.generation).conditions;
  status.conditions = [
    ...(copy.status?.conditions ?? []).filter((c) => c.type !== SYNCED_CONDITION),
    ...syncedNow,
  ];
  const caughtUp =
    copy.status?.observedGeneration !== undefined &&
    copy.status.observedGeneration === copy.metadata.generation;
  if (caughtUp && primary.metadata.generation !== undefined)
    status.observedGeneration = primary.metadata.generation;
  return status;
}

/** Only `Synced` changes (and `phase`, when given): failures that say nothing of the branch itself. */
export function syncedOnlyStatus(
  primary: BranchDatabase,
  synced: ConditionUpdate,
  now: Date,
  phase?: BranchDatabaseStatus["phase"],
): Record<string, unknown> {
  return {
    ...(phase ? { phase } : {}),
    conditions: setConditions(primary.status?.conditions, [synced], now, primary.metadata.generation)
      .conditions,
  };
}

/** The Conflict condition: what is in the way, whose it is, and the fix. */
export function conflictCondition(
  kind: BranchKind,
  primary: BranchDatabase,
  cluster: string,
  owner: string,
): ConditionUpdate {
  const ns = primary.metadata.namespace!;
  const name = primary.metadata.name!;
  return {
    type: SYNCED_CONDITION,
    status: "False",
    reason: SYNC_REASONS.conflict,
    message:
      `${kind} ${ns}/${name} already exists on the Default cluster ${cluster} and belongs to ${owner}; ` +
      `it is left untouched. Delete it on ${cluster} (kubectl -n ${ns} delete ${kind.toLowerCase()} ${name}) ` +
      `and this branch is copied, or delete this branch and create it under another name`,
  };
}
