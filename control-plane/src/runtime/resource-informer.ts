// A watch-driven cache of one kind (optionally one namespace, label-selected) built on
// client-node's ListWatch, made fit for a controller: it restarts the watch with capped
// backoff after any error (the library stops on errors; a LIST right after a CRD is
// installed may answer 429 "storage is (re)initializing"), reports when its first LIST
// has landed, and re-delivers every cached object as an update every resync period so
// a missed or mishandled event is repaired by level-triggered reconcilers. It is the one
// informer of the control plane: controllers watch it, and plain watchers (the cluster
// configuration source) subscribe to it. Cached objects carry no `metadata.managedFields`
// (server-side apply bookkeeping nothing here reads; most of a small object's memory, for
// every object of every cache), as client-go's informers drop them.
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  ListWatch,
  Watch,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1ConfigMap,
  type V1Deployment,
  type V1Pod,
  type V1Secret,
  type V1StatefulSet,
} from "@kubernetes/client-node";
import type { Logger } from "pino";
import { describeApiError, firstLine } from "../../../lib/api-error.js";
import { Backoff } from "../../../lib/backoff.js";
import { atLeast, nonNegative, OptionError, positive } from "../../../lib/option-error.js";
import { GROUP, VERSION, type CrdDefinition } from "../../../proto/api/v1alpha1/index.js";

export type InformerEvent = "add" | "update" | "delete";

/**
 * Clears `metadata.managedFields` in place (set to undefined, not deleted: the object keeps its
 * shape, which keeps V8's fast properties) and returns the object.
 */
export function withoutManagedFields<T extends KubernetesObject>(obj: T): T {
  if (obj?.metadata?.managedFields !== undefined) obj.metadata.managedFields = undefined;
  return obj;
}

/** A Watch whose events carry objects without managedFields (see withoutManagedFields). */
export class LeanWatch extends Watch {
  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(
      path,
      queryParams,
      (phase, apiObj, watchObj) =>
        callback(phase, withoutManagedFields(apiObj as KubernetesObject), watchObj),
      done,
    );
  }
}
export type InformerHandler<T> = (event: InformerEvent, obj: T) => void;

export interface ResourceInformerOptions<T extends KubernetesObject> {
  kubeConfig: KubeConfig;
  /** Human name for logs, e.g. "pods in cluster east". */
  what: string;
  /** Watch path, e.g. "/api/v1/pods" or "/api/v1/namespaces/x/pods". */
  path: string;
  /** LIST with the same selectors as the watch. */
  list: (selectors: { labelSelector?: string; fieldSelector?: string }) => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  fieldSelector?: string;
  /** Re-deliver every cached object as "update" this often, ms (default 300 000; 0 disables). */
  resyncMs?: number;
  /** First restart delay after a watch/list error, ms (default 250; doubles up to maxRestartBackoffMs). */
  restartBackoffMs?: number;
  /** Upper bound of the restart delay, ms (default 10 000). */
  maxRestartBackoffMs?: number;
  logger?: Logger;
}

export class ResourceInformer<T extends KubernetesObject> {
  readonly what: string;
  readonly #lw: ListWatch<T>;
  readonly #handlers = new Set<InformerHandler<T>>();
  readonly #resyncMs: number;
  readonly #restart: { initialMs: number; maxMs: number };
  readonly #logger: Logger | undefined;
  #running: Promise<void> | undefined;
  #synced = false;
  #syncWaiters: Array<() => void> = [];

  constructor(options: ResourceInformerOptions<T>) {
    if (!options.path.startsWith("/"))
      throw new OptionError("path", `must be an API path starting with "/", got "${options.path}"`);
    const initialMs = positive("restartBackoffMs", options.restartBackoffMs, 250);
    const maxMs = atLeast(
      "maxRestartBackoffMs",
      positive("maxRestartBackoffMs", options.maxRestartBackoffMs, 10_000),
      "restartBackoffMs",
      initialMs,
    );
    this.what = options.what;
    this.#resyncMs = nonNegative("resyncMs", options.resyncMs, 300_000);
    this.#restart = { initialMs, maxMs };
    this.#logger = options.logger;
    const selectors = { labelSelector: options.labelSelector, fieldSelector: options.fieldSelector };
    this.#lw = new ListWatch<T>(
      options.path,
      new LeanWatch(options.kubeConfig),
      async () => {
        const list = await options.list(selectors);
        for (const item of list.items ?? []) withoutManagedFields(item);
        return list;
      },
      false,
      options.labelSelector,
      options.fieldSelector,
    );
    this.#lw.on("add", (o) => this.#emit("add", o));
    this.#lw.on("update", (o) => this.#emit("update", o));
    this.#lw.on("delete", (o) => this.#emit("delete", o));
  }

  /** Subscribes to changes; returns the unsubscribe function. */
  subscribe(handler: InformerHandler<T>): () => void {
    this.#handlers.add(handler);
    return () => this.#handlers.delete(handler);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#lw.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.#lw.list(namespace);
  }

  get hasSynced(): boolean {
    return this.#synced;
  }

  /** Resolves once the first LIST has filled the cache. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal?.reason ?? new Error("aborted"));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#syncWaiters.push(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  }

  /**
   * Runs the informer until `signal` aborts. Idempotent: a second call while running returns
   * the running promise (the first caller's signal governs), so several controllers can share it.
   */
  start(signal: AbortSignal): Promise<void> {
    this.#running ??= this.#run(signal).finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #run(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return;
    const backoff = new Backoff(this.#restart);
    let timer: NodeJS.Timeout | undefined;
    let failed = false;
    let resync: NodeJS.Timeout | undefined;
    const startOnce = async () => {
      failed = false;
      try {
        await this.#lw.start();
      } catch (err) {
        onError(err);
        return;
      }
      // start() resolves even when its LIST failed (reported through "error").
      if (failed || signal.aborted) return;
      backoff.reset();
      if (!this.#synced) {
        this.#synced = true;
        const waiters = this.#syncWaiters;
        this.#syncWaiters = [];
        for (const w of waiters) w();
      }
    };
    const onError = (err?: unknown) => {
      failed = true;
      if (signal.aborted || timer !== undefined) return;
      const delay = backoff.next();
      this.#logger?.warn(
        { informer: this.what, err: describeApiError(err), retryInMs: delay },
        "list/watch failed; restarting",
      );
      timer = setTimeout(() => {
        timer = undefined;
        if (!signal.aborted) void startOnce();
      }, delay);
    };
    this.#lw.on("error", onError);
    if (this.#resyncMs > 0) {
      resync = setInterval(() => {
        for (const obj of this.#lw.list()) this.#emit("update", obj);
      }, this.#resyncMs);
      resync.unref?.();
    }
    const stopped = new Promise<void>((resolve) =>
      signal.addEventListener("abort", () => resolve(), { once: true }),
    );
    await startOnce();
    await stopped;
    if (timer) clearTimeout(timer);
    if (resync) clearInterval(resync);
    this.#lw.off("error", onError);
    await this.#lw.stop();
  }

  #emit(event: InformerEvent, obj: T): void {
    for (const h of this.#handlers) {
      try {
        h(event, obj);
      } catch (err) {
        this.#logger?.error({ informer: this.what, err: firstLine(err) }, "informer handler threw");
      }
    }
  }
}

export interface KindInformerOptions extends Pick<
  ResourceInformerOptions<KubernetesObject>,
  "restartBackoffMs" | "maxRestartBackoffMs"
> {
  /** Watch one namespace only; omit for all namespaces. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  resyncMs?: number;
  logger?: Logger;
  /** Log name (default: the kind's plural). */
  what?: string;
}

export function configMapInformer(
  kc: KubeConfig,
  options: KindInformerOptions = {},
): ResourceInformer<V1ConfigMap> {
  const api = kc.makeApiClient(CoreV1Api);
  const ns = options.namespace;
  return new ResourceInformer<V1ConfigMap>({
    ...options,
    kubeConfig: kc,
    what: options.what ?? "configmaps",
    path: ns ? `/api/v1/namespaces/${ns}/configmaps` : "/api/v1/configmaps",
    list: (s) =>
      ns ? api.listNamespacedConfigMap({ namespace: ns, ...s }) : api.listConfigMapForAllNamespaces(s),
  });
}

export function secretInformer(
  kc: KubeConfig,
  options: KindInformerOptions = {},
): ResourceInformer<V1Secret> {
  const api = kc.makeApiClient(CoreV1Api);
  const ns = options.namespace;
  return new ResourceInformer<V1Secret>({
    ...options,
    kubeConfig: kc,
    what: options.what ?? "secrets",
    path: ns ? `/api/v1/namespaces/${ns}/secrets` : "/api/v1/secrets",
    list: (s) => (ns ? api.listNamespacedSecret({ namespace: ns, ...s }) : api.listSecretForAllNamespaces(s)),
  });
}

export function podInformer(kc: KubeConfig, options: KindInformerOptions = {}): ResourceInformer<V1Pod> {
  const api = kc.makeApiClient(CoreV1Api);
  const ns = options.namespace;
  return new ResourceInformer<V1Pod>({
    ...options,
    kubeConfig: kc,
    what: options.what ?? "pods",
    path: ns ? `/api/v1/namespaces/${ns}/pods` : "/api/v1/pods",
    list: (s) => (ns ? api.listNamespacedPod({ namespace: ns, ...s }) : api.listPodForAllNamespaces(s)),
  });
}

export function deploymentInformer(
  kc: KubeConfig,
  options: KindInformerOptions = {},
): ResourceInformer<V1Deployment> {
  const api = kc.makeApiClient(AppsV1Api);
  const ns = options.namespace;
  return new ResourceInformer<V1Deployment>({
    ...options,
    kubeConfig: kc,
    what: options.what ?? "deployments",
    path: ns ? `/apis/apps/v1/namespaces/${ns}/deployments` : "/apis/apps/v1/deployments",
    list: (s) =>
      ns ? api.listNamespacedDeployment({ namespace: ns, ...s }) : api.listDeploymentForAllNamespaces(s),
  });
}

export function statefulSetInformer(
  kc: KubeConfig,
  options: KindInformerOptions = {},
): ResourceInformer<V1StatefulSet> {
  const api = kc.makeApiClient(AppsV1Api);
  const ns = options.namespace;
  return new ResourceInformer<V1StatefulSet>({
    ...options,
    kubeConfig: kc,
    what: options.what ?? "statefulsets",
    path: ns ? `/apis/apps/v1/namespaces/${ns}/statefulsets` : "/apis/apps/v1/statefulsets",
    list: (s) =>
      ns ? api.listNamespacedStatefulSet({ namespace: ns, ...s }) : api.listStatefulSetForAllNamespaces(s),
  });
}

/** Informer for one Switchyard kind, e.g. `customResourceInformer<ClusterSession>(kc, clusterSessionCrd)`. */
export function customResourceInformer<T extends KubernetesObject>(
  kc: KubeConfig,
  def: Pick<CrdDefinition, "plural" | "scope">,
  options: KindInformerOptions = {},
): ResourceInformer<T> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const ns = def.scope === "Namespaced" ? options.namespace : undefined;
  const base = `/apis/${GROUP}/${VERSION}`;
  return new ResourceInformer<T>({
    ...options,
    kubeConfig: kc,
    what: options.what ?? def.plural,
    path: ns ? `${base}/namespaces/${ns}/${def.plural}` : `${base}/${def.plural}`,
    list: async (s) => {
      const q = { group: GROUP, version: VERSION, plural: def.plural, ...s };
      const out = ns
        ? await api.listNamespacedCustomObject({ ...q, namespace: ns })
        : await api.listClusterCustomObject(q);
      return out as KubernetesListObject<T>;
    },
  });
}
