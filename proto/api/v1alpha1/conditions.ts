// The one way to set `metav1.Condition`s in a status (every kind's `status.conditions`):
// set by type, keep lastTransitionTime while a condition's status is unchanged, and say
// whether anything changed so callers can skip writes on resyncs.
import type { Static } from "@sinclair/typebox";
import { CONDITION_MESSAGE_MAX_LENGTH, type Condition } from "./schema-primitives.js";

/** `metav1.Condition`, as stored in every kind's `status.conditions`. */
export type StatusCondition = Static<typeof Condition>;

/** What a caller decides about a condition; the setter fills in the bookkeeping fields. */
export type ConditionUpdate = Pick<StatusCondition, "type" | "status" | "reason" | "message">;

export interface SetConditionsResult {
  /** The full list to write: conditions of other types kept, in their order. */
  conditions: StatusCondition[];
  /** False when `conditions` equals `existing` (nothing to write). */
  changed: boolean;
}

/**
 * Sets each update's condition by `type` in (a copy of) `existing`:
 * - `lastTransitionTime` stays when the status is unchanged and becomes `now` when it
 *   changes or the condition is new (metav1 semantics; a new reason or message alone is
 *   not a transition);
 * - `observedGeneration` becomes `observedGeneration` (removed when undefined);
 * - `message` is cut to the schema's limit, so a long error cannot make the write fail;
 * - order is stable: a condition keeps its position, new types are appended in update
 *   order, conditions of other types (written by someone else) are kept untouched.
 *
 * `lastTransitionTime` is written with whole-second precision (RFC 3339, no fraction).
 * The API server would store fractional seconds in a custom resource, but metav1.Time —
 * what every Go client (kubectl, controllers using meta.SetStatusCondition) reads the
 * field into — serialises whole seconds only, so a fraction would be lost or rewritten as
 * soon as any of them round-trips the object. Writing whole seconds ourselves keeps the
 * value identical whoever writes it back; sub-second precision means nothing for a
 * transition time anyway.
 */
export function setConditions(
  existing: readonly StatusCondition[] | undefined,
  updates: readonly ConditionUpdate[],
  now: Date,
  observedGeneration?: number,
): SetConditionsResult {
  const before = existing ?? [];
  const conditions = [...before];
  for (const u of updates) {
    const i = conditions.findIndex((c) => c.type === u.type);
    const prev = i >= 0 ? conditions[i] : undefined;
    const next: StatusCondition = {
      type: u.type,
      status: u.status,
      ...(observedGeneration !== undefined ? { observedGeneration } : {}),
      lastTransitionTime:
        prev && prev.status === u.status ? prev.lastTransitionTime : conditionTimestamp(now),
      reason: u.reason,
      message: u.message.slice(0, CONDITION_MESSAGE_MAX_LENGTH),
    };
    if (i >= 0) conditions[i] = next;
    else conditions.push(next);
  }
  const changed =
    conditions.length !== before.length || conditions.some((c, i) => !sameCondition(c, before[i]));
  return { conditions, changed };
}

/** `now` as a condition's lastTransitionTime: RFC 3339 UTC, whole seconds (see setConditions). */
export function conditionTimestamp(now: Date): string {
  return now.toISOString().replace(/\.\d+Z$/, "Z");
}

function sameCondition(a: StatusCondition, b: StatusCondition | undefined): boolean {
  return (
    b !== undefined &&
    a.type === b.type &&
    a.status === b.status &&
    a.reason === b.reason &&
    a.message === b.message &&
    a.lastTransitionTime === b.lastTransitionTime &&
    a.observedGeneration === b.observedGeneration
  );
}
