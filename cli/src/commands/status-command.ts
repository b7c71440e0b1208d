// `switchyard status`: what the Primary's SwitchyardOperator says — this cluster, the
// session mode, router endpoint, versions, supported features, and every connected
// cluster's connectivity, versions, latency and credential expiry.
import type { KubeConfig } from "@kubernetes/client-node";
import type { SwitchyardOperator } from "../../../proto/api/v1alpha1/index.js";
import { readOperator, sessionModeOf } from "../sdk/kube/operator-info.js";
import { age, json, table, type Out, type OutputFormat } from "./output.js";

export interface StatusReport {
  cluster: string;
  mode: string;
  defaultCluster?: string;
  managementOnly: boolean;
  routerEndpoint?: string;
  operatorVersion?: string;
  protocolVersion?: string;
  supportedFeatures: string[];
  ready?: { status: string; reason: string; message: string };
  sessions?: { multiClusterSessions: number; clusterSessions: number };
  clusters: Array<{
    name: string;
    connected: boolean;
    kubernetesVersion?: string;
    operatorVersion?: string;
    protocolVersion?: string;
    latencyMs?: number;
    lastCheck: string;
    error?: string;
    credentialExpiresAt?: string;
    isDefault: boolean;
  }>;
}

export function statusReport(op: SwitchyardOperator): StatusReport {
  const st = op.status ?? {};
  const ready = st.conditions?.find((c) => c.type === "Ready");
  const opt = <K extends string, V>(k: K, v: V | undefined) =>
    v === undefined ? {} : ({ [k]: v } as Record<K, V>);
  return {
    cluster: op.spec.clusterName,
    mode: sessionModeOf(op),
    ...opt("defaultCluster", op.spec.defaultCluster),
    managementOnly: op.spec.managementOnly === true,
    ...opt("routerEndpoint", st.routerEndpoint),
    ...opt("operatorVersion", st.operatorVersion),
    ...opt("protocolVersion", st.protocolVersion),
    supportedFeatures: st.supportedFeatures ?? [],
    ...opt(
      "ready",
      ready ? { status: ready.status, reason: ready.reason, message: ready.message } : undefined,
    ),
    ...opt("sessions", st.sessions),
    clusters: (st.connectedClusters ?? []).map((c) => ({
      name: c.name,
      connected: c.connected !== undefined && !c.error,
      ...opt("kubernetesVersion", c.connected?.kubernetesVersion),
      ...opt("operatorVersion", c.connected?.operatorVersion),
      ...opt("protocolVersion", c.connected?.protocolVersion),
      ...opt("latencyMs", c.latencyMs),
      lastCheck: c.lastCheck,
      ...opt("error", c.error),
      ...opt("credentialExpiresAt", c.credentialExpiresAt),
      isDefault: c.name === op.spec.defaultCluster,
    })),
  };
}

export function formatStatus(r: StatusReport, now = Date.now()): string {
  const kv: Array<[string, string]> = [
    ["Cluster", `${r.cluster}${r.managementOnly ? " (management only)" : ""}`],
    ["Session mode", r.mode],
    ["Default cluster", r.defaultCluster ?? (r.mode === "single-cluster" ? r.cluster : "-")],
    ["Router endpoint", r.routerEndpoint ?? "- (not published yet: is the control plane running?)"],
    ["Operator version", r.operatorVersion ?? "-"],
    ["Protocol version", r.protocolVersion ?? "-"],
    ["Features", r.supportedFeatures.join(", ") || "-"],
    [
      "Ready",
      r.ready ? `${r.ready.status}${r.ready.message ? ` (${r.ready.reason}: ${r.ready.message})` : ""}` : "-",
    ],
  ];
  if (r.sessions)
    kv.push([
      "Sessions",
      `${r.sessions.multiClusterSessions} multi-cluster, ${r.sessions.clusterSessions} cluster`,
    ]);
  const w = Math.max(...kv.map(([k]) => k.length));
  let text = kv.map(([k, v]) => `${(k + ":").padEnd(w + 1)} ${v}`).join("\n") + "\n";
  if (r.clusters.length) {
    text +=
      "\n" +
      table(
        [
          "CLUSTER",
          "STATUS",
          "KUBERNETES",
          "OPERATOR",
          "PROTOCOL",
          "LATENCY",
          "CHECKED",
          "CREDENTIAL EXPIRES",
          "ERROR",
        ],
        r.clusters.map((c) => [
          `${c.name}${c.isDefault ? " (default)" : ""}`,
          c.connected ? "connected" : "unreachable",
          c.kubernetesVersion ?? "-",
          c.operatorVersion ?? "-",
          c.protocolVersion ?? "-",
          c.latencyMs !== undefined ? `${c.latencyMs}ms` : "-",
          `${age(c.lastCheck, now)} ago`,
          c.credentialExpiresAt
            ? `in ${age(new Date(now).toISOString(), Date.parse(c.credentialExpiresAt))}`
            : "-",
          c.error ?? "",
        ]),
      );
  } else if (r.mode === "multi-cluster") {
    text += "\nNo connected clusters reported yet.\n";
  }
  return text;
}

export async function statusCommand(kc: KubeConfig, format: OutputFormat, out: Out): Promise<number> {
  const r = statusReport(await readOperator(kc));
  out.stdout(format === "json" ? json(r) : formatStatus(r));
  return 0;
}
