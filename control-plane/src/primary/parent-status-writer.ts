// Writes a parent's status only when it changes, so a reconcile that finds everything in
// place costs no write (and no watch event that would wake it again). The write carries
// the resourceVersion it was computed from: a parent that moved meanwhile answers 409,
// which the controller treats as a conflict (re-read, retry at once).
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
    status,
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
