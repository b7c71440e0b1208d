// The demo workload of the embedded stack: in each workload cluster a Deployment `demo`
// (env, a ConfigMap mount, container port APP_PORT) whose pod the stack marks Running, and
// the stand-in for its container — an HTTP server on the cluster's own loopback address
// that answers `hello from the <cluster> app: METHOD PATH` with `x-served-by: app-<cluster>`.
import { createServer, type Server } from "node:http";
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { runPods } from "../clusters/kubelet.js";

/** The demo app's container port; each cluster's agent takes its traffic on APP_PORT + TRAFFIC_OFFSET. */
export const APP_PORT = 8080;
export const TRAFFIC_OFFSET = 10_000;

/** A request the stand-in app answered. */
export interface AppRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
}

/** Starts the stand-in app of `cluster` on `host`:APP_PORT; rejects naming the fix when the port is taken. */
export function demoApp(cluster: string, host: string, requests: AppRequest[]): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      requests.push({ method: req.method ?? "GET", path: req.url ?? "/", headers: req.headers });
      res.setHeader("x-served-by", `app-${cluster}`);
      res.end(`hello from the ${cluster} app: ${req.method} ${req.url}${body ? ` ${body}` : ""}\n`);
    });
  });
  return new Promise((resolvePromise, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        err.code === "EADDRINUSE"
          ? new Error(
              `${host}:${APP_PORT} is taken: another embedded stack (npm start, the e2e suite or a ` +
                `benchmark) is running on this machine; stop it first (Ctrl-C in its terminal)`,
            )
          : err,
      ),
    );
    server.listen(APP_PORT, host, () => resolvePromise(server));
  });
}

/** Creates the demo Deployment (and its ConfigMap) and marks its pod Running. */
export async function createDemo(
  kc: KubeConfig,
  cluster: string,
  env: Record<string, string>,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace: "default",
    body: { metadata: { name: "demo-config" }, data: { "settings.yaml": `cluster: ${cluster}\n` } },
  });
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: "default",
    body: {
      metadata: { name: "demo" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "demo" } },
        template: {
          metadata: { labels: { app: "demo" } },
          spec: {
            containers: [
              {
                name: "demo",
                image: "example.invalid/demo:1",
                ports: [{ containerPort: APP_PORT }],
                env: [
                  { name: "CLUSTER_NAME", value: cluster },
                  ...Object.entries(env).map(([name, value]) => ({ name, value })),
                ],
                volumeMounts: [{ name: "config", mountPath: "/etc/demo" }],
              },
            ],
            volumes: [{ name: "config", configMap: { name: "demo-config" } }],
          },
        },
      },
    },
  });
  await runPods(kc, "default", "app=demo", 1);
}
