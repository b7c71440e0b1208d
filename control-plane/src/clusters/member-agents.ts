// A member's `status.agents` as the Primary republishes it in its own operator status. It is
// another cluster's words: only what our own schema would accept is kept (a refused field
// would fail the Primary's whole status write), item by item, so one odd entry costs itself.
import { MAX_AGENT_ENTRIES, type AgentEntry, type AgentsSummary } from "../../../proto/api/v1alpha1/index.js";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const TARGET = /^(deployment|statefulset)\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const count = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;
const time = (v: unknown): v is string =>
  typeof v === "string" && v.length <= 64 && Number.isFinite(Date.parse(v));

function entryOf(v: unknown): AgentEntry | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const e = v as Record<string, unknown>;
  if (typeof e.namespace !== "string" || !DNS_LABEL.test(e.namespace)) return undefined;
  if (typeof e.target !== "string" || e.target.length > 300 || !TARGET.test(e.target)) return undefined;
  if (!count(e.sessions) || !count(e.pods)) return undefined;
  const lingerUntil =
    e.lingerUntil === "never" || time(e.lingerUntil) ? { lingerUntil: e.lingerUntil as string } : {};
  return {
    namespace: e.namespace,
    target: e.target,
    sessions: e.sessions,
    pods: e.pods,
    ...(time(e.since) ? { since: e.since } : {}),
    ...lingerUntil,
    ...(e.bornWithAgent === true ? { bornWithAgent: true } : {}),
  };
}

/** The summary our schema accepts, or undefined when its counts are not counts. */
export function memberAgentsSummary(v: unknown): AgentsSummary | undefined {
  if (typeof v !== "object" || v === null) return undefined;
  const s = v as Record<string, unknown>;
  if (!count(s.injected) || !count(s.lingering)) return undefined;
  const items = Array.isArray(s.items)
    ? s.items
        .slice(0, MAX_AGENT_ENTRIES)
        .map(entryOf)
        .filter((e): e is AgentEntry => e !== undefined)
    : undefined;
  return { injected: s.injected, lingering: s.lingering, ...(items ? { items } : {}) };
}
