// The agent a pod is born with, as pure functions: which workload owns a pod being created
// (a ReplicaSet's Deployment, or a StatefulSet), and the JSON patch of the AdmissionReview
// response that gives the pod the same sidecar a session's template patch would
// (../member/sidecar-pod-template.ts, never a second copy of it) plus the mark that it was
// born with it. The pod's own spec is the template: a webhook sees the pod as its owner made it.
import type { V1Pod, V1PodTemplateSpec } from "@kubernetes/client-node";
import { BORN_WITH_AGENT_ANNOTATION } from "../member/agent-annotations.js";
import { hasSidecar, injectSidecar, type SidecarSettings } from "../member/sidecar-pod-template.js";

export interface PodOwner {
  kind: "deployment" | "statefulset";
  name: string;
}

/**
 * The workload a pod belongs to, from its controller reference: a ReplicaSet named
 * `<deployment>-<pod-template-hash>` (the Deployment controller's naming; the caller confirms the
 * Deployment exists and selects the pod), or a StatefulSet. Undefined for anything else.
 */
export function podOwner(pod: V1Pod): PodOwner | undefined {
  const ref = pod.metadata?.ownerReferences?.find((o) => o.controller);
  if (!ref) return undefined;
  if (ref.kind === "StatefulSet" && ref.apiVersion.startsWith("apps/"))
    return { kind: "statefulset", name: ref.name };
  if (ref.kind !== "ReplicaSet" || !ref.apiVersion.startsWith("apps/")) return undefined;
  const hash = pod.metadata?.labels?.["pod-template-hash"];
  if (!hash || !ref.name.endsWith(`-${hash}`)) return undefined;
  return { kind: "deployment", name: ref.name.slice(0, -hash.length - 1) };
}

export type JsonPatchOp = { op: "add" | "replace"; path: string; value: unknown };

/**
 * The patch that gives `pod` the agent for `container` (undefined when it already has one: a
 * template a session patched). Replaces the spec whole and sets the annotations whole, as the
 * sidecar's template patch does, so what a pod is born with is what a rollout would give it.
 */
export function podInjectionPatch(
  pod: V1Pod,
  container: string,
  secretHash: string,
  settings: SidecarSettings,
  named: ReadonlySet<string>,
  now: Date,
): JsonPatchOp[] | undefined {
  if (hasSidecar(pod.spec)) return undefined;
  const template: V1PodTemplateSpec = {
    metadata: {
      ...(pod.metadata?.labels ? { labels: pod.metadata.labels } : {}),
      annotations: pod.metadata?.annotations ?? {},
    },
    spec: pod.spec!,
  };
  const injected = injectSidecar(template, container, secretHash, settings, named);
  const annotations = {
    ...(injected.metadata?.annotations ?? {}),
    [BORN_WITH_AGENT_ANNOTATION]: now.toISOString(),
  };
  return [
    { op: "replace", path: "/spec", value: injected.spec },
    { op: pod.metadata?.annotations ? "replace" : "add", path: "/metadata/annotations", value: annotations },
  ];
}
