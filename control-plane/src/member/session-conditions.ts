// metav1.Condition bookkeeping for ClusterSession status: set a condition by type,
// keeping lastTransitionTime when its status did not change, and tell whether a status
// write would change anything (so resyncs do not write).
import type { StatusCondition } from "../crds/index.js";

export type ConditionUpdate = Pick<StatusCondition, "type" | "status" | "reason" | "message">;

export function setCondition(
  existing: readonly StatusCondition[] | undefined,
  update: ConditionUpdate,
  generation: number | undefined,
  now: Date,
): StatusCondition[] {
  const list = [...(existing ?? [])];
  const i = list.findIndex((c) => c.type === update.type);
  const prev = i >= 0 ? list[i] : undefined;
  const next: StatusCondition = {
    ...update,
    lastTransitionTime:
      prev && prev.status === update.status
        ? prev.lastTransitionTime
        : now.toISOString().replace(/\.\d{3}Z$/, "Z"),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

export function sameCondition(a: StatusCondition | undefined, b: ConditionUpdate): boolean {
  return a !== undefined && a.status === b.status && a.reason === b.reason && a.message === b.message;
}
