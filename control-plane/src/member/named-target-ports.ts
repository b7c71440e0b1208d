// What decides how the sidecar takes a pod's ports, read from the API server: the named
// targetPorts of the Services in front of the pods (taken by name: no redirect, no privilege)
// and whether the namespace's PodSecurity level allows the redirect init container at all.
// Shared by the sidecar provisioner (a template patched for a session) and the admission
// webhook (a pod born with the agent), so both give the same pods the same sidecar.
import type { CoreV1Api, V1Service } from "@kubernetes/client-node";
import { TerminalReconcileError } from "../runtime/index.js";

/** The namespace label PodSecurity admission enforces. */
export const POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce";

/** Named TCP targetPorts of the Services whose selector matches `labels` (a pod's, or a template's). */
export function namedTargetPortsOf(
  services: readonly V1Service[],
  labels: Readonly<Record<string, string>>,
): Set<string> {
  const names = new Set<string>();
  for (const svc of services) {
    const selector = Object.entries(svc.spec?.selector ?? {});
    if (selector.length === 0 || !selector.every(([k, v]) => labels[k] === v)) continue;
    for (const port of svc.spec?.ports ?? []) {
      const target = port.targetPort as unknown;
      if ((port.protocol ?? "TCP") === "TCP" && typeof target === "string" && !/^\d+$/.test(target)) {
        names.add(target);
      }
    }
  }
  return names;
}

/** Named targetPorts of the Services in `namespace` that select pods with `labels` (`list services`). */
export async function namedTargetPorts(
  core: CoreV1Api,
  namespace: string,
  labels: Readonly<Record<string, string>> | undefined,
): Promise<Set<string>> {
  const services = await core.listNamespacedService({ namespace });
  return namedTargetPortsOf(services.items, labels ?? {});
}

/** Why the redirect init container cannot run in a namespace, or undefined when it can. */
export interface PodSecurityRefusal {
  reason: "PodSecurityForbidsRedirect";
  level: "baseline" | "restricted";
  message: string;
}

/**
 * The redirect init container needs NET_ADMIN, which PodSecurity `baseline` and `restricted`
 * forbid: a pod given it there is rejected. `labels`: the namespace's labels.
 */
export function podSecurityRefusal(
  namespace: string,
  labels: Readonly<Record<string, string>> | undefined,
): PodSecurityRefusal | undefined {
  const level = labels?.[POD_SECURITY_ENFORCE];
  if (level !== "baseline" && level !== "restricted") return undefined;
  return {
    reason: "PodSecurityForbidsRedirect",
    level,
    message:
      `namespace ${namespace} enforces PodSecurity "${level}", which forbids the NET_ADMIN capability ` +
      "the sidecar's port-redirect init container needs for ports no Service reaches by name; fix: " +
      "name the target container's ports and use those names as the Services' targetPort (taken by " +
      `name, no privilege), or label the namespace ${POD_SECURITY_ENFORCE}=privileged, or run the ` +
      "member with the process provisioner",
  };
}

/** `podSecurityRefusal` for a namespace read from the API server (`get namespaces`), thrown as terminal. */
export async function checkPodSecurity(core: CoreV1Api, namespace: string): Promise<void> {
  const ns = await core.readNamespace({ name: namespace });
  const refusal = podSecurityRefusal(namespace, ns.metadata?.labels);
  if (refusal) throw new TerminalReconcileError(refusal.reason, refusal.message);
}

/**
 * The PodSecurity level of `namespace` that forbids the redirect init container (`get
 * namespaces`), or undefined when the namespace allows it.
 */
export async function redirectForbiddenBy(
  core: CoreV1Api,
  namespace: string,
): Promise<"baseline" | "restricted" | undefined> {
  const ns = await core.readNamespace({ name: namespace });
  return podSecurityRefusal(namespace, ns.metadata?.labels)?.level;
}
