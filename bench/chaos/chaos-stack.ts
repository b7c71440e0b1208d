// What the chaos bench reads and breaks on the pod stack (test/env/stack/pod-stack.ts), with the
// clusters' admin credentials: the control-plane leader (its Lease in `switchyard` on the
// Primary) and the Primary's router pods, to delete; whether a session's objects are still
// there — the MultiClusterSession on the Primary, its ClusterSessions in the members — and
// whether the demo Deployments carry the agent or are back as they were.
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Pod,
} from "@kubernetes/client-node";
import { clusterSessionClient, LABELS, multiClusterSessionClient } from "../../proto/api/v1alpha1/index.js";
import { LINGER_SECONDS_ANNOTATION } from "../../control-plane/src/member/agent-annotations.js";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { eventually } from "../../test/support/poll.js";

export const STACK_NS = "switchyard";
const AGENT = "switchyard-agent";
const REDIRECT = "switchyard-redirect";

export const adminKc = (stack: PodStack, cluster: string): KubeConfig => stack.set.get(cluster).kubeConfig();
const core = (stack: PodStack, cluster: string) => adminKc(stack, cluster).makeApiClient(CoreV1Api);

/** Pods of a component in the Primary's `switchyard` namespace, not terminating, oldest first. */
export async function primaryPods(stack: PodStack, component: "router" | "control-plane"): Promise<V1Pod[]> {
  const pods = await core(stack, "primary").listNamespacedPod({
    namespace: STACK_NS,
    labelSelector: `app.kubernetes.io/component=${component}`,
  });
  const created = (p: V1Pod) => new Date(p.metadata?.creationTimestamp ?? 0).getTime();
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp).sort((a, b) => created(a) - created(b));
}

/** The holder of the control-plane Lease on the Primary and its pod, as test/pods does. */
export async function controlPlaneLeader(stack: PodStack): Promise<{ holder: string; pod: string }> {
  const leases = await adminKc(stack, "primary")
    .makeApiClient(CoordinationV1Api)
    .listNamespacedLease({ namespace: STACK_NS });
  const pods = await primaryPods(stack, "control-plane");
  for (const l of leases.items) {
    const holder = l.spec?.holderIdentity;
    const pod = holder && pods.find((p) => holder.includes(p.metadata!.name!));
    if (holder && pod) return { holder, pod: pod.metadata!.name! };
  }
  throw new Error(
    `no Lease in ${STACK_NS} on the Primary is held by a control-plane pod ` +
      `(holders: ${leases.items.map((l) => l.spec?.holderIdentity ?? "none").join(", ") || "no leases"})`,
  );
}

export async function deletePrimaryPod(stack: PodStack, name: string): Promise<void> {
  await core(stack, "primary").deleteNamespacedPod({ name, namespace: STACK_NS });
}

/** True once the pod object is gone (its containers stopped, the kubelet confirmed). */
export async function primaryPodGone(stack: PodStack, name: string): Promise<boolean> {
  const pods = await core(stack, "primary").listNamespacedPod({
    namespace: STACK_NS,
    fieldSelector: `metadata.name=${name}`,
  });
  return pods.items.length === 0;
}

const templateHasAgent = async (kc: KubeConfig) => {
  const d = await kc
    .makeApiClient(AppsV1Api)
    .readNamespacedDeployment({ name: "demo", namespace: "default" });
  const t = d.spec!.template.spec!;
  return [...(t.initContainers ?? []), ...t.containers].some((c) => c.name === AGENT);
};

/** Every workload cluster's demo template carries the agent or not, by cluster. */
export async function templatesWithAgent(stack: PodStack): Promise<Record<string, boolean>> {
  const out: Record<string, boolean> = {};
  for (const c of Object.keys(stack.workloads)) out[c] = await templateHasAgent(adminKc(stack, c));
  return out;
}

const hasAgent = (p: V1Pod) =>
  [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])].some(
    (c) => c.name === AGENT || c.name === REDIRECT,
  );
const isReady = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");

/** The demo Deployment's rollout is complete and every pod (terminating ones too) is as `injected` says. */
export async function demoRolledOut(kc: KubeConfig, injected: boolean): Promise<boolean> {
  const d = await kc
    .makeApiClient(AppsV1Api)
    .readNamespacedDeployment({ name: "demo", namespace: "default" });
  if ((await templateHasAgent(kc)) !== injected) return false;
  const want = d.spec?.replicas ?? 1;
  const s = d.status ?? {};
  if ((s.observedGeneration ?? 0) < (d.metadata?.generation ?? 0)) return false;
  if (s.replicas !== want || s.updatedReplicas !== want || s.availableReplicas !== want) return false;
  const pods = (
    await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: "default", labelSelector: "app=demo" })
  ).items;
  return pods.length === want && pods.every((p) => hasAgent(p) === injected && isReady(p));
}

/**
 * Sets each demo Deployment's agent linger to 0 s (its annotation; no rollout): the agent goes
 * with the last session, so "restored" after a scenario means what it says. An idle agent's
 * linger (15 minutes by default) is the pods bench's to measure.
 */
export async function withoutLinger(stack: PodStack): Promise<void> {
  for (const c of Object.keys(stack.workloads))
    await adminKc(stack, c)
      .makeApiClient(AppsV1Api)
      .patchNamespacedDeployment(
        {
          name: "demo",
          namespace: "default",
          body: { metadata: { annotations: { [LINGER_SECONDS_ANNOTATION]: "0" } } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
}

/**
 * Waits until no session is left in namespace default on the Primary and both demos are back
 * without the agent; false when that did not happen within `timeoutMs` (left as it is).
 */
export async function waitQuiet(stack: PodStack, timeoutMs: number): Promise<boolean> {
  const sessions = multiClusterSessionClient(adminKc(stack, "primary"));
  try {
    await eventually(
      "no session left and both demos restored",
      async () => {
        if ((await sessions.list({ namespace: "default" })).items.length > 0) return false;
        for (const c of Object.keys(stack.workloads))
          if (!(await demoRolledOut(adminKc(stack, c), false))) return false;
        return true;
      },
      { timeoutMs, intervalMs: 500 },
    );
    return true;
  } catch {
    return false;
  }
}

/** What is left of session `id`: its parent on the Primary, its children and the agent per member. */
export interface SessionRemains {
  parent: boolean;
  children: Record<string, number>;
  agentInTemplate: Record<string, boolean>;
}

export async function sessionRemains(stack: PodStack, id: string): Promise<SessionRemains> {
  const parent =
    (await multiClusterSessionClient(adminKc(stack, "primary")).get({ name: id, namespace: "default" })) !==
    undefined;
  const children: Record<string, number> = {};
  for (const c of Object.keys(stack.workloads))
    children[c] = (await clusterSessionClient(adminKc(stack, c)).list({ namespace: "default" })).items.filter(
      (s) => s.spec.parent?.name === id || s.metadata.labels?.[LABELS.parent] === id,
    ).length;
  return { parent, children, agentInTemplate: await templatesWithAgent(stack) };
}

/** The session's TTL as stored in its spec (what the CLI set), seconds. */
export async function sessionTtlSeconds(stack: PodStack, id: string): Promise<number | undefined> {
  const s = await multiClusterSessionClient(adminKc(stack, "primary")).get({
    name: id,
    namespace: "default",
  });
  return s?.spec.ttlSeconds;
}

/** The parent's phase and its children's readiness. */
export async function sessionReady(stack: PodStack, id: string): Promise<{ phase: string; ready: string[] }> {
  const s = await multiClusterSessionClient(adminKc(stack, "primary")).get({
    name: id,
    namespace: "default",
  });
  return {
    phase: s?.status?.phase ?? (s ? "Creating" : "gone"),
    ready: Object.entries(s?.status?.children ?? {})
      .filter(([, c]) => c.ready)
      .map(([name]) => name),
  };
}

/**
 * The last `tailLines` of every Switchyard container — control planes and routers in every
 * cluster, the agents in the demo pods (native sidecars: init containers) — for the record
 * when a scenario counted something it should not have.
 */
export async function componentLogs(stack: PodStack, tailLines: number): Promise<string> {
  const out: string[] = [];
  for (const cluster of ["primary", ...Object.keys(stack.workloads)]) {
    const api = core(stack, cluster);
    for (const [namespace, selector] of [
      [STACK_NS, undefined],
      ["default", "app=demo"],
    ] as const) {
      const pods = await api
        .listNamespacedPod({ namespace, ...(selector ? { labelSelector: selector } : {}) })
        .catch(() => undefined);
      for (const p of pods?.items ?? [])
        for (const c of [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])]) {
          if (namespace === "default" && c.name !== AGENT) continue;
          const log = await api
            .readNamespacedPodLog({ name: p.metadata!.name!, namespace, container: c.name, tailLines })
            .catch((e: unknown) => `(no log: ${String((e as Error).message).split("\n")[0]})`);
          out.push(`=== ${cluster} ${namespace}/${p.metadata!.name}/${c.name}`, String(log).trimEnd());
        }
    }
    // What Kubernetes itself said meanwhile: readiness taken from pods by the node
    // controller, probe failures, kills (nodes' events land in `default` too).
    const events = await api.listNamespacedEvent({ namespace: "default" }).catch(() => undefined);
    const lines = (events?.items ?? [])
      .map((e) => ({
        e,
        at: new Date(String(e.lastTimestamp ?? e.eventTime ?? e.metadata?.creationTimestamp)).getTime(),
      }))
      .sort((a, b) => a.at - b.at)
      .slice(-60)
      .map(
        ({ e, at }) =>
          `${at} ${e.type} ${e.reason} ${e.involvedObject?.kind}/${e.involvedObject?.name} ×${e.count ?? 1}: ${e.message ?? ""}`,
      );
    out.push(`=== ${cluster} events in default`, ...lines);
  }
  return out.join("\n");
}
