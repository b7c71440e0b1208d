// Which workloads of this cluster carry the agent, from the member's watch caches: those whose
// template we patched (the saved template annotation says so) and those whose pods were born
// with it (the admission webhook marks them). For each: since when, the sessions using it, its
// pods running the agent and, while no session uses it, until when it lingers. Read by the
// operator status (`status.agents`, `switchyard agents list` through the Primary) and by the
// metrics at scrape; nothing here writes.
import type { V1Deployment, V1Pod, V1StatefulSet } from "@kubernetes/client-node";
import {
  MAX_AGENT_ENTRIES,
  type AgentEntry,
  type AgentsSummary,
  type ClusterSession,
} from "../../../proto/api/v1alpha1/index.js";
import {
  BORN_WITH_AGENT_ANNOTATION,
  INJECTED_AT_ANNOTATION,
  LINGER_UNTIL_ANNOTATION,
} from "./agent-annotations.js";
import { selectorMatches } from "./label-selector.js";
import { hasSidecar, ORIGINAL_TEMPLATE_ANNOTATION } from "./sidecar-pod-template.js";
import { releasesAgentsOnly, safeTargetOf } from "./target-sessions.js";

export interface InventorySource {
  deployments(): readonly V1Deployment[];
  statefulSets(): readonly V1StatefulSet[];
  pods(namespace: string): readonly V1Pod[];
  sessions(namespace: string): readonly ClusterSession[];
}

type Workload = V1Deployment | V1StatefulSet;

function entryFor(
  kind: "deployment" | "statefulset",
  w: Workload,
  src: InventorySource,
): AgentEntry | undefined {
  const namespace = w.metadata?.namespace;
  const name = w.metadata?.name;
  if (!namespace || !name) return undefined;
  const annotations = w.metadata?.annotations ?? {};
  const patched =
    annotations[ORIGINAL_TEMPLATE_ANNOTATION] !== undefined || hasSidecar(w.spec?.template.spec);
  const pods = src
    .pods(namespace)
    .filter(
      (p) =>
        !p.metadata?.deletionTimestamp &&
        selectorMatches(w.spec?.selector, p.metadata?.labels) &&
        hasSidecar(p.spec),
    );
  const born = pods
    .map((p) => p.metadata?.annotations?.[BORN_WITH_AGENT_ANNOTATION])
    .filter((t): t is string => t !== undefined && Number.isFinite(Date.parse(t)))
    .sort();
  if (!patched && born.length === 0) return undefined;
  const sessions = src.sessions(namespace).filter((s) => {
    if (s.metadata.deletionTimestamp || releasesAgentsOnly(s) || s.status?.phase === "Failed") return false;
    const t = safeTargetOf(s);
    return t?.kind === kind && t.name === name;
  }).length;
  const since = patched ? annotations[INJECTED_AT_ANNOTATION] : born[0];
  const until = annotations[LINGER_UNTIL_ANNOTATION];
  return {
    namespace,
    target: `${kind}/${name}`,
    sessions,
    pods: pods.length,
    ...(since && Number.isFinite(Date.parse(since)) ? { since } : {}),
    ...(sessions === 0 && patched && until !== undefined ? { lingerUntil: until } : {}),
    ...(!patched ? { bornWithAgent: true } : {}),
  };
}

/** Every workload carrying the agent: counts exact, items in use first, then by namespace and name. */
export function agentInventory(src: InventorySource): AgentsSummary {
  const entries = [
    ...src.deployments().map((d) => entryFor("deployment", d, src)),
    ...src.statefulSets().map((s) => entryFor("statefulset", s, src)),
  ].filter((e): e is AgentEntry => e !== undefined);
  entries.sort(
    (a, b) =>
      Number(b.sessions > 0) - Number(a.sessions > 0) ||
      a.namespace.localeCompare(b.namespace) ||
      a.target.localeCompare(b.target),
  );
  return {
    injected: entries.length,
    lingering: entries.filter((e) => e.lingerUntil !== undefined).length,
    items: entries.slice(0, MAX_AGENT_ENTRIES),
  };
}
