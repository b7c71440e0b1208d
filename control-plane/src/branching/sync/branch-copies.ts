// The branch copies on the Default cluster, as the sync reaches them: read, create, update
// ttlSeconds, delete exactly one object (uid precondition), and read the credentials Secret
// a copy names. Every request is bounded by a deadline (a Default that accepts connections
// but never answers must not stall the reconcile) and a failure becomes a
// `DefaultClusterError` saying whether the Default did not answer or refused. The client is
// the one the reconciler was handed for this reconcile; none is kept beyond its KubeConfig.
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1Secret,
} from "@kubernetes/client-node";
import { apiStatus, describeApiError } from "../../../../lib/api-error.js";
import { withDeadline } from "../../../../lib/deadline.js";
import {
  BRANCH_ENGINES,
  GROUP,
  VERSION,
  mysqlBranchDatabaseClient,
  pgBranchDatabaseClient,
  type BranchDatabase,
  type BranchDatabaseSpec,
  type BranchKind,
  type NewResource,
} from "../../../../proto/api/v1alpha1/index.js";
import { TransientReconcileError } from "../../runtime/index.js";
import { SYNC_REASONS } from "./branch-sync-plan.js";
import type { DefaultTarget } from "./branch-copy-informer.js";

/** A request to the Default cluster failed: it did not answer (or has no client), or it refused. */
export class DefaultClusterError extends Error {
  readonly code = "SWITCHYARD_DEFAULT_CLUSTER_FAILED";
  constructor(
    readonly reason: typeof SYNC_REASONS.unreachable | typeof SYNC_REASONS.refused,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
    this.name = "DefaultClusterError";
  }
}

/** The Default cluster with the client of this reconcile. */
export type ReachableDefault = DefaultTarget & { kubeConfig: KubeConfig };

type Ref = { namespace: string; name: string };

export function branchClient(kind: BranchKind, kc: KubeConfig) {
  return kind === "PgBranchDatabase" ? pgBranchDatabaseClient(kc) : mysqlBranchDatabaseClient(kc);
}

export class BranchCopies {
  private readonly clients = new WeakMap<
    KubeConfig,
    { copies: ReturnType<typeof branchClient>; api: CustomObjectsApi; core: CoreV1Api }
  >();

  constructor(
    private readonly kind: BranchKind,
    /** Deadline of each request, ms. */
    private readonly requestTimeoutMs: number,
  ) {}

  /** The Default with its client, or a DefaultClusterError saying it has none (so `todo` cannot be done). */
  reachable(target: DefaultTarget, todo: string): ReachableDefault {
    if (target.kubeConfig) return { ...target, kubeConfig: target.kubeConfig };
    throw new DefaultClusterError(
      SYNC_REASONS.unreachable,
      `cannot ${todo}: the Default cluster ${target.cluster} has no usable client (not connected yet, or ` +
        `its credentials are broken); check the cluster registry status (SwitchyardOperator operator)`,
    );
  }

  /** The object of that name there (ours or not), or null. */
  async get(at: ReachableDefault, ref: Ref): Promise<BranchDatabase | null> {
    const what = `read ${this.kind} ${ref.namespace}/${ref.name} on cluster ${at.cluster}`;
    return (await this.call(what, () => this.client(at).copies.get(ref))) ?? null;
  }

  /** Creates `desired`; an object already there (ours or not) is returned instead, `created` false. */
  async create(
    at: ReachableDefault,
    desired: NewResource<BranchDatabaseSpec>,
  ): Promise<{ copy: BranchDatabase; created: boolean }> {
    const ns = desired.metadata.namespace!;
    const what = `create the copy ${ns}/${desired.metadata.name} on cluster ${at.cluster}`;
    try {
      const copy = await withDeadline(this.client(at).copies.create(desired), this.requestTimeoutMs);
      return { copy, created: true };
    } catch (err) {
      if (apiStatus(err) === 409) {
        // There already: ours from an attempt that crashed before recording it, or someone else's.
        const existing = await this.get(at, { namespace: ns, name: desired.metadata.name! });
        if (existing) return { copy: existing, created: false };
        throw new TransientReconcileError(`failed to ${what}: the object there was being deleted; retrying`);
      }
      if (apiStatus(err) === 404)
        throw new DefaultClusterError(
          SYNC_REASONS.refused,
          `failed to ${what}: namespace ${ns} does not exist there; create it on ${at.cluster} ` +
            `(a branch is provisioned in the namespace of its CR)`,
          { cause: err },
        );
      throw classify(what, err);
    }
  }

  async setTtl(at: ReachableDefault, copy: BranchDatabase, ttlSeconds: number): Promise<BranchDatabase> {
    const ref = { namespace: copy.metadata.namespace!, name: copy.metadata.name! };
    const what = `update ttlSeconds of the copy ${ref.namespace}/${ref.name} on cluster ${at.cluster}`;
    return this.call(what, () => this.client(at).copies.patch(ref, { spec: { ttlSeconds } }));
  }

  async delete(at: ReachableDefault, copy: BranchDatabase): Promise<void> {
    const what = `delete the copy ${copy.metadata.namespace}/${copy.metadata.name} on cluster ${at.cluster}`;
    const plural = BRANCH_ENGINES[this.kind].plural;
    await this.call(what, () => deleteExact(this.client(at).api, plural, copy));
  }

  /** The Secret `namespace/name` there, or undefined. */
  async readSecret(at: ReachableDefault, namespace: string, name: string): Promise<V1Secret | undefined> {
    return this.call(`read Secret ${namespace}/${name} on cluster ${at.cluster}`, async () => {
      try {
        return await this.client(at).core.readNamespacedSecret({ namespace, name });
      } catch (err) {
        if (err instanceof ApiException && err.code === 404) return undefined;
        throw err;
      }
    });
  }

  private async call<T>(what: string, request: () => Promise<T>): Promise<T> {
    try {
      return await withDeadline(request(), this.requestTimeoutMs);
    } catch (err) {
      throw classify(what, err);
    }
  }

  private client(at: ReachableDefault) {
    let c = this.clients.get(at.kubeConfig);
    if (!c) {
      c = {
        copies: branchClient(this.kind, at.kubeConfig),
        api: at.kubeConfig.makeApiClient(CustomObjectsApi),
        core: at.kubeConfig.makeApiClient(CoreV1Api),
      };
      this.clients.set(at.kubeConfig, c);
    }
    return c;
  }
}

/** A 4xx other than a timeout or throttling: the Default answered and refused. Anything else: it did not answer. */
function classify(what: string, err: unknown): DefaultClusterError {
  const status = apiStatus(err);
  const refused = status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429;
  return new DefaultClusterError(
    refused ? SYNC_REASONS.refused : SYNC_REASONS.unreachable,
    `failed to ${what}: ${describeApiError(err)}${refused ? "" : "; retrying"}`,
    { cause: err },
  );
}

/** Deletes exactly `obj` (uid precondition): an object recreated under its name meanwhile is left alone. */
export async function deleteExact(api: CustomObjectsApi, plural: string, obj: BranchDatabase): Promise<void> {
  try {
    await api.deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural,
      namespace: obj.metadata.namespace!,
      name: obj.metadata.name!,
      body: { preconditions: { uid: obj.metadata.uid! } },
    });
  } catch (err) {
    // Gone already (404), or replaced by another object (409: the precondition failed).
    if (!(err instanceof ApiException && (err.code === 404 || err.code === 409))) throw err;
  }
}
