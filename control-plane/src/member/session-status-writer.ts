// A ClusterSession's status as the member writes it: phase, gateway, resolved pod, agents and
// the Ready and Valid conditions, merge-patched only when something would change, with the
// resourceVersion read as precondition (a concurrent write answers 409: re-read and retry).
import {
  setConditions,
  type ClusterSession,
  type ClusterSessionStatus,
  type ConditionUpdate,
} from "../../../proto/api/v1alpha1/index.js";
import { withContext } from "../runtime/index.js";

export const WITHIN_ALLOW_LIST: ConditionUpdate = {
  type: "Valid",
  status: "True",
  reason: "Allowed",
  message: "the session is within this cluster's allow-list",
};

export interface StatusWriter {
  patchStatus(
    ref: { namespace: string; name: string },
    patch: Partial<ClusterSessionStatus>,
    opts: { resourceVersion?: string },
  ): Promise<unknown>;
}

/** Merge-patches a session's status when something would change (null removes a field). */
export async function writeSessionStatus(
  client: StatusWriter,
  now: () => number,
  session: ClusterSession,
  fields: {
    phase: NonNullable<ClusterSessionStatus["phase"]>;
    gateway: string | null;
    pod: NonNullable<ClusterSessionStatus["pod"]> | null;
    agents: number;
  },
  ready: ConditionUpdate,
  valid: ConditionUpdate = WITHIN_ALLOW_LIST,
): Promise<void> {
  const st = session.status ?? {};
  const generation = session.metadata.generation;
  const conditions = setConditions(st.conditions, [ready, valid], new Date(now()), generation);
  const unchanged =
    st.phase === fields.phase &&
    (st.gateway ?? null) === fields.gateway &&
    JSON.stringify(st.pod ?? null) === JSON.stringify(fields.pod) &&
    (st.agents ?? 0) === fields.agents &&
    !conditions.changed &&
    st.observedGeneration === generation;
  if (unchanged) return;
  const patch = {
    phase: fields.phase,
    gateway: fields.gateway,
    pod: fields.pod,
    agents: fields.agents,
    conditions: conditions.conditions,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  } as unknown as Partial<ClusterSessionStatus>;
  try {
    await client.patchStatus(
      { namespace: session.metadata.namespace!, name: session.metadata.name! },
      patch,
      { resourceVersion: session.metadata.resourceVersion },
    );
  } catch (err) {
    throw withContext(
      `failed to write the status of session ${session.metadata.namespace}/${session.metadata.name}`,
      err,
    );
  }
}
