// Plays the member control plane of one workload cluster for the Primary's tests (the
// member-mode reconciler is developed in parallel): every child ClusterSession without a
// phase is resolved against the real API server of its cluster — Ready with a gateway
// and a pod when the target Deployment exists there, Failed with TargetNotFound when it
// does not. Every call is a real Kubernetes API call; only the agent is missing.
import { ApiException, AppsV1Api, type KubeConfig } from "@kubernetes/client-node";
import { clusterSessionClient, parseTarget } from "../../../proto/api/v1alpha1/index.js";

export interface MemberSimulator {
  stop(): Promise<void>;
}

export function gatewayUrl(cluster: string): string {
  return `wss://gateway.${cluster}.switchyard.test:8443`;
}

export function startMemberSimulator(cluster: string, kc: KubeConfig): MemberSimulator {
  const sessions = clusterSessionClient(kc, { fieldManager: `member-sim-${cluster}` });
  const apps = kc.makeApiClient(AppsV1Api);
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const { items } = await sessions.list();
        for (const s of items) {
          if (s.status?.phase || s.metadata.deletionTimestamp) continue;
          const ns = s.metadata.namespace!;
          const target = parseTarget(s.spec.target);
          let exists = true;
          try {
            await apps.readNamespacedDeployment({ namespace: ns, name: target.name });
          } catch (err) {
            if (!(err instanceof ApiException && err.code === 404)) throw err;
            exists = false;
          }
          const now = new Date().toISOString();
          await sessions.patchStatus(
            { namespace: ns, name: s.metadata.name! },
            exists
              ? {
                  phase: "Ready",
                  gateway: gatewayUrl(cluster),
                  pod: { name: `${target.name}-0`, ip: "10.0.0.1" },
                  conditions: [
                    {
                      type: "Ready",
                      status: "True",
                      reason: "AgentReady",
                      message: "ok",
                      lastTransitionTime: now,
                    },
                  ],
                }
              : {
                  phase: "Failed",
                  conditions: [
                    {
                      type: "Ready",
                      status: "False",
                      reason: "TargetNotFound",
                      message: `deployment ${target.name} not found in ${ns}`,
                      lastTransitionTime: now,
                    },
                  ],
                },
          );
        }
      } catch {
        // API server down (outage tests) or object gone meanwhile: try again next round.
      }
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
