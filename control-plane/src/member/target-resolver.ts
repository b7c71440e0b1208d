// Resolves a session's target (`deployment/x`, `statefulset/x`, `pod/x`, optional
// container) in one namespace to the workload and its pods, and ranks the pods: Running
// and Ready with an IP first, the pod the session already uses kept while it stays
// ready (no flapping), then the oldest. Reads come from a TargetSource (the informer
// caches), so resolution is cheap and repeated on every pod event.
import type { V1Deployment, V1Pod, V1PodTemplateSpec, V1StatefulSet } from "@kubernetes/client-node";
import { parseTarget, type ParsedTarget } from "../../../proto/api/v1alpha1/index.js";
import { selectorMatches } from "./label-selector.js";

export type Workload = V1Deployment | V1StatefulSet;

export interface TargetSource {
  deployment(namespace: string, name: string): V1Deployment | undefined;
  statefulSet(namespace: string, name: string): V1StatefulSet | undefined;
  pod(namespace: string, name: string): V1Pod | undefined;
  pods(namespace: string): readonly V1Pod[];
}

export interface ResolvedTarget {
  namespace: string;
  target: ParsedTarget;
  /** Stable id of what an agent serves: `<namespace>/<kind>/<name>`. */
  id: string;
  /** Undefined for pod targets. */
  workload: Workload | undefined;
  /** Pod template of the workload (or undefined for a pod target). */
  template: V1PodTemplateSpec | undefined;
  /** Container the session runs against (the target's, else the first). */
  container: string;
  /** Pods of the target that are not being deleted. */
  pods: V1Pod[];
  /** Running + Ready pods with an IP, preferred first. */
  readyPods: V1Pod[];
}

export type Resolution =
  { ok: true; resolved: ResolvedTarget } | { ok: false; reason: "TargetNotFound"; message: string };

export function targetId(namespace: string, target: ParsedTarget): string {
  return `${namespace}/${target.kind}/${target.name}`;
}

export function isPodReady(pod: V1Pod): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  if (pod.status?.phase !== "Running" || !pod.status.podIP) return false;
  return (pod.status.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
}

/**
 * How long a pod whose readiness was taken from outside its containers still counts as
 * serving (see `readinessWithheldUntil`). Milliseconds.
 */
export const WITHHELD_READINESS_GRACE_MS = 60_000;

/**
 * For a running pod that is not Ready although its containers are (`ContainersReady` True):
 * the time (epoch ms) until which it still counts as serving; undefined for any other pod.
 * The kubelet never reports that mix for long; it is what the node controller writes when it
 * has not heard a node's kubelet for its grace period — as after the API server itself was
 * away, while the containers kept running — or what an unmet readiness gate shows. An agent
 * in such a pod is still there, so a session keeps it for WITHHELD_READINESS_GRACE_MS after
 * the pod's Ready condition changed instead of withdrawing a healthy cluster; a node that is
 * really gone loses its agents once that grace is over (the routers already saw them down).
 */
export function readinessWithheldUntil(
  pod: V1Pod,
  graceMs = WITHHELD_READINESS_GRACE_MS,
): number | undefined {
  if (pod.metadata?.deletionTimestamp) return undefined;
  if (pod.status?.phase !== "Running" || !pod.status.podIP) return undefined;
  const conditions = pod.status.conditions ?? [];
  const ready = conditions.find((c) => c.type === "Ready");
  const containersReady = conditions.find((c) => c.type === "ContainersReady");
  if (!ready || ready.status === "True" || containersReady?.status !== "True") return undefined;
  const since = new Date(String(ready.lastTransitionTime ?? "")).getTime();
  return Number.isFinite(since) ? since + graceMs : undefined;
}

function createdAt(pod: V1Pod): number {
  const t = pod.metadata?.creationTimestamp as Date | string | undefined;
  return t === undefined ? 0 : new Date(t).getTime();
}

/** Ready pods first-choice first: `current` if ready, then oldest, then by name. */
export function rankReadyPods(pods: readonly V1Pod[], current?: string): V1Pod[] {
  return pods
    .filter(isPodReady)
    .sort(
      (a, b) =>
        Number(b.metadata?.name === current) - Number(a.metadata?.name === current) ||
        createdAt(a) - createdAt(b) ||
        (a.metadata?.name ?? "").localeCompare(b.metadata?.name ?? ""),
    );
}

export function resolveTarget(
  source: TargetSource,
  namespace: string,
  targetRef: string,
  currentPod?: string,
): Resolution {
  const target = parseTarget(targetRef);
  const id = targetId(namespace, target);
  const notFound = (message: string): Resolution => ({ ok: false, reason: "TargetNotFound", message });
  let workload: Workload | undefined;
  let template: V1PodTemplateSpec | undefined;
  let pods: V1Pod[];
  if (target.kind === "pod") {
    const pod = source.pod(namespace, target.name);
    if (!pod || pod.metadata?.deletionTimestamp) {
      return notFound(`pod ${target.name} not found in namespace ${namespace}; check the name and namespace`);
    }
    pods = [pod];
  } else {
    workload =
      target.kind === "deployment"
        ? source.deployment(namespace, target.name)
        : source.statefulSet(namespace, target.name);
    if (!workload || workload.metadata?.deletionTimestamp) {
      return notFound(
        `${target.kind} ${target.name} not found in namespace ${namespace}; check the name and namespace`,
      );
    }
    template = workload.spec?.template;
    const selector = workload.spec?.selector;
    pods = source
      .pods(namespace)
      .filter((p) => !p.metadata?.deletionTimestamp && selectorMatches(selector, p.metadata?.labels));
  }
  const containers = (template?.spec ?? pods[0]?.spec)?.containers ?? [];
  const container = target.container ?? containers[0]?.name;
  if (container === undefined) {
    return notFound(`${target.kind} ${target.name} in namespace ${namespace} has no containers`);
  }
  if (
    target.container !== undefined &&
    containers.length > 0 &&
    !containers.some((c) => c.name === container)
  ) {
    return notFound(
      `container ${container} not found in ${target.kind} ${target.name} (namespace ${namespace}); ` +
        `containers: ${containers.map((c) => c.name).join(", ")}`,
    );
  }
  return {
    ok: true,
    resolved: {
      namespace,
      target,
      id,
      workload,
      template,
      container,
      pods,
      readyPods: rankReadyPods(pods, currentPod),
    },
  };
}
