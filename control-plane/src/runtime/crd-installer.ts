// Applies the Switchyard CRDs (the manifests of the proto/api/v1alpha1 contract) to a
// cluster (server-side apply, so re-running it is a no-op and a newer schema replaces an
// older one) and waits until the API server reports each one Established and its kind
// actually answers, i.e. ready to use. Control-plane start-up behaviour, not part of the API.
import {
  ApiException,
  ApiextensionsV1Api,
  CustomObjectsApi,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubeConfig,
} from "@kubernetes/client-node";
import type { V1CustomResourceDefinition } from "@kubernetes/client-node";
import { sleep } from "../../../lib/abortable-sleep.js";
import { positive } from "../../../lib/option-error.js";
import {
  CRD_KINDS,
  crdDefinitions,
  crdManifests,
  GROUP,
  VERSION,
  type CrdKind,
} from "../../../proto/api/v1alpha1/index.js";
import { CrdInstallError, CrdNotEstablishedError, UnknownCrdKindError } from "./crd-install-errors.js";

export interface InstallCrdsOptions {
  /** Upper bound for each CRD to become Established, in ms (default 30 000). */
  timeoutMs?: number;
  /** Field manager recorded for server-side apply (default "switchyard-control-plane"). */
  fieldManager?: string;
}

/**
 * Applies the CRDs of the given kinds (all when omitted) and resolves once every one
 * is Established and its kind answers a LIST, so callers can use it at once. Needs
 * patch/get/watch on customresourcedefinitions and list on the kinds.
 */
export async function installCrds(
  kc: KubeConfig,
  which: readonly CrdKind[] = CRD_KINDS,
  options: InstallCrdsOptions = {},
): Promise<void> {
  const timeoutMs = positive("timeoutMs", options.timeoutMs, 30_000);
  for (const kind of which) {
    if (!(CRD_KINDS as readonly string[]).includes(kind)) throw new UnknownCrdKindError(kind, CRD_KINDS);
  }
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const fieldManager = options.fieldManager ?? "switchyard-control-plane";
  await Promise.all(
    which.map(async (kind) => {
      const manifest = crdManifests[kind];
      let applied: V1CustomResourceDefinition;
      try {
        applied = await api.patchCustomResourceDefinition(
          { name: manifest.metadata.name, body: manifest, fieldManager, force: true },
          setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply),
        );
      } catch (err) {
        throw new CrdInstallError(manifest.metadata.name, err);
      }
      const deadline = Date.now() + timeoutMs;
      await waitEstablished(kc, applied, timeoutMs);
      await waitServed(kc, kind, deadline, timeoutMs);
    }),
  );
}

function establishedState(crd: V1CustomResourceDefinition): { done: boolean; detail: string } {
  const conditions = crd.status?.conditions ?? [];
  const established = conditions.find((c) => c.type === "Established");
  const names = conditions.find((c) => c.type === "NamesAccepted");
  if (names?.status === "False") {
    return { done: false, detail: `NamesAccepted=False: ${names.reason}: ${names.message}` };
  }
  return {
    done: established?.status === "True",
    detail: established
      ? `Established=${established.status} (${established.reason})`
      : "no Established condition yet",
  };
}

// Watches the one CRD (instead of polling it) until its Established condition is True.
async function waitEstablished(
  kc: KubeConfig,
  crd: V1CustomResourceDefinition,
  timeoutMs: number,
): Promise<void> {
  const name = crd.metadata!.name!;
  let state = establishedState(crd);
  if (state.done) return;
  const watch = new Watch(kc);
  let controller: AbortController | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      timer = setTimeout(() => reject(new CrdNotEstablishedError(name, timeoutMs, state.detail)), timeoutMs);
      const start = () => {
        watch
          .watch(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            // No resourceVersion: the watch opens with the current object as ADDED.
            { fieldSelector: `metadata.name=${name}` },
            (_phase: string, obj: V1CustomResourceDefinition) => {
              state = establishedState(obj);
              if (state.done) resolve();
            },
            // The server may close a watch at any time; reopen it until resolved or timed out.
            (err: unknown) => {
              if (timer === undefined) return;
              if (err) state = { ...state, detail: `${state.detail}; watch ended: ${String(err)}` };
              setTimeout(start, 100).unref();
            },
          )
          .then((c) => (controller = c), reject);
      };
      start();
    });
  } finally {
    clearTimeout(timer);
    timer = undefined;
    controller?.abort();
  }
}

// Established can precede the kind's storage being ready: a LIST right after it may get
// 429 "storage is (re)initializing" (with Retry-After) while the watch cache fills. Honour
// Retry-After until one LIST succeeds, so "installed" means "usable". The probe asks the watch
// cache (resourceVersion "0"): a paginated LIST without one is read from etcd and succeeds
// while the cache still answers everyone else's LIST with 429.
async function waitServed(kc: KubeConfig, kind: CrdKind, deadline: number, timeoutMs: number): Promise<void> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const plural = crdDefinitions[kind].plural;
  for (;;) {
    try {
      await api.listClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural,
        resourceVersion: "0",
        limit: 1,
      });
      return;
    } catch (err) {
      const retriable =
        err instanceof ApiException && (err.code === 429 || err.code === 404 || err.code === 503);
      if (!retriable) throw new CrdInstallError(crdManifests[kind].metadata.name, err);
      const retryAfterS = Number((err as ApiException<unknown>).headers?.["retry-after"] ?? "0");
      const waitMs = Math.min(Math.max(retryAfterS * 1000, 100), 1000);
      if (Date.now() + waitMs > deadline) {
        throw new CrdNotEstablishedError(
          crdManifests[kind].metadata.name,
          timeoutMs,
          `Established, but listing ${plural} still answers HTTP ${(err as ApiException<unknown>).code}`,
        );
      }
      await sleep(waitMs);
    }
  }
}
