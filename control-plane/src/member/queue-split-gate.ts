// Whether a session whose agents serve may be Ready as far as its SQS queue splits go: a
// split it asked for must be in force in this cluster (written by ../queues/ in status.queues).
import type { ClusterSession } from "../../../proto/api/v1alpha1/index.js";

/**
 * Why a session whose agents serve is not Ready because of its queue splits (undefined when
 * it has none, or every one is Splitting in this cluster): Failed when a split failed or this
 * control plane does not split queues, else Pending.
 */
export function queueSplitGate(
  session: ClusterSession,
  splitting: boolean,
): { phase: "Pending" | "Failed"; reason: string; message: string } | undefined {
  const splits = session.spec.connectParams?.sqsSplit ?? [];
  if (splits.length === 0) return undefined;
  if (!splitting)
    return {
      phase: "Failed",
      reason: "QueueSplittingDisabled",
      message:
        "the session splits SQS queues (connectParams.sqsSplit) but this cluster's control plane does not: " +
        "install its chart with queues.sqs.enabled=true",
    };
  const status = session.status?.queues ?? [];
  for (const q of splits) {
    const s = status.find((e) => e.queueId === q.queueId);
    if (s?.phase === "Failed")
      return {
        phase: "Failed",
        reason: "QueueSplitFailed",
        message: `queue ${q.queueId}: ${s.message ?? s.reason ?? "failed"}`,
      };
  }
  for (const q of splits) {
    const s = status.find((e) => e.queueId === q.queueId);
    if (s?.phase !== "Splitting")
      return {
        phase: "Pending",
        reason: "QueueSplitWaiting",
        message: `queue ${q.queueId}: ${s?.message ?? "the split is being set up"}`,
      };
  }
  return undefined;
}
