// The Kubernetes reads a branch's source needs, made when a branch is made (rarely), so
// straight from the API server rather than from cluster-wide caches: the target workload
// (its pod template holds the env entry) and single keys of Secrets and ConfigMaps.
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Deployment,
  type V1Pod,
  type V1StatefulSet,
} from "@kubernetes/client-node";
import { parseTarget } from "../../../proto/api/v1alpha1/index.js";
import type { TargetSource } from "../member/target-resolver.js";
import type { KeyReader } from "./branch-source.js";

async function orUndefined<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

export class BranchKubeReads implements KeyReader {
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;

  constructor(kc: KubeConfig) {
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#apps = kc.makeApiClient(AppsV1Api);
  }

  async secretKey(namespace: string, name: string, key: string): Promise<string | undefined> {
    const s = await orUndefined(this.#core.readNamespacedSecret({ namespace, name }));
    const v = s?.data?.[key];
    return v === undefined ? undefined : Buffer.from(v, "base64").toString("utf8");
  }

  async configMapKey(namespace: string, name: string, key: string): Promise<string | undefined> {
    const m = await orUndefined(this.#core.readNamespacedConfigMap({ namespace, name }));
    return m?.data?.[key];
  }

  /** A TargetSource holding just the target `targetRef` of `namespace`, read now. */
  async target(namespace: string, targetRef: string): Promise<TargetSource> {
    const t = parseTarget(targetRef);
    let deployment: V1Deployment | undefined;
    let statefulSet: V1StatefulSet | undefined;
    let pod: V1Pod | undefined;
    if (t.kind === "deployment") {
      deployment = await orUndefined(this.#apps.readNamespacedDeployment({ namespace, name: t.name }));
    } else if (t.kind === "statefulset") {
      statefulSet = await orUndefined(this.#apps.readNamespacedStatefulSet({ namespace, name: t.name }));
    } else {
      pod = await orUndefined(this.#core.readNamespacedPod({ namespace, name: t.name }));
    }
    return {
      deployment: (ns, name) => (ns === namespace && name === t.name ? deployment : undefined),
      statefulSet: (ns, name) => (ns === namespace && name === t.name ? statefulSet : undefined),
      pod: (ns, name) => (ns === namespace && name === t.name ? pod : undefined),
      // A workload's container list comes from its template; no pod list is needed.
      pods: () => [],
    };
  }
}
