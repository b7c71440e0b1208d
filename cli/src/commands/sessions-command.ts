// `switchyard sessions list` and `switchyard sessions kill ID…|--all`: the session objects
// the user may see (RBAC applies), and deleting them — the control plane's finalizer then
// removes every cluster's child.
import type { KubeConfig } from "@kubernetes/client-node";
import { CliError, CliErrorCode } from "../sdk/cli-errors.js";
import { KubeSessions, modeOfId, type SessionSummary } from "../sdk/kube/kube-sessions.js";
import { age, json, table, type Out, type OutputFormat } from "./output.js";

export interface ListOptions {
  /** undefined: all namespaces. */
  namespace: string | undefined;
  /** Also list child ClusterSessions of parents (hidden by default). */
  children?: boolean;
}

export async function listSessions(kc: KubeConfig, o: ListOptions): Promise<SessionSummary[]> {
  const all = await new KubeSessions(kc).list(o.namespace);
  return o.children ? all : all.filter((s) => !s.parent);
}

export function formatSessions(list: SessionSummary[], allNamespaces: boolean, now = Date.now()): string {
  if (list.length === 0) return "No sessions.\n";
  return table(
    [...(allNamespaces ? ["NAMESPACE"] : []), "ID", "KIND", "TARGET", "PHASE", "CLUSTERS", "AGE"],
    list.map((s) => [
      ...(allNamespaces ? [s.namespace] : []),
      s.id,
      s.kind,
      s.target,
      s.phase,
      `${s.clustersReady}/${s.clustersTotal}`,
      age(s.createdAt, now),
    ]),
  );
}

export async function sessionsListCommand(
  kc: KubeConfig,
  o: ListOptions,
  format: OutputFormat,
  out: Out,
): Promise<number> {
  const list = await listSessions(kc, o);
  out.stdout(format === "json" ? json({ sessions: list }) : formatSessions(list, o.namespace === undefined));
  return 0;
}

export interface KillOptions {
  ids: string[];
  all: boolean;
  namespace: string;
}

export async function sessionsKillCommand(
  kc: KubeConfig,
  o: KillOptions,
  format: OutputFormat,
  out: Out,
): Promise<number> {
  if (o.all === o.ids.length > 0)
    throw new CliError(
      CliErrorCode.INVALID_OPTION,
      "sessions kill needs session ids or --all (not both); see `switchyard sessions list`",
    );
  const kube = new KubeSessions(kc);
  const targets = o.all
    ? (await kube.list(o.namespace))
        .filter((s) => !s.parent)
        .map((s) => ({
          id: s.id,
          namespace: s.namespace,
          mode: s.kind === "MultiClusterSession" ? ("multi-cluster" as const) : ("single-cluster" as const),
        }))
    : o.ids.map((id) => ({ id, namespace: o.namespace, mode: modeOfId(id) }));
  const results: Array<{ id: string; namespace: string; deleted: boolean }> = [];
  for (const t of targets) results.push({ ...t, deleted: await kube.delete(t) });
  const missing = results.filter((r) => !r.deleted);
  if (format === "json") out.stdout(json({ killed: results }));
  else if (results.length === 0) out.stdout(`No sessions in namespace ${o.namespace}.\n`);
  else
    for (const r of results)
      out.stdout(
        r.deleted
          ? `session ${r.id} deleted\n`
          : `session ${r.id} not found in namespace ${r.namespace} (already gone? see \`switchyard sessions list -A\`)\n`,
      );
  return missing.length > 0 && !o.all ? 1 : 0;
}
