// A session's SQS queue splits as its object reports them (DESIGN §7): `status.queues` of
// the object the CLI created — the MultiClusterSession on a Primary (mirrored from the
// Default cluster's child), the ClusterSession in single-cluster mode. A session with splits
// is usable once it is Ready AND every split is Splitting with the value the local process's
// variable gets: before that the local process would read the deployed consumers' own
// queue and take their messages. A Failed split ends the start with its reason. The
// `QueueSplitOverlap` condition (set at admission) says another session's filter can claim
// the same messages; it is a warning, not a failure.
import type { QueueSplitStatus, SqsQueueSplit } from "../../../../proto/api/v1alpha1/index.js";
import type { EnvQueueRewrite } from "../session/session-requests.js";

/** The condition a control plane sets when this session's filters overlap an earlier session's. */
export const QUEUE_SPLIT_OVERLAP_CONDITION = "QueueSplitOverlap";

/** One queue split as the session reports it (the status entry, or "no status yet"). */
export type QueueSplitProgress = QueueSplitStatus;

/** A split that is Splitting: where the local process's variable points. */
export interface ReadyQueueSplit {
  queueId: string;
  /** The target's variable naming the queue, rewritten by the Default agent. */
  envVar: string;
  /** Its value for the local process: the output queue's URL, or its name. */
  localValue: string;
  outputQueueUrl?: string;
  mode: NonNullable<SqsQueueSplit["mode"]>;
}

type WithQueues = {
  status?: {
    queues?: QueueSplitStatus[];
    conditions?: Array<{ type: string; status: string; message: string }>;
  };
};

/** The session's split entries, in status order. */
export const queuesOf = (s: WithQueues): QueueSplitStatus[] => s.status?.queues ?? [];

/** The QueueSplitOverlap condition's message while it is True. */
export function overlapOf(s: WithQueues): string | undefined {
  const c = s.status?.conditions?.find((x) => x.type === QUEUE_SPLIT_OVERLAP_CONDITION);
  return c?.status === "True" ? c.message || "its queue filters overlap another session's" : undefined;
}

const usable = (
  q: QueueSplitStatus | undefined,
): q is QueueSplitStatus & { envVar: string; localValue: string } =>
  q?.phase === "Splitting" && !!q.envVar && !!q.localValue;

/**
 * Where the splits `ids` stand: "ready" when each is Splitting with its local value,
 * "failed" when one Failed, undefined while any is still on its way.
 */
export function queuesVerdict(
  queues: readonly QueueSplitStatus[] | undefined,
  ids: readonly string[],
): "ready" | "failed" | undefined {
  const byId = new Map((queues ?? []).map((q) => [q.queueId, q]));
  if (ids.some((id) => byId.get(id)?.phase === "Failed")) return "failed";
  return ids.every((id) => usable(byId.get(id))) ? "ready" : undefined;
}

/** "orders: Waiting — CreatingQueues: …; refunds: no status yet" — what holds the splits back. */
export function describeQueueProblems(
  queues: readonly QueueSplitStatus[] | undefined,
  ids: readonly string[],
): string {
  const byId = new Map((queues ?? []).map((q) => [q.queueId, q]));
  return ids
    .map((id) => [id, byId.get(id)] as const)
    .filter(([, q]) => !usable(q))
    .map(([id, q]) => {
      if (!q) return `queue ${id}: no status yet (is queues.sqs.enabled on its workload clusters?)`;
      const why = [q.reason, q.message].filter(Boolean).join(": ");
      const missing = q.phase === "Splitting" ? " (no envVar/localValue reported yet)" : "";
      return `queue ${id}: ${q.phase}${missing}${why ? ` — ${why}` : ""}`;
    })
    .join("; ");
}

/** The Splitting splits of `splits`, with what the local process's variable gets. */
export function readyQueues(
  queues: readonly QueueSplitStatus[] | undefined,
  splits: readonly SqsQueueSplit[],
): ReadyQueueSplit[] {
  const byId = new Map((queues ?? []).map((q) => [q.queueId, q]));
  return splits.flatMap((s) => {
    const q = byId.get(s.queueId);
    if (!usable(q)) return [];
    return [
      {
        queueId: s.queueId,
        envVar: q.envVar,
        localValue: q.localValue,
        ...(q.outputQueueUrl ? { outputQueueUrl: q.outputQueueUrl } : {}),
        mode: s.mode ?? "steal",
      },
    ];
  });
}

/** The EnvGet rewrites for Splitting splits: each variable set to its output queue. */
export const queueRewrites = (ready: readonly ReadyQueueSplit[]): EnvQueueRewrite[] =>
  ready.map((q) => ({ variable: q.envVar, value: q.localValue }));

/** "tenant=~^dev$, $.order.tier=~^gold$": a split's filter in one line. */
export function describeSplitFilter(s: SqsQueueSplit): string {
  return [
    ...Object.entries(s.messageFilter ?? {}).map(([k, v]) => `${k}=~${v}`),
    ...(s.bodyFilter ?? []).map((c) => `${c.path}=~${c.matches}`),
  ].join(", ");
}
