// Names a workload, a namespace or a pod carries for an agent that outlives its sessions:
// the linger record (written by the member when the last session on a target ends, so it
// lives in the cluster and survives a control-plane restart or a leader change), the
// user's per-workload linger override, and the opt-in to pods born with the agent (the
// admission webhook). One home, shared by the member, the webhook, the chart's docs and tests.
import { GROUP } from "../../../proto/api/v1alpha1/index.js";

/** On the workload: RFC 3339 time the sidecar went into its template (what `agents list` shows as since). */
export const INJECTED_AT_ANNOTATION = `${GROUP}/agent-injected-at`;
/**
 * On the workload: RFC 3339 time until which the idle agent stays (no session on the target),
 * or `never` for a linger of -1 (until removed). Absent while a session uses the agent.
 */
export const LINGER_UNTIL_ANNOTATION = `${GROUP}/agent-linger-until`;
/** `LINGER_UNTIL_ANNOTATION` value of an agent that stays until removed. */
export const LINGER_FOREVER = "never";
/**
 * On the workload, set by its owner: seconds the idle agent stays after the last session
 * (an integer ≥ -1; 0 = restore at once, -1 = until removed). Overrides the install's
 * `sidecar.lingerSeconds` for this workload.
 */
export const LINGER_SECONDS_ANNOTATION = `${GROUP}/agent-linger-seconds`;
/**
 * Opt-in to pods born with the agent: `"true"` on a Deployment or StatefulSet
 * (metadata.annotations), or the namespace label `switchyard.dev/inject-agent=enabled`.
 * Only within the install's allow-list.
 */
export const INJECT_ANNOTATION = `${GROUP}/inject-agent`;
export const INJECT_NAMESPACE_LABEL = `${GROUP}/inject-agent`;
/** On a pod the admission webhook gave the agent: the RFC 3339 time it did. */
export const BORN_WITH_AGENT_ANNOTATION = `${GROUP}/agent-injected-by-webhook`;
/**
 * On the workload: RFC 3339 time `switchyard agents remove` asked for the agent to go while
 * sessions still used it; the last of them ending restores at once, whatever the linger.
 */
export const REMOVE_REQUESTED_ANNOTATION = `${GROUP}/agent-remove-requested`;
