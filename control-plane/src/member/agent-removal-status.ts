// The status a release-only session (`switchyard agents remove`) reports for what its removal
// did in this cluster: the CLI prints each cluster's message, and a refusal says the fix.
import type { RemovalOutcome } from "./idle-agents.js";
import { INJECT_ANNOTATION, INJECT_NAMESPACE_LABEL } from "./agent-annotations.js";

export interface RemovalStatus {
  phase: "Ready" | "Failed";
  reason: string;
  message: string;
}

export function removalStatus(outcome: RemovalOutcome, target: string): RemovalStatus {
  switch (outcome) {
    case "removed":
      return {
        phase: "Ready",
        reason: "AgentsRemoved",
        message: `restored the original pod template of ${target}: the agent goes with the rollout`,
      };
    case "after-sessions":
      return {
        phase: "Ready",
        reason: "RemovedAfterSessions",
        message: `sessions still use the agent of ${target}: its template is restored when the last of them ends`,
      };
    case "none":
      return { phase: "Ready", reason: "NoAgent", message: `${target} carries no agent of this cluster's` };
    case "born":
      return {
        phase: "Failed",
        reason: "BornWithAgent",
        message:
          `the pods of ${target} are born with the agent (opted in with the annotation ${INJECT_ANNOTATION} ` +
          `or the namespace label ${INJECT_NAMESPACE_LABEL}): remove the opt-in and roll the workload out`,
      };
  }
}
