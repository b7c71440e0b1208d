// The branch's credentials Secret in the Default cluster (format: proto/api/v1alpha1/branch-secret.ts).
// It is written before anything is made on a server — holding the generated database, user
// and password with an empty address — so a restart finds the same names and never makes a
// second branch; the address and URL are filled in once the branch is ready. Owned by the CR
// (garbage-collected with it), and deleted explicitly by the finalizer too.
import {
  ApiException,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Secret,
} from "@kubernetes/client-node";
import {
  API_VERSION,
  BRANCH_SECRET_LABEL,
  BRANCH_SECRET_TYPE,
  branchSecretData,
  readBranchSecretData,
  type BranchCredentials,
  type BranchDatabase,
  type BranchKind,
} from "../../../proto/api/v1alpha1/index.js";

export type SecretState =
  { state: "absent" } | { state: "foreign" } | { state: "ours"; credentials: BranchCredentials | undefined };

export class BranchSecretStore {
  readonly #core: CoreV1Api;

  constructor(kc: KubeConfig) {
    this.#core = kc.makeApiClient(CoreV1Api);
  }

  /**
   * The Secret as this branch sees it: absent; `foreign` when a Secret of that name is not
   * owned by the CR `ownerUid` (never read, changed or deleted); else its credentials
   * (undefined while a key is missing).
   */
  async read(namespace: string, name: string, ownerUid: string): Promise<SecretState> {
    let s: V1Secret;
    try {
      s = await this.#core.readNamespacedSecret({ namespace, name });
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return { state: "absent" };
      throw err;
    }
    if (!(s.metadata?.ownerReferences ?? []).some((r) => r.uid === ownerUid)) return { state: "foreign" };
    return { state: "ours", credentials: readBranchSecretData(s.data) };
  }

  /** Creates the Secret owned by `cr`; resolves false when one of that name exists already. */
  async create(
    kind: BranchKind,
    cr: BranchDatabase,
    name: string,
    credentials: BranchCredentials,
  ): Promise<boolean> {
    const body: V1Secret = {
      metadata: {
        name,
        namespace: cr.metadata.namespace!,
        labels: {
          [BRANCH_SECRET_LABEL]: `${kind.toLowerCase()}.${cr.metadata.name!}`,
          "app.kubernetes.io/managed-by": "switchyard",
        },
        ownerReferences: [
          {
            apiVersion: API_VERSION,
            kind,
            name: cr.metadata.name!,
            uid: cr.metadata.uid!,
            controller: true,
            blockOwnerDeletion: false,
          },
        ],
      },
      type: BRANCH_SECRET_TYPE,
      data: branchSecretData(credentials),
    };
    try {
      await this.#core.createNamespacedSecret({ namespace: cr.metadata.namespace!, body });
      return true;
    } catch (err) {
      if (err instanceof ApiException && err.code === 409) return false;
      throw err;
    }
  }

  /** Replaces the Secret's data. */
  async update(namespace: string, name: string, credentials: BranchCredentials): Promise<void> {
    await this.#core.patchNamespacedSecret(
      { namespace, name, body: { data: branchSecretData(credentials) } },
      mergePatch,
    );
  }

  /** Deletes the Secret if the CR `ownerUid` owns it. */
  async delete(namespace: string, name: string, ownerUid: string): Promise<void> {
    if ((await this.read(namespace, name, ownerUid)).state !== "ours") return;
    try {
      await this.#core.deleteNamespacedSecret({ namespace, name });
    } catch (err) {
      if (!(err instanceof ApiException && err.code === 404)) throw err;
    }
  }
}

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
