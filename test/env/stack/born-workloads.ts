// Workloads that opt in to being born with the agent (the members' admission webhook, the
// chart's sidecar.injection): a Deployment `born` behind a NodePort Service (BORN_NODE_PORT) and a
// StatefulSet `born-set`, both from the demo app image, in namespace "default" of a workload
// cluster of the pod stack started with `injection: true`. What a test reads of them: whether
// each pod was born with the agent, and what a rollout would change (pod uids, restarts,
// ReplicaSets, the StatefulSet's revision).
import {
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Pod,
  type V1PodTemplateSpec,
} from "@kubernetes/client-node";
import {
  BORN_WITH_AGENT_ANNOTATION,
  INJECT_ANNOTATION,
} from "../../../control-plane/src/member/agent-annotations.js";
import { DEMO_APP_IMAGE, DEMO_APP_PORT } from "../images/project-images.js";

/** Node port of the `born` Service in every workload cluster. */
export const BORN_NODE_PORT = 30081;
export const BORN_DEPLOYMENT = "born";
export const BORN_STATEFULSET = "born-set";
const AGENT = "switchyard-agent";

function template(app: string, cluster: string): V1PodTemplateSpec {
  return {
    metadata: { labels: { app } },
    spec: {
      terminationGracePeriodSeconds: 5,
      containers: [
        {
          name: "app",
          image: DEMO_APP_IMAGE,
          imagePullPolicy: "Never",
          ports: [{ name: "http", containerPort: DEMO_APP_PORT, protocol: "TCP" }],
          env: [{ name: "CLUSTER", value: cluster }],
          readinessProbe: { httpGet: { path: "/healthz", port: DEMO_APP_PORT }, periodSeconds: 1 },
          securityContext: {
            runAsNonRoot: true,
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ["ALL"] },
          },
        },
      ],
    },
  };
}

/** Creates the opted-in Deployment (with its NodePort Service) and StatefulSet in "default". */
export async function createBornWorkloads(kc: KubeConfig, cluster: string): Promise<void> {
  const namespace = "default";
  const apps = kc.makeApiClient(AppsV1Api);
  const optIn = { [INJECT_ANNOTATION]: "true" };
  await kc.makeApiClient(CoreV1Api).createNamespacedService({
    namespace,
    body: {
      metadata: { name: BORN_DEPLOYMENT },
      spec: {
        type: "NodePort",
        selector: { app: BORN_DEPLOYMENT },
        // By name: the agent takes the port (no iptables redirect, no privilege).
        ports: [{ name: "http", port: 80, targetPort: "http", nodePort: BORN_NODE_PORT, protocol: "TCP" }],
      },
    },
  });
  await apps.createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name: BORN_DEPLOYMENT, annotations: optIn },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: BORN_DEPLOYMENT } },
        template: template(BORN_DEPLOYMENT, cluster),
      },
    },
  });
  await apps.createNamespacedStatefulSet({
    namespace,
    body: {
      metadata: { name: BORN_STATEFULSET, annotations: optIn },
      spec: {
        replicas: 1,
        serviceName: BORN_STATEFULSET,
        selector: { matchLabels: { app: BORN_STATEFULSET } },
        template: template(BORN_STATEFULSET, cluster),
      },
    },
  });
}

/** Live pods of `app` (not terminating). */
export async function livePods(kc: KubeConfig, app: string): Promise<V1Pod[]> {
  const pods = await kc
    .makeApiClient(CoreV1Api)
    .listNamespacedPod({ namespace: "default", labelSelector: `app=${app}` });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp);
}

/** The pod runs the agent as a sidecar (a restartable init container). */
export function hasAgent(p: V1Pod): boolean {
  return p.spec?.initContainers?.some((c) => c.name === AGENT && c.restartPolicy === "Always") ?? false;
}

/** The webhook gave the pod its agent when it was created. */
export function bornWithAgent(p: V1Pod): boolean {
  return hasAgent(p) && p.metadata?.annotations?.[BORN_WITH_AGENT_ANNOTATION] !== undefined;
}

export function ready(p: V1Pod): boolean {
  return p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/** `want` pods of `app`, every one born with the agent and Ready, and none terminating. */
export async function allBornAndReady(kc: KubeConfig, app: string, want: number): Promise<boolean> {
  const all = (
    await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: "default", labelSelector: `app=${app}` })
  ).items;
  return (
    all.length === want && all.every((p) => bornWithAgent(p) && ready(p) && !p.metadata?.deletionTimestamp)
  );
}

/**
 * What a rollout or a restart would change: each pod's uid and its containers' restart counts,
 * the Deployment's ReplicaSets and its pod template, the StatefulSet's revision and template.
 */
export async function bornState(kc: KubeConfig) {
  const apps = kc.makeApiClient(AppsV1Api);
  const pods = async (app: string) =>
    (await livePods(kc, app))
      .map((p) => ({
        uid: p.metadata!.uid!,
        restarts: [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]
          .map((c) => `${c.name}:${c.restartCount}`)
          .sort(),
      }))
      .sort((a, b) => a.uid.localeCompare(b.uid));
  const d = await apps.readNamespacedDeployment({ name: BORN_DEPLOYMENT, namespace: "default" });
  const sts = await apps.readNamespacedStatefulSet({ name: BORN_STATEFULSET, namespace: "default" });
  const rs = (
    await apps.listNamespacedReplicaSet({ namespace: "default", labelSelector: `app=${BORN_DEPLOYMENT}` })
  ).items
    .map((r) => r.metadata!.name!)
    .sort();
  return {
    deployment: { pods: await pods(BORN_DEPLOYMENT), rs, template: d.spec!.template },
    statefulSet: {
      pods: await pods(BORN_STATEFULSET),
      revision: sts.status?.updateRevision,
      template: sts.spec!.template,
    },
  };
}
