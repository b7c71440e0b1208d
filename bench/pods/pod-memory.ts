// Working-set memory of containers on real nodes, as the kubelet reports it: its summary API
// (`/stats/summary`), read through the API server's node proxy with a cluster's admin
// kubeconfig — the figure `kubectl top` and the memory eviction logic use, per container.
// Read as raw JSON with the kubeconfig's own credentials (the control plane's `readApiJson`):
// the typed client's `connectGetNodeProxyWithPath` escapes the path's slashes and types the
// JSON as a string.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { readApiJson } from "../../control-plane/src/member/workload-json.js";

export interface ContainerMemory {
  cluster: string;
  node: string;
  namespace: string;
  pod: string;
  container: string;
  /** Working set (usage minus inactive file cache), MiB. */
  workingSetMiB: number;
  /** Anonymous memory and swap cache (the process's own, no file cache), MiB. */
  rssMiB: number;
}

/** The part of the kubelet's stats/summary answer read here. */
interface Summary {
  pods?: {
    podRef: { name: string; namespace: string };
    containers?: { name: string; memory?: { workingSetBytes?: number; rssBytes?: number } }[];
  }[];
}

const MiB = 1024 * 1024;

/**
 * Every container of `cluster` that `select` keeps, on every node, with its working set.
 * A container the kubelet has no memory figure for yet is left out (it has just started).
 */
export async function containerMemory(
  cluster: string,
  kc: KubeConfig,
  select: (namespace: string, pod: string, container: string) => boolean,
): Promise<ContainerMemory[]> {
  const nodes = (await kc.makeApiClient(CoreV1Api).listNode()).items.map((n) => n.metadata!.name!);
  const out: ContainerMemory[] = [];
  for (const node of nodes) {
    const path = `/api/v1/nodes/${encodeURIComponent(node)}/proxy/stats/summary`;
    const summary = await readApiJson<Summary>(kc, path);
    if (!summary) throw new Error(`GET ${path}: HTTP 404 (no node ${node}?)`);
    for (const p of summary.pods ?? [])
      for (const c of p.containers ?? []) {
        const bytes = c.memory?.workingSetBytes;
        if (bytes === undefined || !select(p.podRef.namespace, p.podRef.name, c.name)) continue;
        out.push({
          cluster,
          node,
          namespace: p.podRef.namespace,
          pod: p.podRef.name,
          container: c.name,
          workingSetMiB: bytes / MiB,
          rssMiB: (c.memory?.rssBytes ?? Number.NaN) / MiB,
        });
      }
  }
  return out;
}
