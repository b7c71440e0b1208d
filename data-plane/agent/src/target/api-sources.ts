// The Kubernetes objects a target's env and volumes refer to, read through the API with
// the agent's own (narrow) credentials: its pod, ConfigMaps, Secrets and Services of the
// pod's namespace. Reads are not cached here; callers decide how long an answer holds.
import { CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import type { EnvSources } from "./env-resolver.js";
import type { VolumeSources } from "./volume-files.js";

const notFound = (err: unknown) => (err as { code?: number }).code === 404;

async function orUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (notFound(err)) return undefined;
    throw err;
  }
}

const asText = (r: Record<string, Buffer> | undefined) =>
  r && Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v.toString("utf8")]));

export class ApiSources implements VolumeSources {
  private readonly core: CoreV1Api;

  constructor(kc: KubeConfig) {
    this.core = kc.makeApiClient(CoreV1Api);
  }

  pod(namespace: string, name: string): Promise<V1Pod> {
    return this.core.readNamespacedPod({ name, namespace });
  }

  async configMap(namespace: string, name: string): Promise<Record<string, Buffer> | undefined> {
    const cm = await orUndefined(this.core.readNamespacedConfigMap({ name, namespace }));
    if (!cm) return undefined;
    const out: Record<string, Buffer> = {};
    for (const [k, v] of Object.entries(cm.data ?? {})) out[k] = Buffer.from(v, "utf8");
    for (const [k, v] of Object.entries(cm.binaryData ?? {})) out[k] = Buffer.from(v, "base64");
    return out;
  }

  async secret(namespace: string, name: string): Promise<Record<string, Buffer> | undefined> {
    const s = await orUndefined(this.core.readNamespacedSecret({ name, namespace }));
    if (!s) return undefined;
    const out: Record<string, Buffer> = {};
    for (const [k, v] of Object.entries(s.data ?? {})) out[k] = Buffer.from(v, "base64");
    return out;
  }

  async services(namespace: string): ReturnType<EnvSources["services"]> {
    const local = (await this.core.listNamespacedService({ namespace })).items;
    const master = await orUndefined(
      this.core.readNamespacedService({ name: "kubernetes", namespace: "default" }),
    );
    return { local, master };
  }

  /** The same objects as text, for environment variables. */
  envSources(): EnvSources {
    return {
      configMap: async (ns, name) => asText(await this.configMap(ns, name)),
      secret: async (ns, name) => asText(await this.secret(ns, name)),
      services: (ns) => this.services(ns),
    };
  }
}
