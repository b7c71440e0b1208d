// What the agent container gets so it sees its target container as the app does, with no
// Kubernetes API access (it runs under the target pod's ServiceAccount, and RBAC granted to
// that account would be granted to the app too): the target's `envFrom` and `env` copied
// under TARGET_ENV_PREFIX, which the kubelet resolves exactly as for the app (valueFrom,
// envFrom, downward API, `$(VAR)` expansion), and each volume the target mounts mounted
// again, read-only, below TARGET_ROOT. It adds no pod volume: removing the agent container
// removes all of it.
import { posix } from "node:path";
import type {
  V1Container,
  V1EnvFromSource,
  V1EnvVar,
  V1PodSpec,
  V1VolumeMount,
} from "@kubernetes/client-node";
import { SERVICE_LINK_NAME, TARGET_ENV_PREFIX, TARGET_ROOT } from "../../../proto/sidecar-target.js";

/** The parts of the agent container that carry the target's env and volumes. */
export interface AgentTargetView {
  /** Copies of the target's envFrom; the kubelet applies them before every env entry. */
  envFrom: V1EnvFromSource[];
  /** Copies of the target's env; they go before the agent's own entries, which therefore win. */
  env: V1EnvVar[];
  volumeMounts: V1VolumeMount[];
  args: string[];
}

/**
 * A value the kubelet expands (`value`, `subPathExpr`) with its `$(VAR)` references pointed
 * at the prefixed copies. A service-link name stays as it is (the kubelet gives the agent the
 * same ones) unless the container defines that name itself (`defined`), which then shadows
 * it. `$$` escapes and an unterminated `$(` are kept verbatim, so the kubelet reads the
 * result with the same syntax as the original.
 */
export function prefixReferences(value: string, defined: ReadonlySet<string>): string {
  let out = "";
  for (let i = 0; i < value.length; i++) {
    const ch = value[i]!;
    if (ch !== "$" || i + 1 >= value.length) {
      out += ch;
      continue;
    }
    const next = value[i + 1];
    if (next === "$") {
      out += "$$";
      i++;
      continue;
    }
    if (next === "(") {
      const close = value.indexOf(")", i + 2);
      if (close === -1) return out + value.slice(i);
      const name = value.slice(i + 2, close);
      const keep = name === "" || (SERVICE_LINK_NAME.test(name) && !defined.has(name));
      out += `$(${keep ? name : TARGET_ENV_PREFIX + name})`;
      i = close;
      continue;
    }
    out += ch;
  }
  return out;
}

function copyEnv(container: V1Container): V1EnvVar[] {
  // Only names defined before an entry count for it: the kubelet expands each value against
  // what is defined so far. Names an envFrom source brings are unknown here (they are keys
  // of a ConfigMap or Secret).
  const defined = new Set<string>();
  return (container.env ?? []).map((e) => {
    const copy = structuredClone(e);
    copy.name = TARGET_ENV_PREFIX + e.name;
    if (copy.value !== undefined) copy.value = prefixReferences(copy.value, defined);
    const resource = copy.valueFrom?.resourceFieldRef;
    // Without a container name the reference would mean the agent's own resources.
    if (resource && !resource.containerName) resource.containerName = container.name;
    defined.add(e.name);
    return copy;
  });
}

/** The agent's copies of `container`'s env and volume mounts, and the flags that tell the agent about them. */
export function agentTargetView(spec: V1PodSpec, containerName: string): AgentTargetView {
  const container = spec.containers.find((c) => c.name === containerName);
  if (!container) return { envFrom: [], env: [], volumeMounts: [], args: [] };
  const envFrom = (container.envFrom ?? []).map((from) => ({
    ...structuredClone(from),
    prefix: TARGET_ENV_PREFIX + (from.prefix ?? ""),
  }));
  const allNames = new Set((container.env ?? []).map((e) => e.name));
  const volumeMounts: V1VolumeMount[] = [];
  const mountArgs: string[] = [];
  for (const m of container.volumeMounts ?? []) {
    const volume = (spec.volumes ?? []).find((v) => v.name === m.name);
    // A projected ServiceAccount token is minted for the app's use; the agent neither needs nor serves it.
    if (volume?.projected?.sources?.some((s) => s.serviceAccountToken)) continue;
    volumeMounts.push({
      name: m.name,
      mountPath: posix.join(TARGET_ROOT, m.mountPath).replace(/\/+$/, ""),
      readOnly: true,
      ...(m.subPath !== undefined ? { subPath: m.subPath } : {}),
      // subPathExpr is expanded against the container's whole environment.
      ...(m.subPathExpr !== undefined ? { subPathExpr: prefixReferences(m.subPathExpr, allNames) } : {}),
    });
    mountArgs.push(`--target-mount=${m.mountPath}`);
  }
  return {
    envFrom,
    env: copyEnv(container),
    volumeMounts,
    args: [`--target-env-prefix=${TARGET_ENV_PREFIX}`, `--target-root=${TARGET_ROOT}`, ...mountArgs],
  };
}
