// From what the Primary observed on every workload cluster to the parent's status:
// `status.children`, the phase and the standard conditions (DESIGN §3, §4). Pure, so
// each failure-policy rule is a unit test, and the reconciler only writes the result.
import type {
  ChildSessionStatus,
  ClusterSession,
  ConditionUpdate,
  FailurePolicy,
  MultiClusterSessionPhase,
} from "../../../proto/api/v1alpha1/index.js";

/** What the reconciler knows about one cluster's child this round. */
export type ChildObservation =
  /** Not created yet (or creation is being retried after a transient error). */
  | { state: "absent"; error?: string }
  /** Creation is impossible until someone acts (another owner, forbidden, invalid): counts as failed. */
  | { state: "refused"; error: string }
  | { state: "present"; child: ClusterSession };

export interface ObservedCluster {
  name: string;
  isDefault: boolean;
  childName: string;
  observation: ChildObservation;
}

export interface ComputedStatus {
  phase: MultiClusterSessionPhase;
  children: Record<string, ChildSessionStatus>;
  /** Clusters whose child failed (sorted). */
  failed: string[];
  /** Conditions to set (type, status, reason, message). */
  conditions: ConditionUpdate[];
}

const MESSAGE_MAX = 1000;

function childError(child: ClusterSession): string | undefined {
  if (child.status?.phase !== "Failed") return undefined;
  const conds = child.status.conditions ?? [];
  const why =
    conds.find((c) => c.status === "False" && c.type === "Ready") ?? conds.find((c) => c.status === "False");
  return (why ? `${why.reason}: ${why.message}` : "the member reported the child Failed").slice(
    0,
    MESSAGE_MAX,
  );
}

export function mirrorChild(o: ObservedCluster): ChildSessionStatus {
  const base: ChildSessionStatus = {
    name: o.childName,
    ready: false,
    ...(o.isDefault ? { defaultCluster: true } : {}),
  };
  const obs = o.observation;
  if (obs.state === "absent") return obs.error ? { ...base, error: obs.error.slice(0, MESSAGE_MAX) } : base;
  if (obs.state === "refused") return { ...base, error: obs.error.slice(0, MESSAGE_MAX) };
  const st = obs.child.status;
  const gateway = st?.gateway;
  const ready = st?.phase === "Ready" && gateway !== undefined;
  const error = childError(obs.child);
  return { ...base, ready, ...(gateway ? { gateway } : {}), ...(error ? { error } : {}) };
}

function isFailed(o: ObservedCluster): boolean {
  return (
    o.observation.state === "refused" ||
    (o.observation.state === "present" && o.observation.child.status?.phase === "Failed")
  );
}

export function computeStatus(clusters: readonly ObservedCluster[], policy: FailurePolicy): ComputedStatus {
  const children: Record<string, ChildSessionStatus> = {};
  for (const c of clusters) children[c.name] = mirrorChild(c);
  const failed = clusters
    .filter(isFailed)
    .map((c) => c.name)
    .sort();
  const defaultFailed = clusters.some((c) => c.isDefault && isFailed(c));
  const live = clusters.filter((c) => !isFailed(c));
  const describeFailed = failed
    .map((n) => `${n} (${children[n]!.error ?? "failed"})`)
    .join("; ")
    .slice(0, MESSAGE_MAX);

  let phase: MultiClusterSessionPhase;
  let ready: ComputedStatus["conditions"][number];
  if (failed.length > 0 && (policy === "AllOrNothing" || defaultFailed)) {
    phase = "Failed";
    ready = {
      type: "Ready",
      status: "False",
      reason: defaultFailed ? "DefaultChildFailed" : "ChildFailed",
      message:
        `${policy === "AllOrNothing" ? "failurePolicy AllOrNothing and a child failed" : "the Default cluster's child failed"}: ` +
        describeFailed,
    };
  } else if (live.some((c) => c.observation.state === "absent")) {
    phase = "Initializing";
    const missing = live.filter((c) => c.observation.state === "absent").map((c) => c.name);
    ready = {
      type: "Ready",
      status: "False",
      reason: "CreatingChildren",
      message: `creating child sessions on ${missing.join(", ")}`,
    };
  } else if (live.every((c) => children[c.name]!.ready)) {
    phase = "Ready";
    ready = {
      type: "Ready",
      status: "True",
      reason: failed.length > 0 ? "ReadyWithoutFailedChildren" : "AllChildrenReady",
      message: `ready on ${live.map((c) => c.name).join(", ")}`,
    };
  } else {
    phase = "Pending";
    const waiting = live.filter((c) => !children[c.name]!.ready).map((c) => c.name);
    ready = {
      type: "Ready",
      status: "False",
      reason: "ChildrenNotReady",
      message: `waiting for ${waiting.join(", ")} to be ready`,
    };
  }
  const degraded: ComputedStatus["conditions"][number] =
    phase === "Ready" && failed.length > 0
      ? {
          type: "Degraded",
          status: "True",
          reason: "ChildrenFailed",
          message: `running without ${describeFailed}`,
        }
      : {
          type: "Degraded",
          status: "False",
          reason: "NotDegraded",
          message: "no child failed, or the session is not Ready",
        };
  const valid = {
    type: "Valid",
    status: "True",
    reason: "Allowed",
    message: "the session is within the operator's allow-list",
  } as const;
  return { phase, children, failed, conditions: [ready, degraded, valid] };
}
