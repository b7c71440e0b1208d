// The credentials Secret of a branch, copied from the Default cluster to the Primary (DESIGN
// §7): same name, in the Primary CR's namespace, owned by the Primary CR (garbage-collected
// with it, and deleted by the sync's finalizer), written again whenever the Default's copy
// differs. A Secret of that name that is not ours is never overwritten; one left by an
// earlier CR of the same name is replaced. The credentials are never logged: errors name the
// Secret only.
import { isDeepStrictEqual } from "node:util";
import { ApiException, CoreV1Api, type KubeConfig, type V1Secret } from "@kubernetes/client-node";
import { API_VERSION, type BranchDatabase, type BranchKind } from "../../../../proto/api/v1alpha1/index.js";
import { ConflictReconcileError } from "../../runtime/index.js";

/** A Secret with the branch Secret's name exists on the Primary and does not belong to the branch. */
export class BranchSecretConflictError extends Error {
  readonly code = "SWITCHYARD_BRANCH_SECRET_CONFLICT";
  constructor(namespace: string, name: string, kind: BranchKind, branch: string) {
    super(
      `Secret ${namespace}/${name} on the Primary already exists and is not owned by ${kind} ${branch}; ` +
        `it is left untouched. Delete or rename it and the branch's credentials are copied there`,
    );
    this.name = "BranchSecretConflictError";
  }
}

export type MirrorOutcome = "created" | "updated" | "unchanged";

export class BranchSecretMirror {
  private readonly core: CoreV1Api;

  constructor(primaryKubeConfig: KubeConfig) {
    this.core = primaryKubeConfig.makeApiClient(CoreV1Api);
  }

  /** Makes the Primary's Secret equal `source` (type, labels, data), owned by `primary`. */
  async mirror(kind: BranchKind, primary: BranchDatabase, source: V1Secret): Promise<MirrorOutcome> {
    const namespace = primary.metadata.namespace!;
    const name = source.metadata!.name!;
    let existing = await this.read(namespace, name);
    if (existing) {
      const owner = ownership(existing, kind, primary);
      if (owner === "foreign")
        throw new BranchSecretConflictError(namespace, name, kind, primary.metadata.name!);
      if (owner === "stale" || (existing.type ?? "Opaque") !== (source.type ?? "Opaque")) {
        // An earlier CR's (or a type that cannot be changed in place): replaced.
        await this.deleteExact(existing);
        existing = undefined;
      }
    }
    const labels = source.metadata?.labels ?? {};
    const data = source.data ?? {};
    if (!existing) {
      try {
        await this.core.createNamespacedSecret({
          namespace,
          body: {
            metadata: { name, namespace, labels, ownerReferences: [ownerReference(kind, primary)] },
            type: source.type ?? "Opaque",
            data,
          },
        });
      } catch (err) {
        if (err instanceof ApiException && err.code === 409)
          throw new ConflictReconcileError(`Secret ${namespace}/${name} appeared while being created`);
        throw err;
      }
      return "created";
    }
    if (
      isDeepStrictEqual(existing.data ?? {}, data) &&
      isDeepStrictEqual(existing.metadata?.labels ?? {}, labels)
    )
      return "unchanged";
    // The resourceVersion makes a concurrent writer conflict (read again) instead of losing a write.
    await this.core.replaceNamespacedSecret({
      namespace,
      name,
      body: { ...existing, metadata: { ...existing.metadata, labels }, data },
    });
    return "updated";
  }

  /** Deletes the Primary's Secret `name` if it belongs to `primary` (gone already is fine). */
  async remove(kind: BranchKind, primary: BranchDatabase, name: string): Promise<void> {
    const existing = await this.read(primary.metadata.namespace!, name);
    if (existing && ownership(existing, kind, primary) === "ours") await this.deleteExact(existing);
  }

  private async deleteExact(secret: V1Secret): Promise<void> {
    try {
      await this.core.deleteNamespacedSecret({
        namespace: secret.metadata!.namespace!,
        name: secret.metadata!.name!,
        body: { preconditions: { uid: secret.metadata!.uid! } },
      });
    } catch (err) {
      if (!(err instanceof ApiException && (err.code === 404 || err.code === 409))) throw err;
    }
  }

  private async read(namespace: string, name: string): Promise<V1Secret | undefined> {
    try {
      return await this.core.readNamespacedSecret({ namespace, name });
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return undefined;
      throw err;
    }
  }
}

function ownerReference(kind: BranchKind, primary: BranchDatabase) {
  return {
    apiVersion: API_VERSION,
    kind,
    name: primary.metadata.name!,
    uid: primary.metadata.uid!,
    controller: true,
  };
}

/** ours: owned by this CR; stale: by an earlier CR of the same kind and name; foreign: anything else. */
function ownership(
  secret: V1Secret,
  kind: BranchKind,
  primary: BranchDatabase,
): "ours" | "stale" | "foreign" {
  const refs = (secret.metadata?.ownerReferences ?? []).filter(
    (o) => o.apiVersion === API_VERSION && o.kind === kind && o.name === primary.metadata.name,
  );
  if (refs.some((o) => o.uid === primary.metadata.uid)) return "ours";
  return refs.length > 0 ? "stale" : "foreign";
}
