// Commands run inside a cluster for the branching tests on real nodes: a short-lived pod of one
// container (restartPolicy Never) whose log is the answer, for what the host cannot reach
// (pod IPs and ClusterIPs are not routed from it).
import type { CoreV1Api, V1EnvVar } from "@kubernetes/client-node";
import { eventually } from "../../support/poll.js";

/** Env entries read from `secret`: variable name → key. */
export function secretEnv(secret: string, keys: Record<string, string>): V1EnvVar[] {
  return Object.entries(keys).map(([name, key]) => ({
    name,
    valueFrom: { secretKeyRef: { name: secret, key } },
  }));
}

/** Runs `command` in a pod of `image` as `uid` until it ends; answers its log, or throws it if the pod failed. */
export async function runOnceInCluster(
  core: CoreV1Api,
  o: { namespace: string; tool: string; image: string; uid: number; command: string[]; env: V1EnvVar[] },
): Promise<string> {
  const name = `${o.tool}-${Math.random().toString(36).slice(2, 8)}`;
  await core.createNamespacedPod({
    namespace: o.namespace,
    body: {
      metadata: { name },
      spec: {
        restartPolicy: "Never",
        terminationGracePeriodSeconds: 0,
        securityContext: { runAsNonRoot: true, runAsUser: o.uid },
        containers: [
          { name: o.tool, image: o.image, imagePullPolicy: "Never", command: o.command, env: o.env },
        ],
      },
    },
  });
  try {
    const phase = await eventually(
      `${o.tool} pod ${name} finished`,
      async () => {
        const p = await core.readNamespacedPod({ namespace: o.namespace, name });
        return p.status?.phase === "Succeeded" || p.status?.phase === "Failed" ? p.status.phase : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const log = String(await core.readNamespacedPodLog({ namespace: o.namespace, name }));
    if (phase !== "Succeeded") throw new Error(`${o.tool} failed: ${log}`);
    return log.trim();
  } finally {
    await core.deleteNamespacedPod({ namespace: o.namespace, name, gracePeriodSeconds: 0 }).catch(() => {});
  }
}
