// Thin typed access to one Switchyard kind through CustomObjectsApi: get, list, create,
// merge-patch (spec/metadata), merge-patch of the status subresource, delete. It adds
// types and the group/version/plural, and nothing else: no caching, no retries — those
// belong to the informers and reconcilers that use it.
import {
  ApiException,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
  type V1ObjectMeta,
} from "@kubernetes/client-node";
import type { Static, TSchema } from "@sinclair/typebox";
import { API_VERSION, GROUP, VERSION } from "./api-group.js";
import type { CrdDefinition, CustomResource } from "./crd-definition.js";

/** Names one object. `namespace` is required for namespaced kinds and ignored for cluster-scoped ones. */
export interface ObjectRef {
  name: string;
  namespace?: string;
}

export interface ListOptions {
  /** Omit to list across all namespaces (namespaced kinds). */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface ResourceList<R> {
  items: R[];
  /** The list's resourceVersion, to start a watch from. */
  resourceVersion: string;
}

/** What `create` takes: the envelope is filled in from the kind. */
export interface NewResource<Spec> {
  metadata: V1ObjectMeta & { name?: string };
  spec: Spec;
}

export interface MergePatchOptions {
  /** Refuse the patch (409) unless the object is still at this resourceVersion. */
  resourceVersion?: string;
}

export class NamespaceRequiredError extends Error {
  readonly code = "SWITCHYARD_NAMESPACE_REQUIRED";
  constructor(kind: string, name: string) {
    super(`${kind} "${name}" is namespaced: pass { namespace } in the object reference`);
    this.name = "NamespaceRequiredError";
  }
}

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export class CustomResourceClient<Spec, Status> {
  readonly #api: CustomObjectsApi;
  readonly #def: CrdDefinition;
  readonly #fieldManager: string;
  readonly #onWrite: ((written: KubernetesObject) => void) | undefined;

  constructor(
    kc: KubeConfig,
    def: CrdDefinition,
    options: { fieldManager?: string; onWrite?: (written: KubernetesObject) => void } = {},
  ) {
    if (options.fieldManager !== undefined && !/^[\x21-\x7e]{1,128}$/.test(options.fieldManager)) {
      throw new RangeError("CustomResourceClient: fieldManager must be 1-128 printable ASCII characters");
    }
    this.#api = kc.makeApiClient(CustomObjectsApi);
    this.#def = def;
    this.#fieldManager = options.fieldManager ?? "switchyard-control-plane";
    this.#onWrite = options.onWrite;
  }

  get kind(): string {
    return this.#def.kind;
  }

  /** The object, or undefined when it does not exist. */
  async get(ref: ObjectRef): Promise<CustomResource<Spec, Status> | undefined> {
    try {
      const base = { group: GROUP, version: VERSION, plural: this.#def.plural, name: ref.name };
      const obj = this.#namespaced
        ? await this.#api.getNamespacedCustomObject({ ...base, namespace: this.#ns(ref) })
        : await this.#api.getClusterCustomObject(base);
      return obj as CustomResource<Spec, Status>;
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  }

  async list(options: ListOptions = {}): Promise<ResourceList<CustomResource<Spec, Status>>> {
    const query = {
      group: GROUP,
      version: VERSION,
      plural: this.#def.plural,
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
    };
    const list = (
      this.#namespaced && options.namespace !== undefined
        ? await this.#api.listNamespacedCustomObject({ ...query, namespace: options.namespace })
        : await this.#api.listClusterCustomObject(query)
    ) as { items: CustomResource<Spec, Status>[]; metadata?: { resourceVersion?: string } };
    return { items: list.items, resourceVersion: list.metadata?.resourceVersion ?? "" };
  }

  async create(obj: NewResource<Spec>): Promise<CustomResource<Spec, Status>> {
    const body = { apiVersion: API_VERSION, kind: this.#def.kind, metadata: obj.metadata, spec: obj.spec };
    const base = {
      group: GROUP,
      version: VERSION,
      plural: this.#def.plural,
      body,
      fieldManager: this.#fieldManager,
    };
    const created = this.#namespaced
      ? await this.#api.createNamespacedCustomObject({
          ...base,
          namespace: this.#ns(obj.metadata as ObjectRef),
        })
      : await this.#api.createClusterCustomObject(base);
    return created as CustomResource<Spec, Status>;
  }

  /** JSON merge patch of the main resource (metadata and spec; status is ignored there). */
  async patch(
    ref: ObjectRef,
    patch: { metadata?: Partial<V1ObjectMeta>; spec?: Partial<Spec> },
    options: MergePatchOptions = {},
  ): Promise<CustomResource<Spec, Status>> {
    const body = withResourceVersion(patch, options.resourceVersion);
    const base = { ...this.#target(ref), body, fieldManager: this.#fieldManager };
    const out = this.#namespaced
      ? await this.#api.patchNamespacedCustomObject({ ...base, namespace: this.#ns(ref) }, mergePatch)
      : await this.#api.patchClusterCustomObject(base, mergePatch);
    if (options.resourceVersion !== undefined) this.#onWrite?.(out as KubernetesObject);
    return out as CustomResource<Spec, Status>;
  }

  /** JSON merge patch of the status subresource (lists such as conditions are replaced whole). */
  async patchStatus(
    ref: ObjectRef,
    status: Partial<Status>,
    options: MergePatchOptions = {},
  ): Promise<CustomResource<Spec, Status>> {
    const body = withResourceVersion({ status }, options.resourceVersion);
    const base = { ...this.#target(ref), body, fieldManager: this.#fieldManager };
    const out = this.#namespaced
      ? await this.#api.patchNamespacedCustomObjectStatus({ ...base, namespace: this.#ns(ref) }, mergePatch)
      : await this.#api.patchClusterCustomObjectStatus(base, mergePatch);
    if (options.resourceVersion !== undefined) this.#onWrite?.(out as KubernetesObject);
    return out as CustomResource<Spec, Status>;
  }

  /** Deletes the object; resolves false when it was already gone. */
  async delete(ref: ObjectRef): Promise<boolean> {
    try {
      if (this.#namespaced) {
        await this.#api.deleteNamespacedCustomObject({ ...this.#target(ref), namespace: this.#ns(ref) });
      } else {
        await this.#api.deleteClusterCustomObject(this.#target(ref));
      }
      return true;
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return false;
      throw err;
    }
  }

  get #namespaced(): boolean {
    return this.#def.scope === "Namespaced";
  }

  #target(ref: ObjectRef) {
    return { group: GROUP, version: VERSION, plural: this.#def.plural, name: ref.name };
  }

  #ns(ref: ObjectRef): string {
    if (!ref.namespace) throw new NamespaceRequiredError(this.#def.kind, ref.name ?? "");
    return ref.namespace;
  }
}

function withResourceVersion<T extends object>(patch: T, resourceVersion: string | undefined): object {
  if (resourceVersion === undefined) return patch;
  const p = patch as { metadata?: object };
  return { ...patch, metadata: { ...(p.metadata ?? {}), resourceVersion } };
}

/** Client type for a definition, e.g. `ClientOf<typeof clusterSessionCrd>`. */
export type ClientOf<D> =
  D extends CrdDefinition<infer S extends TSchema, infer St extends TSchema>
    ? CustomResourceClient<Static<S>, Static<St>>
    : never;
