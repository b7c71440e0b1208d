// The children of a parent on the workload clusters (DESIGN §4 steps 2–3): create a
// missing child, replace one left with another secret, renew its TTL, mirror the
// parent's connect parameters into it, and delete it when the parent goes. Every call
// reads the child again (from a synced watch cache, else a GET) and is bounded by a
// request deadline, so one workload cluster that hangs never stalls the others.
//
// What goes wrong with one child is classified with the runtime's error kinds and folded
// into that child's observation instead of failing the reconcile: terminal (a refusal
// by the cluster, a child owned by someone else) counts against the failure policy;
// transient verdicts of our own (being deleted, changed while read) leave the child "not
// created"; a cluster that does not answer (timeout, connection refused, 5xx, a client that
// cannot be built) is "unreachable" — the reconciler keeps that child's last recorded state —
// and in both cases the reconcile retries with backoff; a conflict on create re-reads at once.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { apiStatus, describeApiError } from "../../../lib/api-error.js";
import {
  clusterSessionClient,
  type ClusterSession,
  type ClusterSessionSpec,
  type NewResource,
} from "../../../proto/api/v1alpha1/index.js";
import {
  ReconcileError,
  reconcileErrorKind,
  TerminalReconcileError,
  TransientReconcileError,
} from "../runtime/index.js";
import { foreignOwner } from "./child-session-plan.js";
import { equivalent } from "./parent-status-writer.js";
import { childRenewal } from "./session-clock.js";
import { ChildOwnershipError, ClusterUnavailableError } from "./session-errors.js";
import type { SessionMetrics } from "./session-metrics.js";
import type { ChildObservation } from "./session-status.js";
import type { WorkloadClusters } from "./workload-clusters.js";

export interface ChildSessionsOptions {
  clusters: WorkloadClusters;
  /** Reads a child from a watch cache: the object, null when synced and absent, undefined when it cannot answer. */
  cachedChild?: (cluster: string, namespace: string, name: string) => ClusterSession | null | undefined;
  /** Deadline of each request to a workload cluster, ms. */
  requestTimeoutMs: number;
  metrics: SessionMetrics;
  log: Logger;
}

/** Who a child belongs to: the parent's name and this Primary's cluster id. */
export interface ChildOwner {
  parentName: string;
  primaryClusterId: string;
}

/** 403 / 422 / 400 from a workload cluster: retrying cannot help until someone changes something. */
const REFUSALS = [400, 403, 422];

export class ChildSessions {
  private readonly clients = new WeakMap<KubeConfig, ReturnType<typeof clusterSessionClient>>();

  constructor(private readonly o: ChildSessionsOptions) {}

  /** Creates the child if missing, renews its TTL, mirrors its parameters, and reports what is there. */
  async ensure(
    cluster: string,
    desired: NewResource<ClusterSessionSpec>,
    owner: ChildOwner,
    now: number,
    renewMs: number,
  ): Promise<ChildObservation> {
    const what = `child session ${desired.metadata.name} on cluster ${cluster}`;
    try {
      return { state: "present", child: await this.converge(cluster, desired, owner, what, now, renewMs) };
    } catch (err) {
      const failure = classify(err, what);
      if (failure.kind === "terminal") return { state: "refused", error: failure.message };
      // Our own verdicts (being deleted, replaced, changed while read) say the child is not
      // usable now; anything else is the cluster not answering, which says nothing of the child.
      return err instanceof ReconcileError
        ? { state: "absent", error: failure.message }
        : { state: "unreachable", error: failure.message };
    }
  }

  private async converge(
    cluster: string,
    desired: NewResource<ClusterSessionSpec>,
    owner: ChildOwner,
    what: string,
    now: number,
    renewMs: number,
  ): Promise<ClusterSession> {
    const ref = { namespace: desired.metadata.namespace!, name: desired.metadata.name! };
    const client = this.client(cluster);
    const cached = this.o.cachedChild?.(cluster, ref.namespace, ref.name);
    let child = cached === undefined ? await this.bounded(client.get(ref)) : (cached ?? undefined);
    if (!child) {
      try {
        child = await this.bounded(client.create(desired));
        this.o.metrics.childCreated(cluster);
        this.o.log.info({ session: owner.parentName, cluster, child: ref.name }, "child session created");
      } catch (err) {
        if (reconcileErrorKind(err) !== "conflict") throw err;
        // Someone created it first (or it is still being deleted): read it again.
        child = await this.bounded(client.get(ref));
        if (!child) throw new TransientReconcileError(`${what} was being deleted; creating it again`);
      }
    }
    const foreign = foreignOwner(child, owner.parentName, owner.primaryClusterId);
    if (foreign) {
      const e = new ChildOwnershipError(cluster, ref.name, foreign);
      throw new TerminalReconcileError("ChildOwnedElsewhere", e.message, { cause: e });
    }
    if (!child.metadata.deletionTimestamp && child.spec.clientKeyHash !== desired.spec.clientKeyHash) {
      // Left by an earlier parent of the same name (or its secret was lost): its hash is
      // immutable and no router holds the matching secret, so replace it. Checked again on
      // the API server: a watch cache may still show an object that was replaced meanwhile.
      const fresh = await this.bounded(client.get(ref));
      if (fresh && fresh.spec.clientKeyHash !== desired.spec.clientKeyHash) {
        if (await this.bounded(client.delete(ref))) this.o.metrics.childDeleted(cluster);
        throw new TransientReconcileError(`${what} had another session secret; replacing it`);
      }
      throw new TransientReconcileError(`${what} changed while being read; reading it again`);
    }
    if (child.metadata.deletionTimestamp)
      throw new TransientReconcileError(`${what} is being deleted; it is recreated once gone`);
    const renewedAt = childRenewal(child, now, renewMs);
    if (renewedAt) child = await this.bounded(client.patchStatus(ref, { renewedAt }));
    if (!equivalent(child.spec.connectParams ?? {}, desired.spec.connectParams ?? {})) {
      child = await this.bounded(
        client.patch(ref, { spec: { connectParams: desired.spec.connectParams ?? {} } }),
      );
    }
    return child;
  }

  /** Deletes one child if it is ours; resolves true once it is gone (or was never there). */
  async delete(cluster: string, namespace: string, child: string, owner: ChildOwner): Promise<boolean> {
    const configured = this.o.clusters.topology()?.clusters.some((c) => c.name === cluster) ?? true;
    if (!configured && !this.o.clusters.kubeConfig(cluster)) {
      // Removed from the configuration: we can never reach it again. Its member deletes the
      // child by itself once we stop renewing it (the child's own TTL), so stop waiting.
      this.o.log.warn(
        { session: owner.parentName, cluster, child },
        "cluster no longer configured; leaving the child to expire by its TTL",
      );
      return true;
    }
    const client = this.client(cluster);
    const existing = await this.bounded(client.get({ namespace, name: child }));
    if (!existing) return true;
    // Never delete another owner's object.
    if (foreignOwner(existing, owner.parentName, owner.primaryClusterId)) return true;
    if (await this.bounded(client.delete({ namespace, name: child }))) this.o.metrics.childDeleted(cluster);
    return true;
  }

  private client(cluster: string) {
    const kc = this.o.clusters.kubeConfig(cluster);
    if (!kc)
      throw new ClusterUnavailableError(
        cluster,
        "no usable client (not configured, bad credentials, or not loaded)",
      );
    let c = this.clients.get(kc);
    if (!c) {
      c = clusterSessionClient(kc);
      this.clients.set(kc, c);
    }
    return c;
  }

  /** A workload cluster that accepts the connection but never answers must not stall the reconcile. */
  private bounded<T>(p: Promise<T>): Promise<T> {
    const ms = this.o.requestTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    });
    return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
  }
}

/** The kind of a failed child operation, with the message recorded in the child's status entry. */
function classify(err: unknown, what: string): ReconcileError {
  if (err instanceof ReconcileError) return err;
  const status = apiStatus(err);
  if (status !== undefined && REFUSALS.includes(status))
    return new TerminalReconcileError("ChildRefused", `failed to create ${what}: ${describeApiError(err)}`, {
      cause: err,
    });
  return new TransientReconcileError(`failed to reach ${what}: ${describeApiError(err)}`, { cause: err });
}
