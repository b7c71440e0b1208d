// Plays the kubelet's part for tests: there is no node agent in the test clusters,
// so Pods stay Pending until a test marks them Running and Ready with a pod IP.
import { CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { eventually } from "../../support/poll.js";

export interface PodRunOptions {
  /** Pod IP to report (default: a 10.244.x.y address derived from the pod name). */
  podIP?: string;
  /** Report Ready (default true); false leaves the pod Running but not Ready. */
  ready?: boolean;
  /**
   * Ready taken away this many ms ago with the containers still ready, as the node
   * controller writes when it stopped hearing the node's kubelet (implies `ready`).
   */
  nodeNotReadyForMs?: number;
}

function ipFor(name: string): string {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return `10.244.${(h >> 8) & 0xff}.${(h & 0xfe) + 1}`;
}

function isConflict(err: unknown): boolean {
  return (err as { code?: number }).code === 409;
}

/** Marks a Pod Running (and Ready unless told otherwise) with a pod IP, as a kubelet would. */
export async function markPodRunning(
  kc: KubeConfig,
  namespace: string,
  name: string,
  opts: PodRunOptions = {},
): Promise<V1Pod> {
  const api = kc.makeApiClient(CoreV1Api);
  for (let attempt = 0; ; attempt++) {
    const pod = await api.readNamespacedPod({ name, namespace });
    const now = new Date();
    const ready = opts.ready ?? true;
    const podIP = opts.podIP ?? ipFor(name);
    const cond = (type: string, status: boolean, since = now) => ({
      type,
      status: status ? "True" : "False",
      lastTransitionTime: since,
    });
    const taken = opts.nodeNotReadyForMs;
    pod.status = {
      ...pod.status,
      phase: "Running",
      podIP,
      podIPs: [{ ip: podIP }],
      hostIP: "127.0.0.1",
      startTime: pod.status?.startTime ?? now,
      conditions: [
        cond("PodScheduled", true),
        cond("Initialized", true),
        cond("ContainersReady", ready),
        taken === undefined ? cond("Ready", ready) : cond("Ready", false, new Date(now.getTime() - taken)),
      ],
      containerStatuses: (pod.spec?.containers ?? []).map((c) => ({
        name: c.name,
        image: c.image ?? "",
        imageID: "",
        ready,
        restartCount: 0,
        started: true,
        state: { running: { startedAt: now } },
      })),
    };
    try {
      return await api.replaceNamespacedPodStatus({ name, namespace, body: pod });
    } catch (err) {
      if (isConflict(err) && attempt < 5) continue;
      throw err;
    }
  }
}

/**
 * Waits until `labelSelector` matches at least `count` Pods (created by the controller
 * manager), then marks each Running and Ready. Returns the pods.
 */
export async function runPods(
  kc: KubeConfig,
  namespace: string,
  labelSelector: string,
  count: number,
  timeoutMs = 30_000,
): Promise<V1Pod[]> {
  const api = kc.makeApiClient(CoreV1Api);
  const pods = await eventually(
    `${count} pods matching ${labelSelector} in ${namespace}`,
    async () => {
      const list = await api.listNamespacedPod({ namespace, labelSelector });
      const live = list.items.filter((p) => !p.metadata?.deletionTimestamp);
      // Thrown, not returned: the timeout error then says how many there were.
      if (live.length < count) throw new Error(`only ${live.length}/${count} pods`);
      return live;
    },
    { timeoutMs, intervalMs: 200 },
  );
  const out: V1Pod[] = [];
  for (const p of pods) out.push(await markPodRunning(kc, namespace, p.metadata!.name!));
  return out;
}
