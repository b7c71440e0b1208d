// Whether a workload's latest template runs everywhere, and nothing else still runs: what the
// split waits for after restoring a consumer's variable, before draining and deleting the
// temporary queue its old pods read. The status test is the one `kubectl rollout status`
// makes; on top of it, no pod of the workload may still be terminating. A Deployment's status
// stops counting a pod once its deletion starts, yet a consumer's old pod keeps reading the
// temporary queue through its grace period (finishing its batch, as a well-behaved consumer
// does): a queue drained and deleted under it would take the messages it holds with it.
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1LabelSelector } from "@kubernetes/client-node";
import { selectorMatches } from "../member/label-selector.js";
import type { ConsumerRef } from "./consumer-env.js";

export async function rolloutDone(kc: KubeConfig, ref: ConsumerRef): Promise<boolean> {
  const apps = kc.makeApiClient(AppsV1Api);
  const w =
    ref.kind === "deployment"
      ? await apps.readNamespacedDeployment({ namespace: ref.namespace, name: ref.name })
      : await apps.readNamespacedStatefulSet({ namespace: ref.namespace, name: ref.name });
  const want = w.spec?.replicas ?? 1;
  const st = w.status ?? {};
  if ((st.observedGeneration ?? 0) < (w.metadata?.generation ?? 0)) return false;
  if (ref.kind === "statefulset") {
    const s = st as { updatedReplicas?: number; currentRevision?: string; updateRevision?: string };
    if ((s.updatedReplicas ?? 0) < want || s.currentRevision !== s.updateRevision) return false;
  } else {
    const d = st as { updatedReplicas?: number; replicas?: number; availableReplicas?: number };
    if (
      (d.updatedReplicas ?? 0) < want ||
      (d.replicas ?? 0) > (d.updatedReplicas ?? 0) ||
      (d.availableReplicas ?? 0) < want
    )
      return false;
  }
  return (await terminatingPods(kc, ref.namespace, w.spec?.selector)) === 0;
}

/** Pods of the workload's selector whose deletion has started and that still exist. */
async function terminatingPods(
  kc: KubeConfig,
  namespace: string,
  selector: V1LabelSelector | undefined,
): Promise<number> {
  const labels = Object.entries(selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  const pods = await kc.makeApiClient(CoreV1Api).listNamespacedPod({
    namespace,
    ...(labels.length > 0 ? { labelSelector: labels.join(",") } : {}),
  });
  return pods.items.filter(
    (p) => p.metadata?.deletionTimestamp && selectorMatches(selector, p.metadata.labels ?? {}),
  ).length;
}
