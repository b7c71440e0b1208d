// From what the Primary observed on every workload cluster to the parent's status:
// `status.children`, the phase and the standard conditions (DESIGN §3, §4). Pure, so
// each failure-policy rule is a unit test, and the reconciler only writes the result.
//
// A cluster that does not answer is not a cluster whose child is gone: its child keeps
// running on its own (its agents, its gateway) until its TTL lapses. So an unreachable
// cluster keeps what the parent last recorded for it — still routed if it was ready — and
// the session is Degraded, not sent back to Initializing. Likewise a child that has to be
// created again under a session that is already routed (deleted by hand, expired during a
// long outage) makes the session Pending, so the other clusters keep serving the client.
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
  | { state: "present"; child: ClusterSession }
  /** The cluster did not answer this round; `last` is what the parent recorded for it before. */
  | { state: "unreachable"; error: string; last?: ChildSessionStatus };

export interface ObservedCluster {
  name: string;
  isDefault: boolean;
  childName: string;
  observation: ChildObservation;
}

export interface StatusContext {
  /** The session is routed already (its phase was Ready or Pending): a child created again does not un-route it. */
  routed?: boolean;
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
  if (obs.state === "unreachable") {
    const last = obs.last;
    const kept = last?.ready && last.gateway ? { ready: true, gateway: last.gateway } : {};
    const note = last?.ready ? "unreachable, routed to its last known gateway" : "unreachable";
    return { ...base, ...kept, error: `${note}: ${obs.error}`.slice(0, MESSAGE_MAX) };
  }
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

/** Not created yet as far as the phase goes: absent (or unreachable and never recorded ready) before the session was routed. */
function notCreated(o: ObservedCluster, context: StatusContext): boolean {
  if (context.routed) return false;
  const obs = o.observation;
  return obs.state === "absent" || (obs.state === "unreachable" && !obs.last?.ready);
}

export function computeStatus(
  clusters: readonly ObservedCluster[],
  policy: FailurePolicy,
  context: StatusContext = {},
): ComputedStatus {
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
  } else if (live.some((c) => notCreated(c, context))) {
    phase = "Initializing";
    const missing = live.filter((c) => notCreated(c, context)).map((c) => c.name);
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
  const unreachable = clusters.filter((c) => c.observation.state === "unreachable").map((c) => c.name);
  const routedNow = phase === "Ready" || phase === "Pending";
  const degraded: ComputedStatus["conditions"][number] =
    phase === "Ready" && failed.length > 0
      ? {
          type: "Degraded",
          status: "True",
          reason: "ChildrenFailed",
          message: `running without ${describeFailed}`,
        }
      : routedNow && unreachable.length > 0
        ? {
            type: "Degraded",
            status: "True",
            reason: "ClusterUnreachable",
            message: unreachable
              .map((n) => `${n} (${children[n]!.error})`)
              .join("; ")
              .slice(0, MESSAGE_MAX),
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
