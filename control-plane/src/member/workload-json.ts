// Reads a Deployment or StatefulSet as the API server's own JSON. The typed client's model
// drops every field it does not know — pod-template fields of an API server newer than the
// client (pod-level `resources`, …) — and a template saved or written back from it would
// silently lose them. The sidecar provisioner saves, patches and restores whole templates,
// so it reads workloads here and never through the typed model.
import http from "node:http";
import https from "node:https";
import { ApiException, type KubeConfig } from "@kubernetes/client-node";

const READ_TIMEOUT_MS = 30_000;

/** The workload as JSON, or undefined when it does not exist; other statuses throw ApiException. */
export function readWorkloadJson<T>(
  kc: KubeConfig,
  kind: "deployment" | "statefulset",
  namespace: string,
  name: string,
): Promise<T | undefined> {
  return readApiJson<T>(
    kc,
    `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/${kind}s/${encodeURIComponent(name)}`,
  );
}

/**
 * GET `path` on the API server of `kc` as its own JSON, with the kubeconfig's credentials:
 * undefined on 404; other statuses throw ApiException.
 */
export async function readApiJson<T>(kc: KubeConfig, path: string): Promise<T | undefined> {
  const body = await readApiText(kc, path, "application/json");
  return body === undefined ? undefined : (JSON.parse(body) as T);
}

/**
 * GET `path` on the API server of `kc` as text (`accept`), with the kubeconfig's credentials:
 * undefined on 404; other statuses throw ApiException.
 */
export async function readApiText(kc: KubeConfig, path: string, accept: string): Promise<string | undefined> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster");
  const url = new URL(`${cluster.server.replace(/\/+$/, "")}${path}`);
  const options: https.RequestOptions = { method: "GET", headers: { accept } };
  await kc.applyToHTTPSOptions(options);
  const send = url.protocol === "http:" ? http.request : https.request;
  return new Promise<string | undefined>((resolve, reject) => {
    const req = send(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        const status = res.statusCode ?? 0;
        if (status === 404) resolve(undefined);
        else if (status !== 200)
          reject(new ApiException(status, `GET ${url.pathname}: HTTP ${status}`, body, {}));
        else resolve(body);
      });
    });
    req.setTimeout(READ_TIMEOUT_MS, () => req.destroy(new Error(`GET ${url.pathname} timed out`)));
    req.on("error", reject);
    req.end();
  });
}
