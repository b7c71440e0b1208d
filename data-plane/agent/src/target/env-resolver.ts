// Resolves a container's environment through the Kubernetes API exactly as the kubelet
// builds it: service links first (when enabled), then `envFrom` sources in order, then
// `env` entries in order — later entries win — with $(VAR) expansion against what is
// defined so far, `$$` as an escape, and optional sources that may be missing.
// The agent reads only its own target's pod and the ConfigMaps/Secrets it references.
import type { V1Container, V1Pod, V1Service } from "@kubernetes/client-node";
import { ErrorCode } from "../../../../proto/error-codes.js";

export class EnvResolveError extends Error {
  constructor(
    readonly code:
      | typeof ErrorCode.ENV_SOURCE_NOT_FOUND
      | typeof ErrorCode.ENV_KEY_NOT_FOUND
      | typeof ErrorCode.ENV_UNSUPPORTED
      | typeof ErrorCode.ENV_CONTAINER_NOT_FOUND,
    message: string,
  ) {
    super(message);
  }
}

/** Reads the objects an environment refers to; the API-backed one is in api-sources.ts. */
export interface EnvSources {
  configMap(namespace: string, name: string): Promise<Record<string, string> | undefined>;
  secret(namespace: string, name: string): Promise<Record<string, string> | undefined>;
  /** Services of the namespace, and the master service `kubernetes` of "default". */
  services(namespace: string): Promise<{ local: V1Service[]; master: V1Service | undefined }>;
}

export interface ResolveEnvOptions {
  /** Container name; default: the pod's first container. */
  container?: string;
}

/** A Map keeps definition order, which `$(VAR)` expansion and listing rely on. */
export type ResolvedEnv = Map<string, string>;

/** $(VAR) expansion as in k8s.io/kubernetes/third_party/forked/golang/expansion. */
export function expandVars(input: string, lookup: (name: string) => string | undefined): string {
  let out = "";
  for (let i = 0; i < input.length; i++) {
    const ch = input[i];
    if (ch !== "$" || i + 1 >= input.length) {
      out += ch;
      continue;
    }
    const next = input[i + 1];
    if (next === "$") {
      out += "$";
      i++;
      continue;
    }
    if (next === "(") {
      const close = input.indexOf(")", i + 2);
      if (close === -1) {
        out += input.slice(i);
        break;
      }
      const name = input.slice(i + 2, close);
      const value = lookup(name);
      out += value ?? `$(${name})`;
      i = close;
      continue;
    }
    out += ch;
  }
  return out;
}

/**
 * Docker-link style variables, as the kubelet makes them: the master service of "default"
 * always, and the namespace's services when service links are enabled (a local service
 * of the same name replaces the master one). Services without a cluster IP get none.
 */
function serviceEnv(
  local: V1Service[],
  master: V1Service | undefined,
  enableServiceLinks: boolean,
): Array<[string, string]> {
  const byName = new Map<string, V1Service>();
  if (master?.metadata?.name) byName.set(master.metadata.name, master);
  if (enableServiceLinks) for (const svc of local) if (svc.metadata?.name) byName.set(svc.metadata.name, svc);
  const out: Array<[string, string]> = [];
  for (const [name, svc] of byName) {
    const ip = svc.spec?.clusterIP;
    if (!ip || ip === "None") continue;
    const prefix = name.toUpperCase().replace(/-/g, "_");
    const ports = svc.spec?.ports ?? [];
    out.push([`${prefix}_SERVICE_HOST`, ip]);
    if (ports.length > 0) out.push([`${prefix}_SERVICE_PORT`, String(ports[0]!.port)]);
    for (const p of ports) {
      if (p.name)
        out.push([`${prefix}_SERVICE_PORT_${p.name.toUpperCase().replace(/-/g, "_")}`, String(p.port)]);
    }
    if (ports.length > 0) {
      const first = ports[0]!;
      const proto = (first.protocol ?? "TCP").toLowerCase();
      const host = ip.includes(":") ? `[${ip}]` : ip;
      out.push([`${prefix}_PORT`, `${proto}://${host}:${first.port}`]);
    }
    for (const p of ports) {
      const protoUpper = (p.protocol ?? "TCP").toUpperCase();
      const proto = protoUpper.toLowerCase();
      const base = `${prefix}_PORT_${p.port}_${protoUpper}`;
      const host = ip.includes(":") ? `[${ip}]` : ip;
      out.push([base, `${proto}://${host}:${p.port}`]);
      out.push([`${base}_PROTO`, proto]);
      out.push([`${base}_PORT`, String(p.port)]);
      out.push([`${base}_ADDR`, ip]);
    }
  }
  return out;
}

function fieldValue(pod: V1Pod, fieldPath: string): string {
  const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (m) {
    const map = m[1] === "labels" ? pod.metadata?.labels : pod.metadata?.annotations;
    return map?.[m[2]!] ?? "";
  }
  switch (fieldPath) {
    case "metadata.name":
      return pod.metadata?.name ?? "";
    case "metadata.namespace":
      return pod.metadata?.namespace ?? "";
    case "metadata.uid":
      return pod.metadata?.uid ?? "";
    case "spec.nodeName":
      return pod.spec?.nodeName ?? "";
    case "spec.serviceAccountName":
      return pod.spec?.serviceAccountName ?? "";
    case "status.hostIP":
      return pod.status?.hostIP ?? "";
    case "status.hostIPs":
      return (pod.status?.hostIPs ?? []).map((h) => h.ip).join(",");
    case "status.podIP":
      return pod.status?.podIP ?? "";
    case "status.podIPs":
      return (pod.status?.podIPs ?? []).map((p) => p.ip).join(",");
    default:
      throw new EnvResolveError(
        ErrorCode.ENV_UNSUPPORTED,
        `fieldRef ${fieldPath} is not a field the kubelet exposes`,
      );
  }
}

/** Kubernetes quantity → number of base units (cores, bytes). */
export function parseQuantity(q: string): number {
  const m = /^([+-]?[0-9.]+)([a-zA-Z]*)$/.exec(q.trim());
  if (!m) throw new EnvResolveError(ErrorCode.ENV_UNSUPPORTED, `cannot parse quantity "${q}"`);
  const n = Number(m[1]);
  const suffix = m[2]!;
  const bin: Record<string, number> = {
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    Pi: 2 ** 50,
    Ei: 2 ** 60,
  };
  const dec: Record<string, number> = {
    n: 1e-9,
    u: 1e-6,
    m: 1e-3,
    "": 1,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    P: 1e15,
    E: 1e18,
  };
  if (suffix in bin) return n * bin[suffix]!;
  if (suffix in dec) return n * dec[suffix]!;
  throw new EnvResolveError(ErrorCode.ENV_UNSUPPORTED, `unknown quantity suffix in "${q}"`);
}

function resourceValue(container: V1Container, resource: string, divisor: string | undefined): string {
  const [kind, name] = resource.split(".") as ["limits" | "requests", string];
  const raw = container.resources?.[kind]?.[name];
  if (raw === undefined) {
    // The kubelet falls back to the node's allocatable capacity, which only the node knows.
    throw new EnvResolveError(
      ErrorCode.ENV_UNSUPPORTED,
      `resourceFieldRef ${resource} has no value in the pod spec (the kubelet would use node allocatable, which is not available here)`,
    );
  }
  const value = parseQuantity(String(raw)) / parseQuantity(divisor ?? "1");
  // The kubelet rounds up to an integer.
  return String(Math.ceil(value - 1e-9));
}

const validEnvName = (k: string) => k.length > 0 && !k.includes("=");

/** Resolves the environment of one container of `pod`. */
export async function resolveContainerEnv(
  pod: V1Pod,
  sources: EnvSources,
  opts: ResolveEnvOptions = {},
): Promise<ResolvedEnv> {
  const ns = pod.metadata?.namespace ?? "default";
  // Native sidecars (init containers that keep running) are containers of the pod too.
  const sidecars = (pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === "Always");
  const containers = [...(pod.spec?.containers ?? []), ...sidecars];
  const container = opts.container ? containers.find((c) => c.name === opts.container) : containers[0];
  if (!container) {
    throw new EnvResolveError(
      ErrorCode.ENV_CONTAINER_NOT_FOUND,
      `pod ${ns}/${pod.metadata?.name} has no container "${opts.container}" (has: ${containers.map((c) => c.name).join(", ")})`,
    );
  }
  const env: ResolvedEnv = new Map();
  const { local, master } = await sources.services(ns);
  for (const [k, v] of serviceEnv(local, master, pod.spec?.enableServiceLinks !== false)) env.set(k, v);
  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? "";
    let data: Record<string, string> | undefined;
    let what: string;
    if (from.configMapRef) {
      what = `ConfigMap ${ns}/${from.configMapRef.name}`;
      data = await sources.configMap(ns, from.configMapRef.name!);
      if (!data && !from.configMapRef.optional) {
        throw new EnvResolveError(ErrorCode.ENV_SOURCE_NOT_FOUND, `envFrom: ${what} not found`);
      }
    } else if (from.secretRef) {
      what = `Secret ${ns}/${from.secretRef.name}`;
      data = await sources.secret(ns, from.secretRef.name!);
      if (!data && !from.secretRef.optional) {
        throw new EnvResolveError(ErrorCode.ENV_SOURCE_NOT_FOUND, `envFrom: ${what} not found`);
      }
    }
    for (const [k, v] of Object.entries(data ?? {})) {
      const key = prefix + k;
      if (validEnvName(key)) env.set(key, v);
    }
  }
  const lookup = (name: string) => env.get(name);
  for (const e of container.env ?? []) {
    let value: string | undefined;
    if (e.valueFrom) {
      const vf = e.valueFrom;
      const keyRef = vf.configMapKeyRef
        ? {
            kind: "ConfigMap",
            ref: vf.configMapKeyRef,
            read: (n: string, name: string) => sources.configMap(n, name),
          }
        : vf.secretKeyRef
          ? {
              kind: "Secret",
              ref: vf.secretKeyRef,
              read: (n: string, name: string) => sources.secret(n, name),
            }
          : undefined;
      if (keyRef) {
        const { kind, ref, read } = keyRef;
        const data = await read(ns, ref.name!);
        value = data?.[ref.key];
        if (value === undefined) {
          if (ref.optional) continue;
          throw new EnvResolveError(
            data ? ErrorCode.ENV_KEY_NOT_FOUND : ErrorCode.ENV_SOURCE_NOT_FOUND,
            data
              ? `env ${e.name}: key "${ref.key}" not found in ${kind} ${ns}/${ref.name}`
              : `env ${e.name}: ${kind} ${ns}/${ref.name} not found`,
          );
        }
      } else if (vf.fieldRef) {
        value = fieldValue(pod, vf.fieldRef.fieldPath);
      } else if (vf.resourceFieldRef) {
        const ref = vf.resourceFieldRef;
        const target = ref.containerName ? containers.find((c) => c.name === ref.containerName) : container;
        if (!target) {
          throw new EnvResolveError(
            ErrorCode.ENV_CONTAINER_NOT_FOUND,
            `env ${e.name}: resourceFieldRef names container "${ref.containerName}", which the pod does not have`,
          );
        }
        value = resourceValue(target, ref.resource, ref.divisor as string | undefined);
      } else {
        throw new EnvResolveError(ErrorCode.ENV_UNSUPPORTED, `env ${e.name}: unsupported valueFrom source`);
      }
    } else {
      value = expandVars(e.value ?? "", lookup);
    }
    env.set(e.name, value);
  }
  return env;
}

/** Shell-style patterns (`*`, `?`) for --env-include / --env-exclude. */
export function globToRegExp(glob: string): RegExp {
  const escaped = glob
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${escaped}$`);
}

/** Keeps variables matching any include (all when none given) and no exclude. */
export function filterEnv(env: ResolvedEnv, include: string[] = [], exclude: string[] = []): ResolvedEnv {
  const inc = include.map(globToRegExp);
  const exc = exclude.map(globToRegExp);
  const out: ResolvedEnv = new Map();
  for (const [k, v] of env) {
    if (inc.length > 0 && !inc.some((r) => r.test(k))) continue;
    if (exc.some((r) => r.test(k))) continue;
    out.set(k, v);
  }
  return out;
}
