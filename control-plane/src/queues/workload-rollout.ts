// Whether a workload's latest template runs everywhere: what the split waits for after
// restoring a consumer's variable, before draining and deleting the temporary queue its
// old pods still read. The same test `kubectl rollout status` makes.
import { AppsV1Api, type KubeConfig } from "@kubernetes/client-node";
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
    return (s.updatedReplicas ?? 0) >= want && s.currentRevision === s.updateRevision;
  }
  const d = st as { updatedReplicas?: number; replicas?: number; availableReplicas?: number };
  return (
    (d.updatedReplicas ?? 0) >= want &&
    (d.replicas ?? 0) <= (d.updatedReplicas ?? 0) &&
    (d.availableReplicas ?? 0) >= want
  );
}
