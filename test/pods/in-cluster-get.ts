// Requests from inside a cluster, as another pod of it would make them: a short-lived pod of the
// product image (it has node) runs one script that GETs every URL with a fresh connection and
// prints one JSON line per answer; its log is read through the kubelet, then the pod is deleted.
// This is how a test reaches pod IPs and ClusterIPs, which the host has no route to.
import { randomBytes } from "node:crypto";
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { PRODUCT_IMAGE } from "../env/images/project-images.js";
import { eventually } from "../support/poll.js";

export interface InClusterAnswer {
  url: string;
  status: number;
  servedBy: string | null;
  pod: string | null;
  body: string;
  /** The prober's `process.version`: the Node of the product image, which it runs. */
  node: string;
  error?: string;
}

const SCRIPT = `
const [urls, headers] = JSON.parse(process.argv[1]);
for (const url of urls) {
  try {
    const r = await fetch(url, { headers: { ...headers, connection: "close" }, signal: AbortSignal.timeout(10000) });
    console.log(JSON.stringify({ url, status: r.status, servedBy: r.headers.get("x-served-by"), pod: r.headers.get("x-pod"), body: await r.text(), node: process.version }));
  } catch (e) {
    console.log(JSON.stringify({ url, status: 0, servedBy: null, pod: null, body: "", node: process.version, error: String(e.cause ?? e) }));
  }
}`;

/** GETs each of `urls` from a pod in namespace "default" of the cluster `kc` reaches. */
export async function inClusterGet(
  kc: KubeConfig,
  urls: string[],
  headers: Record<string, string> = {},
): Promise<InClusterAnswer[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = `probe-${randomBytes(4).toString("hex")}`;
  const namespace = "default";
  await core.createNamespacedPod({
    namespace,
    body: {
      metadata: { name, labels: { "switchyard.dev/test": "probe" } },
      spec: {
        restartPolicy: "Never",
        terminationGracePeriodSeconds: 0,
        containers: [
          {
            name: "probe",
            image: PRODUCT_IMAGE,
            imagePullPolicy: "Never",
            command: ["node", "--input-type=module", "-e", SCRIPT, JSON.stringify([urls, headers])],
          },
        ],
      },
    },
  });
  try {
    const phase = await eventually(
      `probe pod ${name} to finish`,
      async () => {
        const p = await core.readNamespacedPod({ name, namespace });
        return p.status?.phase === "Succeeded" || p.status?.phase === "Failed" ? p.status.phase : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const log = String(await core.readNamespacedPodLog({ name, namespace, container: "probe" }));
    if (phase !== "Succeeded") throw new Error(`probe pod ${name} failed:\n${log}`);
    return log
      .trim()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as InClusterAnswer);
  } finally {
    await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 }).catch(() => {});
  }
}
