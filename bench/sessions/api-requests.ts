// What a workload costs each API server in requests: `apiserver_request_total` read from the
// server's own /metrics (with the cluster's admin kubeconfig) before and after, summed by verb,
// resource and subresource. The bench's own calls (its creates, deletes and watches) are in
// the count too; they are the same for every design, so the differences are the stack's.
import type { KubeConfig } from "@kubernetes/client-node";
import { readApiText } from "../../control-plane/src/member/workload-json.js";

/** Request counts by "VERB resource[/subresource]". */
export type RequestCounts = Map<string, number>;

async function metricsText(kc: KubeConfig): Promise<string> {
  const text = await readApiText(kc, "/metrics", "text/plain");
  if (text === undefined) throw new Error("the API server has no /metrics");
  return text;
}

const label = (line: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(line)?.[1] ?? "";

export async function apiRequests(kc: KubeConfig): Promise<RequestCounts> {
  const out: RequestCounts = new Map();
  for (const line of (await metricsText(kc)).split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const resource = label(line, "resource");
    if (resource === "") continue;
    const sub = label(line, "subresource");
    const key = `${label(line, "verb")} ${resource}${sub ? `/${sub}` : ""}`;
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return out;
}

/** Requests between two readings per `per` (e.g. per session), largest first, rounded to 0.01. */
export function requestsPer(
  before: RequestCounts,
  after: RequestCounts,
  per: number,
): Record<string, number> {
  const rows = [...after.entries()]
    .map(([k, n]) => [k, (n - (before.get(k) ?? 0)) / Math.max(1, per)] as const)
    .filter(([, n]) => n >= 0.01)
    .sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((s, [, n]) => s + n, 0);
  return Object.fromEntries([
    ["total", Math.round(total * 100) / 100],
    ...rows.map(([k, n]) => [k, Math.round(n * 100) / 100]),
  ]);
}
