// The Primary's MultiClusterSession reconciler (DESIGN §4). Given a parent's key it reads
// the parent, its Secret and every child from the API servers, and moves one step:
// finalizer → allow-list → heartbeat/TTL → per-child secrets → record the intended
// children in status (before creating any, so cleanup can always find them) → create,
// renew and mirror the children → phase and conditions → the routing table. Deletion
// runs the finalizer: every child listed in *status* is deleted, unreachable clusters
// are retried with backoff, and only then is the finalizer released. Nothing is kept in
// memory between calls except the heartbeat tracker, so any leader finishes the work.
import { ApiException, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { pino } from "pino";
import {
  CHILDREN_FINALIZER,
  TTL_SECONDS_DEFAULT,
  clusterSessionClient,
  multiClusterSessionClient,
  type ChildSessionStatus,
  type ClusterSession,
  type ConnectParams,
  type MultiClusterSession,
  type MultiClusterSessionStatus,
} from "../crds/index.js";
import type { RouteSnapshotCache } from "../route-discovery/index.js";
import {
  TransientReconcileError,
  type ObjectKey,
  type ReconcileResult,
  type Reconciler,
} from "../runtime/index.js";
import { childName, desiredChild, foreignOwner } from "./child-session-plan.js";
import { ChildSecretStore } from "./child-secrets.js";
import type { HeartbeatTracker } from "./heartbeat-tracker.js";
import { SessionAllowList, type SessionAllowListOptions } from "./session-allow-list.js";
import { ChildOwnershipError, ClusterUnavailableError, SessionOptionsError } from "./session-errors.js";
import { SessionMetrics } from "./session-metrics.js";
import { buildSessionRoute } from "./session-route.js";
import {
  computeStatus,
  mergeConditions,
  type ChildObservation,
  type ObservedCluster,
} from "./session-status.js";
import type { WorkloadClusters } from "./workload-clusters.js";

export interface SessionReconcilerOptions {
  /** The control plane's own KubeConfig for the Primary (parents, Secrets). */
  primaryKubeConfig: KubeConfig;
  /** Workload clusters and their clients (see workload-clusters.ts). */
  clusters: WorkloadClusters;
  /** Live clients as reported by routers. */
  heartbeat: HeartbeatTracker;
  /** Where Ready sessions' tables go; omitted = no routing (tests of the lifecycle only). */
  routes?: RouteSnapshotCache;
  /** Install-time allow-list (default: every namespace and target kind). */
  allowList?: SessionAllowListOptions;
  /** How often connectedTimestamp is refreshed while a client is live, ms (default 10 000). */
  heartbeatIntervalMs?: number;
  /**
   * How often each child's status.renewedAt is renewed, ms. Default: a third of the session's
   * TTL (the child's TTL is the parent's), at least 1 000 — three chances per TTL without a
   * write per child every few seconds.
   */
  childRenewIntervalMs?: number;
  /**
   * Reads a child from a watch cache: the object, null when the cache has synced and it is
   * absent, undefined when the cache cannot answer (not synced; the reconciler GETs instead).
   */
  cachedChild?: (cluster: string, namespace: string, name: string) => ClusterSession | null | undefined;
  /** Deadline of each request to a workload cluster, ms (default 10 000). */
  requestTimeoutMs?: number;
  /** PEM CA routers use to verify wss:// gateways (put into every upstream). */
  gatewayCaPem?: string;
  logger?: Logger;
  /** Session metrics (default: a new one on its own Registry). */
  metrics?: SessionMetrics;
  /** Milliseconds since the epoch (tests only). */
  now?: () => number;
}

function positive(v: number | undefined, name: string, dflt: number): number {
  const n = v ?? dflt;
  if (!(Number.isFinite(n) && n > 0)) throw new SessionOptionsError(name, `must be > 0 ms, got ${n}`);
  return n;
}

const describe = (err: unknown): string => {
  if (err instanceof ApiException) {
    const body = typeof err.body === "string" ? err.body : JSON.stringify(err.body ?? "");
    const m = /"message":"((?:[^"\\]|\\.)*)"/.exec(body);
    return `HTTP ${err.code}${m ? `: ${m[1]}` : ""}`;
  }
  return (err instanceof Error ? err.message : String(err)).split("\n")[0]!.slice(0, 300);
};

/** 403 / 422 / 400 from a workload cluster: retrying cannot help until someone changes something. */
const isRefusal = (err: unknown): boolean =>
  err instanceof ApiException && [400, 403, 422].includes(err.code);

export class SessionReconciler implements Reconciler {
  readonly metrics: SessionMetrics;
  private readonly parents;
  private readonly secrets: ChildSecretStore;
  private readonly allow: SessionAllowList;
  private readonly heartbeatMs: number;
  private readonly renewMs: number | undefined;
  /** Per-child secrets by parent uid: a cache of the Secret (it only ever gains keys). */
  private readonly secretCache = new Map<string, Record<string, string>>();
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly childClients = new WeakMap<KubeConfig, ReturnType<typeof clusterSessionClient>>();

  constructor(private readonly options: SessionReconcilerOptions) {
    if (!options.primaryKubeConfig) throw new SessionOptionsError("primaryKubeConfig", "is required");
    if (!options.clusters)
      throw new SessionOptionsError("clusters", "is required (registryWorkloadClusters(...))");
    if (!options.heartbeat) throw new SessionOptionsError("heartbeat", "is required (a HeartbeatTracker)");
    this.allow = new SessionAllowList(options.allowList);
    this.heartbeatMs = positive(options.heartbeatIntervalMs, "heartbeatIntervalMs", 10_000);
    this.renewMs =
      options.childRenewIntervalMs === undefined
        ? undefined
        : positive(options.childRenewIntervalMs, "childRenewIntervalMs", 0);
    this.timeoutMs = positive(options.requestTimeoutMs, "requestTimeoutMs", 10_000);
    this.parents = multiClusterSessionClient(options.primaryKubeConfig);
    this.secrets = new ChildSecretStore(options.primaryKubeConfig);
    this.log = (options.logger ?? pino({ level: "silent" })).child({ component: "session-reconciler" });
    this.now = options.now ?? Date.now;
    this.metrics = options.metrics ?? new SessionMetrics();
  }

  async reconcile(key: ObjectKey, _signal: AbortSignal): Promise<ReconcileResult> {
    const namespace = key.namespace!;
    const name = key.name;
    const parent = await this.parents.get({ namespace, name });
    if (!parent) {
      this.options.routes?.remove(name);
      return;
    }
    if (parent.metadata.deletionTimestamp) return this.finalize(parent);
    if (!(parent.metadata.finalizers ?? []).includes(CHILDREN_FINALIZER)) {
      const updated = await this.parents.patch(
        { namespace, name },
        { metadata: { finalizers: [...(parent.metadata.finalizers ?? []), CHILDREN_FINALIZER] } },
        { resourceVersion: parent.metadata.resourceVersion! },
      );
      parent.metadata = updated.metadata;
    }

    // TTL first: an expired session is deleted whatever else is wrong with it.
    const ttlMs = (parent.spec.ttlSeconds ?? TTL_SECONDS_DEFAULT) * 1000;
    const now = this.now();
    let lastBeat = Math.max(
      Date.parse(parent.status?.connectedTimestamp ?? "") || 0,
      Date.parse(String(parent.metadata.creationTimestamp ?? "")) || 0,
    );
    const live = this.options.heartbeat.isLive(name);
    let beat: string | undefined;
    if (live && now - (Date.parse(parent.status?.connectedTimestamp ?? "") || 0) >= this.heartbeatMs) {
      beat = new Date(now).toISOString();
      lastBeat = now;
    }
    if (!live && now - lastBeat > ttlMs) {
      this.log.info(
        { session: name, namespace, ttlSeconds: ttlMs / 1000 },
        "no heartbeat within the TTL; deleting the session",
      );
      await this.parents.delete({ namespace, name });
      this.metrics.counts.expirations++;
      this.options.routes?.remove(name);
      return;
    }
    const untilExpiry = Math.max(0, lastBeat + ttlMs - now) + 50;
    const renewMs = this.renewMs ?? Math.max(1_000, ttlMs / 3);
    const nextWake = Math.min(untilExpiry, live ? this.heartbeatMs : untilExpiry, renewMs);

    const verdict = this.allow.check(namespace, parent.spec.target);
    if (!verdict.allowed) {
      await this.writeStatus(parent, {
        phase: "Failed",
        ...(beat ? { connectedTimestamp: beat } : {}),
        conditions: mergeConditions(
          parent.status?.conditions,
          [
            { type: "Valid", status: "False", reason: verdict.reason, message: verdict.message },
            { type: "Ready", status: "False", reason: verdict.reason, message: verdict.message },
          ],
          new Date(now),
          parent.metadata.generation,
        ),
      });
      this.options.routes?.remove(name);
      return { requeueAfterMs: untilExpiry };
    }

    const topology = this.options.clusters.topology();
    if (!topology) throw new TransientReconcileError("the cluster configuration is not loaded yet");
    const names = topology.clusters.map((c) => c.name);
    const uid = parent.metadata.uid!;
    let secrets = this.secretCache.get(uid);
    if (!secrets || names.some((c) => !secrets![c])) {
      secrets = await this.secrets.ensure(parent, names);
      this.secretCache.set(uid, secrets);
    }

    // Record intent before acting: a child that exists is always listed in status.
    const recorded = parent.status?.children ?? {};
    if (names.some((c) => !recorded[c])) {
      const children: Record<string, ChildSessionStatus> = { ...recorded };
      for (const c of topology.clusters)
        children[c.name] ??= {
          name: childName(name, c.name),
          ready: false,
          ...(c.isDefault ? { defaultCluster: true } : {}),
        };
      await this.writeStatus(parent, {
        phase:
          parent.status?.phase === undefined || parent.status.phase === "Initializing"
            ? "Initializing"
            : parent.status.phase,
        children,
        conditions: mergeConditions(
          parent.status?.conditions,
          [
            {
              type: "Ready",
              status: "False",
              reason: "CreatingChildren",
              message: `creating child sessions on ${names.join(", ")}`,
            },
          ],
          new Date(now),
          parent.metadata.generation,
        ),
      });
    }

    const observed = await Promise.all(
      topology.clusters.map(async (c): Promise<ObservedCluster> => {
        const child = desiredChild(parent, c, topology.primaryClusterId, secrets[c.name]!);
        const observation = await this.ensureChild(
          c.name,
          child,
          name,
          topology.primaryClusterId,
          now,
          renewMs,
        );
        return { name: c.name, isDefault: c.isDefault, childName: child.metadata.name!, observation };
      }),
    );

    // Children of clusters no longer configured: delete them, and drop them from status once gone.
    const removed: Record<string, null> = {};
    for (const [cluster, entry] of Object.entries(recorded)) {
      if (names.includes(cluster)) continue;
      if (
        await this.deleteChild(cluster, namespace, entry.name, name, topology.primaryClusterId).catch(
          () => false,
        )
      )
        removed[cluster] = null;
    }

    const computed = computeStatus(observed, parent.spec.failurePolicy ?? "AllOrNothing");
    const status = {
      phase: computed.phase,
      children: { ...computed.children, ...removed } as Record<string, ChildSessionStatus>,
      ...(beat ? { connectedTimestamp: beat } : {}),
      conditions: mergeConditions(
        parent.status?.conditions,
        computed.conditions,
        new Date(now),
        parent.metadata.generation,
      ),
      observedGeneration: parent.metadata.generation ?? 0,
    };
    const written = await this.writeStatus(parent, status);
    if (beat) this.metrics.counts.heartbeatWrites++;
    if (computed.phase !== parent.status?.phase)
      this.log.info(
        { session: name, namespace, phase: computed.phase, failed: computed.failed },
        "session phase changed",
      );

    const route = buildSessionRoute(
      written,
      secrets,
      this.options.gatewayCaPem ? { gatewayCaPem: this.options.gatewayCaPem } : {},
    );
    if (route) this.options.routes?.upsert(route);
    else this.options.routes?.remove(name);

    const transient = observed.filter((o) => o.observation.state === "absent" && o.observation.error);
    if (transient.length > 0) {
      throw new TransientReconcileError(
        `session ${namespace}/${name}: ${transient.map((o) => `cluster ${o.name}: ${(o.observation as { error: string }).error}`).join("; ")}`,
      );
    }
    return { requeueAfterMs: nextWake };
  }

  /** Creates the child if missing, renews its TTL, and reports what is there. */
  private async ensureChild(
    cluster: string,
    desired: ReturnType<typeof desiredChild>,
    parentName: string,
    primaryClusterId: string,
    now: number,
    renewMs: number,
  ): Promise<ChildObservation> {
    const ref = { namespace: desired.metadata.namespace!, name: desired.metadata.name! };
    const what = `child session ${ref.name} on cluster ${cluster}`;
    try {
      const client = this.childClient(cluster);
      const cached = this.options.cachedChild?.(cluster, ref.namespace, ref.name);
      let child = cached === undefined ? await this.bounded(client.get(ref)) : (cached ?? undefined);
      if (!child) {
        try {
          child = await this.bounded(client.create(desired));
          this.metrics.childCreated(cluster);
          this.log.info({ session: parentName, cluster, child: ref.name }, "child session created");
        } catch (err) {
          if (!(err instanceof ApiException && err.code === 409)) throw err;
          child = await this.bounded(client.get(ref));
          if (!child) return { state: "absent", error: `${what} was being deleted; creating it again` };
        }
      }
      const foreign = foreignOwner(child, parentName, primaryClusterId);
      if (foreign)
        return { state: "refused", error: new ChildOwnershipError(cluster, ref.name, foreign).message };
      if (!child.metadata.deletionTimestamp && child.spec.clientKeyHash !== desired.spec.clientKeyHash) {
        // Left by an earlier parent of the same name (or its secret was lost): its hash is
        // immutable and no router holds the matching secret, so replace it. Checked again on
        // the API server: a watch cache may still show an object that was replaced meanwhile.
        const fresh = await this.bounded(client.get(ref));
        if (fresh && fresh.spec.clientKeyHash !== desired.spec.clientKeyHash) {
          if (await this.bounded(client.delete(ref))) this.metrics.childDeleted(cluster);
          return { state: "absent", error: `${what} had another session secret; replacing it` };
        }
        return { state: "absent", error: `${what} changed while being read; reading it again` };
      }
      if (child.metadata.deletionTimestamp)
        return { state: "absent", error: `${what} is being deleted; it is recreated once gone` };
      // The member counts the TTL from renewedAt or, before the first renewal, from creation.
      const renewedAt = Math.max(
        Date.parse(child.status?.renewedAt ?? "") || 0,
        Date.parse(String(child.metadata.creationTimestamp ?? "")) || 0,
      );
      if (now - renewedAt >= renewMs) {
        child = await this.bounded(client.patchStatus(ref, { renewedAt: new Date(now).toISOString() }));
      }
      if (!sameParams(child.spec.connectParams, desired.spec.connectParams)) {
        child = await this.bounded(
          client.patch(ref, { spec: { connectParams: desired.spec.connectParams ?? {} } }),
        );
      }
      return { state: "present", child };
    } catch (err) {
      if (isRefusal(err)) return { state: "refused", error: `failed to create ${what}: ${describe(err)}` };
      return { state: "absent", error: `failed to reach ${what}: ${describe(err)}` };
    }
  }

  private async finalize(parent: MultiClusterSession): Promise<ReconcileResult> {
    const namespace = parent.metadata.namespace!;
    const name = parent.metadata.name!;
    this.options.routes?.remove(name);
    if (!(parent.metadata.finalizers ?? []).includes(CHILDREN_FINALIZER)) return;
    const primaryClusterId = this.options.clusters.topology()?.primaryClusterId;
    if (!primaryClusterId) throw new TransientReconcileError("the cluster configuration is not loaded yet");
    // Cleanup reads the children from status, never from memory (DESIGN §3).
    const entries = Object.entries(parent.status?.children ?? {});
    const results = await Promise.all(
      entries.map(async ([cluster, entry]) => {
        try {
          await this.deleteChild(cluster, namespace, entry.name, name, primaryClusterId);
          return { cluster, error: undefined };
        } catch (err) {
          return {
            cluster,
            error: `deleting child session ${entry.name} on cluster ${cluster}: ${describe(err)}`,
          };
        }
      }),
    );
    const pending = results.filter((r) => r.error !== undefined);
    const children: Record<string, ChildSessionStatus | null> = {};
    for (const [cluster, entry] of entries) {
      const r = results.find((x) => x.cluster === cluster)!;
      children[cluster] = r.error ? { ...entry, ready: false, error: r.error.slice(0, 1000) } : null;
    }
    if (parent.status?.phase !== "Terminating" || entries.length > 0) {
      await this.writeStatus(parent, {
        phase: "Terminating",
        children: children as Record<string, ChildSessionStatus>,
        conditions: mergeConditions(
          parent.status?.conditions,
          [
            {
              type: "Ready",
              status: "False",
              reason: "Terminating",
              message:
                pending.length > 0
                  ? `waiting to delete children on ${pending.map((p) => p.cluster).join(", ")}`
                  : "children deleted",
            },
          ],
          new Date(this.now()),
          parent.metadata.generation,
        ),
      }).catch((err: unknown) => {
        if (!(err instanceof ApiException && err.code === 404)) throw err;
      });
    }
    if (pending.length > 0) {
      this.log.warn(
        { session: name, namespace, clusters: pending.map((p) => p.cluster) },
        "child cleanup pending; retrying",
      );
      throw new TransientReconcileError(pending.map((p) => p.error).join("; "));
    }
    await this.secrets.delete(namespace, name);
    if (parent.metadata.uid) this.secretCache.delete(parent.metadata.uid);
    const fresh = await this.parents.get({ namespace, name });
    if (!fresh) return;
    await this.parents.patch(
      { namespace, name },
      { metadata: { finalizers: (fresh.metadata.finalizers ?? []).filter((f) => f !== CHILDREN_FINALIZER) } },
      { resourceVersion: fresh.metadata.resourceVersion! },
    );
    this.log.info(
      { session: name, namespace, children: entries.length },
      "children deleted; finalizer released",
    );
  }

  /** Deletes one child if it is ours; resolves true once it is gone (or was never there). */
  private async deleteChild(
    cluster: string,
    namespace: string,
    child: string,
    parentName: string,
    primaryClusterId: string,
  ): Promise<boolean> {
    const configured = this.options.clusters.topology()?.clusters.some((c) => c.name === cluster) ?? true;
    if (!configured && !this.options.clusters.kubeConfig(cluster)) {
      // Removed from the configuration: we can never reach it again. Its member deletes the
      // child by itself once we stop renewing it (the child's own TTL), so stop waiting.
      this.log.warn(
        { session: parentName, cluster, child },
        "cluster no longer configured; leaving the child to expire by its TTL",
      );
      return true;
    }
    const client = this.childClient(cluster);
    const existing = await this.bounded(client.get({ namespace, name: child }));
    if (!existing) return true;
    if (foreignOwner(existing, parentName, primaryClusterId)) return true; // never delete another owner's object
    if (await this.bounded(client.delete({ namespace, name: child }))) this.metrics.childDeleted(cluster);
    return true;
  }

  private childClient(cluster: string) {
    const kc = this.options.clusters.kubeConfig(cluster);
    if (!kc)
      throw new ClusterUnavailableError(
        cluster,
        "no usable client (not configured, bad credentials, or not loaded)",
      );
    let c = this.childClients.get(kc);
    if (!c) {
      c = clusterSessionClient(kc);
      this.childClients.set(kc, c);
    }
    return c;
  }

  /** A workload cluster that accepts the connection but never answers must not stall the reconcile. */
  private bounded<T>(p: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
  }

  /** Merge-patches the status when it differs; returns the parent as it now is. */
  private async writeStatus(
    parent: MultiClusterSession,
    status: Partial<MultiClusterSessionStatus>,
  ): Promise<MultiClusterSession> {
    const current = parent.status ?? {};
    const changed = Object.entries(status).some(
      ([k, v]) =>
        JSON.stringify(normalize(v)) !== JSON.stringify(normalize((current as Record<string, unknown>)[k])),
    );
    if (!changed) return parent;
    const updated = await this.parents.patchStatus(
      { namespace: parent.metadata.namespace!, name: parent.metadata.name! },
      status,
      { resourceVersion: parent.metadata.resourceVersion! },
    );
    parent.metadata = updated.metadata;
    parent.status = updated.status;
    return updated;
  }
}

function sameParams(a: ConnectParams | undefined, b: ConnectParams | undefined): boolean {
  return JSON.stringify(normalize(a ?? {})) === JSON.stringify(normalize(b ?? {}));
}

/** Key-order-independent form for comparisons; null map entries (deletions) compare as absent. */
function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (v && typeof v === "object") {
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>)
        .filter(([, x]) => x !== null && x !== undefined)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, x]) => [k, normalize(x)]),
    );
  }
  return v;
}
