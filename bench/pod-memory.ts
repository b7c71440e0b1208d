// Working-set memory of containers on real nodes, as the kubelet reports it: its summary API
// (`/stats/summary`), read through the API server's node proxy with a cluster's admin
// kubeconfig — the figure `kubectl top` and the memory eviction logic use, per container.
// Read with the kubeconfig's own TLS settings over node:https: the typed client's
// `connectGetNodeProxyWithPath` escapes the path's slashes and types the JSON as a string.
import http from "node:http";
import https from "node:https";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";

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

const READ_TIMEOUT_MS = 30_000;
const MiB = 1024 * 1024;

/** GET `path` on the API server of `kc` as JSON. */
async function getJson<T>(kc: KubeConfig, path: string): Promise<T> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster");
  const url = new URL(`${cluster.server.replace(/\/+$/, "")}${path}`);
  const options: https.RequestOptions = { method: "GET", headers: { accept: "application/json" } };
  await kc.applyToHTTPSOptions(options);
  const send = url.protocol === "http:" ? http.request : https.request;
  return new Promise<T>((resolve, reject) => {
    const req = send(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        if (res.statusCode !== 200)
          return reject(new Error(`GET ${url.pathname}: HTTP ${res.statusCode}: ${body.slice(0, 300)}`));
        try {
          resolve(JSON.parse(body) as T);
        } catch (err) {
          reject(err as Error);
        }
      });
    });
    req.setTimeout(READ_TIMEOUT_MS, () => req.destroy(new Error(`GET ${url.pathname} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

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
    const summary = await getJson<Summary>(
      kc,
      `/api/v1/nodes/${encodeURIComponent(node)}/proxy/stats/summary`,
    );
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
