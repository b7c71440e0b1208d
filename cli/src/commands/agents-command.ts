// `switchyard agents list|remove`: the sidecar agents Switchyard keeps in workloads, in every
// cluster, as the Primary's SwitchyardOperator reports them (its own member's `status.agents`
// and each connected cluster's, as of that cluster's last health check); and removing a
// target's idle agents everywhere, through a release-only session (connectParams.releaseAgents),
// so the same RBAC and allow-list that decide who may open a session on a target decide who
// may remove its agents.
import type { KubeConfig } from "@kubernetes/client-node";
import type { AgentsSummary, SwitchyardOperator } from "../../../proto/api/v1alpha1/index.js";
import { parseTarget } from "../../../proto/api/v1alpha1/index.js";
import { CliError, CliErrorCode } from "../sdk/cli-errors.js";
import { KubeSessions } from "../sdk/kube/kube-sessions.js";
import { readOperator } from "../sdk/kube/operator-info.js";
import { age, json, table, type Out, type OutputFormat } from "./output.js";

export interface AgentRow {
  cluster: string;
  namespace: string;
  target: string;
  sessions: number;
  pods: number;
  since?: string;
  lingerUntil?: string;
  bornWithAgent: boolean;
}

export interface ClusterAgents {
  cluster: string;
  injected: number;
  lingering: number;
  /** More workloads carry the agent there than the cluster lists. */
  truncated: boolean;
}

/** Every cluster's agents from the Primary's operator: its own member first, then each remote. */
export function agentsOf(op: SwitchyardOperator): { clusters: ClusterAgents[]; rows: AgentRow[] } {
  const sources: Array<[string, AgentsSummary | undefined]> = [];
  if (op.status?.agents) sources.push([op.spec?.clusterName ?? "local", op.status.agents]);
  for (const c of op.status?.connectedClusters ?? [])
    sources.push([c.name, c.connected ? c.agents : undefined]);
  const clusters: ClusterAgents[] = [];
  const rows: AgentRow[] = [];
  for (const [cluster, s] of sources) {
    if (!s) continue;
    const items = s.items ?? [];
    clusters.push({
      cluster,
      injected: s.injected,
      lingering: s.lingering,
      truncated: items.length < s.injected,
    });
    for (const i of items)
      rows.push({
        cluster,
        namespace: i.namespace,
        target: i.target,
        sessions: i.sessions,
        pods: i.pods,
        ...(i.since ? { since: i.since } : {}),
        ...(i.lingerUntil ? { lingerUntil: i.lingerUntil } : {}),
        bornWithAgent: i.bornWithAgent === true,
      });
  }
  return { clusters, rows };
}

/** "in use", "lingering 14m", "until removed", "born with it". */
export function agentState(r: AgentRow, now = Date.now()): string {
  if (r.sessions > 0) return "in use";
  if (r.bornWithAgent) return "born with it";
  if (r.lingerUntil === "never") return "until removed";
  if (r.lingerUntil) {
    const left = Math.max(0, Math.round((Date.parse(r.lingerUntil) - now) / 1000));
    return Number.isFinite(left)
      ? `lingering ${left < 120 ? `${left}s` : `${Math.round(left / 60)}m`}`
      : "lingering";
  }
  return "idle";
}

export function formatAgents(rows: readonly AgentRow[], allNamespaces: boolean, now = Date.now()): string {
  if (rows.length === 0) return "No agents.\n";
  return table(
    ["CLUSTER", ...(allNamespaces ? ["NAMESPACE"] : []), "TARGET", "STATE", "SESSIONS", "PODS", "SINCE"],
    rows.map((r) => [
      r.cluster,
      ...(allNamespaces ? [r.namespace] : []),
      r.target,
      agentState(r, now),
      String(r.sessions),
      String(r.pods),
      age(r.since, now),
    ]),
  );
}

export async function agentsListCommand(
  kc: KubeConfig,
  o: { namespace: string | undefined },
  format: OutputFormat,
  out: Out,
): Promise<number> {
  const { clusters, rows } = agentsOf(await readOperator(kc));
  const shown = o.namespace === undefined ? rows : rows.filter((r) => r.namespace === o.namespace);
  if (format === "json") out.stdout(json({ agents: shown, clusters }));
  else {
    out.stdout(formatAgents(shown, o.namespace === undefined));
    for (const c of clusters.filter((x) => x.truncated))
      out.stderr(
        `${c.cluster}: ${c.injected} workloads carry the agent; the first ${c.injected > 100 ? 100 : c.injected} are listed\n`,
      );
  }
  return 0;
}

export interface RemoveOptions {
  target: string;
  namespace: string;
  /** How long to wait for every cluster's answer, ms. */
  timeoutMs: number;
}

/**
 * Removes the target's idle agents in every cluster: restored now where no session uses them,
 * once the last session ends elsewhere. Waits for every cluster's answer, then deletes the
 * release-only session again (also when it failed or was interrupted).
 */
export async function agentsRemoveCommand(
  kc: KubeConfig,
  o: RemoveOptions,
  format: OutputFormat,
  out: Out,
): Promise<number> {
  let parsed;
  try {
    parsed = parseTarget(o.target);
  } catch (err) {
    throw new CliError(CliErrorCode.INVALID_OPTION, (err as Error).message);
  }
  if (parsed.kind === "pod")
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      `agents remove takes a deployment/… or statefulset/… target, got "${o.target}": a bare pod never carries a sidecar agent`,
    );
  const operator = await readOperator(kc);
  const kube = new KubeSessions(kc);
  const handle = await kube.create(
    {
      target: `${parsed.kind}/${parsed.name}`,
      namespace: o.namespace,
      connectParams: { releaseAgents: true },
    },
    operator,
  );
  const onSignal = () => void kube.delete(handle).finally(() => process.exit(130));
  process.once("SIGINT", onSignal);
  try {
    const progress = await kube.waitReady(handle, { timeoutMs: o.timeoutMs }, operator.spec?.clusterName);
    const result = {
      target: o.target,
      namespace: o.namespace,
      clusters: progress.clusters.map((c) => c.cluster),
    };
    out.stdout(
      format === "json"
        ? json({ removed: result })
        : `agents of ${o.target}: answered by ${result.clusters.join(", ") || "this cluster"}; restored where ` +
            "idle, once the last session ends where sessions still use them, nothing to do where none was " +
            "kept (see `switchyard agents list`)\n",
    );
    return 0;
  } finally {
    process.removeListener("SIGINT", onSignal);
    await kube.delete(handle).catch(() => undefined);
  }
}
