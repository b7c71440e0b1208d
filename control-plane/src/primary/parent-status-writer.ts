// Writes a parent's status only when it changes, so a reconcile that finds everything in
// place costs no write (and no watch event that would wake it again). The write carries
// the resourceVersion it was computed from: a parent that moved meanwhile answers 409,
// which the controller treats as a conflict (re-read, retry at once). A merge patch keeps
// every key it does not name, so a key the new status drops (a child's `error` once it
// answers again) is sent as null, which deletes it.
import type {
  MultiClusterSession,
  MultiClusterSessionStatus,
  multiClusterSessionClient,
} from "../../../proto/api/v1alpha1/index.js";

export type ParentClient = ReturnType<typeof multiClusterSessionClient>;

/** Merge-patches the status fields in `status` when any differs; returns the parent as it now is. */
export async function writeParentStatus(
  parents: ParentClient,
  parent: MultiClusterSession,
  status: Partial<MultiClusterSessionStatus>,
): Promise<MultiClusterSession> {
  const current = (parent.status ?? {}) as Record<string, unknown>;
  const changed = Object.entries(status).some(([k, v]) => !equivalent(v, current[k]));
  if (!changed) return parent;
  const updated = await parents.patchStatus(
    { namespace: parent.metadata.namespace!, name: parent.metadata.name! },
    withDeletions(status, current),
    { resourceVersion: parent.metadata.resourceVersion! },
  );
  parent.metadata = updated.metadata;
  parent.status = updated.status;
  return updated;
}

/** Equal up to key order, where null map entries (merge-patch deletions) count as absent. */
export function equivalent(a: unknown, b: unknown): boolean {
  return JSON.stringify(normalize(a)) === JSON.stringify(normalize(b));
}

function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (v && typeof v === "object") {
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .filter(([, x]) => x !== null && x !== undefined)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, x]) => [k, normalize(x)]),
    );
  }
  return v;
}

/**
 * `status` with each entry of `children` replaced whole: a key that the current entry has
 * and the new one lacks is sent as null. The map itself is merged (a cluster left out is
 * kept: the reconciler drops one explicitly, with null, once its child is gone).
 */
export function withDeletions(
  status: Partial<MultiClusterSessionStatus>,
  current: Record<string, unknown>,
): Record<string, unknown> {
  const next = status.children as Record<string, Record<string, unknown> | null> | undefined;
  const before = current.children as Record<string, Record<string, unknown> | null> | undefined;
  if (!next || !before) return status;
  const children: Record<string, unknown> = {};
  for (const [cluster, entry] of Object.entries(next)) {
    const old = before[cluster];
    if (!entry || !old) {
      children[cluster] = entry;
      continue;
    }
    const dropped = Object.keys(old).filter((k) => !(k in entry));
    children[cluster] = { ...entry, ...Object.fromEntries(dropped.map((k) => [k, null])) };
  }
  return { ...status, children };
}
