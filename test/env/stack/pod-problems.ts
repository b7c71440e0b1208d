// What a person needs when pods of a stack do not come up: every pod that is not Ready, in
// every namespace of every cluster, with its phase, each container's state (waiting reason and
// message, last termination and exit code) and the last lines of the logs of containers that
// are not ready (read through the kubelet, as `kubectl logs` does), plus recent Warning events.
import { CoreV1Api, type V1ContainerStatus, type V1Pod } from "@kubernetes/client-node";
import type { TestCluster } from "../clusters/cluster-set.js";

const LOG_LINES = 20;

function containerState(s: V1ContainerStatus): string {
  const st = s.state;
  const now = st?.waiting
    ? `waiting (${st.waiting.reason ?? "?"}${st.waiting.message ? `: ${st.waiting.message}` : ""})`
    : st?.terminated
      ? `terminated (exit ${st.terminated.exitCode}, ${st.terminated.reason ?? "?"})`
      : st?.running
        ? "running"
        : "unknown";
  const last = s.lastState?.terminated
    ? `, last exit ${s.lastState.terminated.exitCode} (${s.lastState.terminated.reason ?? "?"})`
    : "";
  return `${s.name}: ${now}${s.ready ? ", ready" : ", not ready"}, ${s.restartCount} restarts${last}`;
}

function isReady(p: V1Pod): boolean {
  return p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

async function podLines(core: CoreV1Api, p: V1Pod): Promise<string[]> {
  const ns = p.metadata!.namespace!;
  const name = p.metadata!.name!;
  const lines = [`  ${ns}/${name}: ${p.status?.phase ?? "?"} on ${p.spec?.nodeName ?? "no node"}`];
  const statuses = [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])];
  for (const s of statuses) {
    lines.push(`    ${containerState(s)}`);
    if (s.ready || (!s.state?.running && !s.state?.terminated && !s.lastState?.terminated)) continue;
    const log = await core
      .readNamespacedPodLog({
        name,
        namespace: ns,
        container: s.name,
        tailLines: LOG_LINES,
        ...(s.state?.running || s.state?.terminated ? {} : { previous: true }),
      })
      .catch((e: unknown) => `(no log: ${(e as Error).message.split("\n")[0]})`);
    for (const l of String(log).trimEnd().split("\n")) lines.push(`      | ${l}`);
  }
  for (const c of p.status?.conditions ?? [])
    if (c.status !== "True" && c.message) lines.push(`    ${c.type}: ${c.reason ?? ""} ${c.message}`);
  return lines;
}

/** A report of what is not Ready in `clusters` (empty lines when everything is). */
export async function describePodProblems(clusters: TestCluster[]): Promise<string> {
  const out: string[] = [];
  for (const c of clusters) {
    const core = c.kubeConfig().makeApiClient(CoreV1Api);
    try {
      const pods = (await core.listPodForAllNamespaces()).items.filter((p) => !isReady(p));
      const events = (await core.listEventForAllNamespaces({ fieldSelector: "type=Warning" })).items.slice(
        -10,
      );
      if (pods.length === 0 && events.length === 0) continue;
      out.push(`${c.name}: ${pods.length} pod(s) not Ready`);
      for (const p of pods) out.push(...(await podLines(core, p)));
      for (const e of events)
        out.push(`  event ${e.involvedObject.kind}/${e.involvedObject.name}: ${e.reason} ${e.message ?? ""}`);
    } catch (err) {
      out.push(`${c.name}: could not list pods (${(err as Error).message.split("\n")[0]})`);
    }
  }
  return out.length > 0 ? out.join("\n") : "every pod is Ready";
}

/** The last `tailLines` log lines of every container of the pods `labelSelector` selects in `namespace`. */
export async function podLogs(
  cluster: TestCluster,
  namespace: string,
  labelSelector: string,
  tailLines = 40,
): Promise<string> {
  const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
  const out: string[] = [];
  for (const p of (await core.listNamespacedPod({ namespace, labelSelector })).items) {
    for (const c of p.spec?.containers ?? []) {
      const log = await core
        .readNamespacedPodLog({ name: p.metadata!.name!, namespace, container: c.name, tailLines })
        .catch((e: unknown) => `(no log: ${(e as Error).message.split("\n")[0]})`);
      out.push(`${cluster.name} ${namespace}/${p.metadata!.name}/${c.name}:`);
      for (const l of String(log).trimEnd().split("\n")) out.push(`  | ${l}`);
    }
  }
  return out.join("\n");
}
