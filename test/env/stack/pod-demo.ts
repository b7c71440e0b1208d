// The demo workload of the pod stack: the target a developer steals from or mirrors, run by
// the real node of a workload cluster from the demo app image (images/project-images.ts).
// Every way a container gets its environment is used — a literal, `valueFrom` a ConfigMap and
// a Secret, `envFrom` a ConfigMap, the downward API — and a ConfigMap volume at /etc/demo, so the
// env and files a session sees can be compared with what the container has. A NodePort
// Service `demo` (port 80, node port DEMO_NODE_PORT) stands for how traffic reaches it; its
// targetPort is the container port's name (`http`: the agent takes the port by name) or its
// number (the sidecar's iptables init container redirects it).
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { DEMO_APP_IMAGE, DEMO_APP_PORT } from "../images/project-images.js";

/** Node port of the demo Service in every workload cluster. */
export const DEMO_NODE_PORT = 30080;

export interface PodDemoOptions {
  /** Replicas of the demo Deployment (default 2: a session must reach every one). */
  replicas?: number;
  /** How the Service names its target port: by the container port's name, or by number. */
  targetPort: "name" | "number";
  /** Extra literal env vars. */
  env?: Record<string, string>;
}

/** Creates the demo's ConfigMaps, Secret, Deployment and Service in namespace "default". */
export async function createPodDemo(kc: KubeConfig, cluster: string, o: PodDemoOptions): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const namespace = "default";
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: "demo-config" }, data: { "settings.yaml": `cluster: ${cluster}\n` } },
  });
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: "demo-env" }, data: { FEATURE_FLAG: `on-${cluster}`, REGION: cluster } },
  });
  await core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: "demo-secret" }, stringData: { password: `secret-of-${cluster}` } },
  });
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name: "demo", labels: { app: "demo" } },
      spec: {
        replicas: o.replicas ?? 2,
        selector: { matchLabels: { app: "demo" } },
        template: {
          metadata: { labels: { app: "demo" } },
          spec: {
            terminationGracePeriodSeconds: 5,
            containers: [
              {
                name: "demo",
                image: DEMO_APP_IMAGE,
                imagePullPolicy: "Never",
                ports: [{ name: "http", containerPort: DEMO_APP_PORT, protocol: "TCP" }],
                env: [
                  { name: "CLUSTER", value: cluster },
                  ...Object.entries(o.env ?? {}).map(([name, value]) => ({ name, value })),
                  {
                    name: "SETTINGS_FILE",
                    valueFrom: { configMapKeyRef: { name: "demo-config", key: "settings.yaml" } },
                  },
                  {
                    name: "DB_PASSWORD",
                    valueFrom: { secretKeyRef: { name: "demo-secret", key: "password" } },
                  },
                  { name: "MY_POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                  { name: "MY_NAMESPACE", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                ],
                envFrom: [{ configMapRef: { name: "demo-env" }, prefix: "DEMO_" }],
                readinessProbe: { httpGet: { path: "/healthz", port: DEMO_APP_PORT }, periodSeconds: 1 },
                volumeMounts: [{ name: "config", mountPath: "/etc/demo", readOnly: true }],
                securityContext: {
                  runAsNonRoot: true,
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"] },
                },
              },
            ],
            volumes: [{ name: "config", configMap: { name: "demo-config" } }],
          },
        },
      },
    },
  });
  await core.createNamespacedService({
    namespace,
    body: {
      metadata: { name: "demo" },
      spec: {
        type: "NodePort",
        selector: { app: "demo" },
        ports: [
          {
            name: "http",
            port: 80,
            targetPort: o.targetPort === "name" ? "http" : DEMO_APP_PORT,
            nodePort: DEMO_NODE_PORT,
            protocol: "TCP",
          },
        ],
      },
    },
  });
}
