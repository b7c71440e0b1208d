// The Primary's MultiClusterSession reconciler (DESIGN §4). Given a parent's key it reads
// the parent, its Secret and every child from the API servers, and moves one step:
// finalizer → session clock (heartbeat/TTL) → allow-list → per-child secrets → record
// the intended children in status (before creating any, so cleanup can always find
// them) → create, renew and mirror the children → phase and conditions → the routing
// table. Deletion runs the finalizer (session-finalizer.ts). The parts live beside it:
// the clock decides (session-clock.ts), the children are driven on the workload
// clusters (child-sessions.ts); this module only composes them. Nothing is kept in
// memory between calls except caches and the heartbeat tracker, so any leader finishes
// the work. Routes and heartbeats are keyed by the parent's namespace and name
// (sessionKey), never its name alone: a same-named parent of another namespace — even
// one the allow-list refuses — must not replace, remove or keep alive this one's route.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { pino } from "pino";
import { OptionError, positive } from "../../../lib/option-error.js";
import {
  CHILDREN_FINALIZER,
  multiClusterSessionClient,
  setConditions,
  type ChildSessionStatus,
  type ClusterSession,
  type ConditionUpdate,
  type ConnectParams,
  type MultiClusterSession,
  type QueueSplitStatus,
} from "../../../proto/api/v1alpha1/index.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import {
  SessionAllowList,
  type AllowListVerdict,
  type SessionAllowListOptions,
} from "../allow-list/index.js";
import type { RouteSnapshotCache } from "../route-discovery/index.js";
import {
  OwnWrites,
  TransientReconcileError,
  withContext,
  type ObjectKey,
  type ReconcileResult,
  type Reconciler,
} from "../runtime/index.js";
import { childName, desiredChild, outputQueuesOf } from "./child-session-plan.js";
import { ChildSecretStore } from "./child-secrets.js";
import { ChildSessions } from "./child-sessions.js";
import type { HeartbeatTracker } from "./heartbeat-tracker.js";
import { writeParentStatus, type ParentClient } from "./parent-status-writer.js";
import { sessionClock, type ActiveClock, type SessionClockIntervals } from "./session-clock.js";
import { SessionFinalizer } from "./session-finalizer.js";
import { SessionMetrics } from "./session-metrics.js";
import { buildSessionRoute } from "./session-route.js";
import { computeStatus, type ObservedCluster } from "./session-status.js";
import type { WorkloadClusters, WorkloadClusterTopology } from "./workload-clusters.js";

export interface SessionReconcilerOptions {
  /** The control plane's own KubeConfig for the Primary (parents, Secrets). */
  primaryKubeConfig: KubeConfig;
  /** Workload clusters and their clients (see workload-clusters.ts). */
  clusters: WorkloadClusters;
  /** Live clients as reported by routers. */
  heartbeat: HeartbeatTracker;
  /** Where Ready sessions' tables go; omitted = no routing (tests of the lifecycle only). */
  routes?: RouteSnapshotCache;
  /** Install-time allow-list (default: every namespace, target kind and target). */
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

export class SessionReconciler implements Reconciler {
  readonly metrics: SessionMetrics;
  /** This reconciler's own writes to parents, whose watch events need not wake it (own-writes.ts). */
  readonly ownWrites = new OwnWrites();
  private readonly parents: ParentClient;
  private readonly secrets: ChildSecretStore;
  private readonly children: ChildSessions;
  private readonly finalizer: SessionFinalizer;
  private readonly allow: SessionAllowList;
  private readonly intervals: SessionClockIntervals;
  private readonly log: Logger;
  private readonly now: () => number;

  constructor(private readonly options: SessionReconcilerOptions) {
    if (!options.primaryKubeConfig) throw new OptionError("primaryKubeConfig", "is required");
    if (!options.clusters) throw new OptionError("clusters", "is required (registryWorkloadClusters(...))");
    if (!options.heartbeat) throw new OptionError("heartbeat", "is required (a HeartbeatTracker)");
    this.allow = new SessionAllowList(options.allowList);
    this.intervals = {
      heartbeatIntervalMs: positive("heartbeatIntervalMs", options.heartbeatIntervalMs, 10_000),
      ...(options.childRenewIntervalMs === undefined
        ? {}
        : { childRenewIntervalMs: positive("childRenewIntervalMs", options.childRenewIntervalMs, 0) }),
    };
    this.parents = multiClusterSessionClient(options.primaryKubeConfig, {
      onWrite: (written) => this.ownWrites.record(written),
    });
    this.secrets = new ChildSecretStore(options.primaryKubeConfig);
    this.log = (options.logger ?? pino({ level: "silent" })).child({ component: "session-reconciler" });
    this.now = options.now ?? Date.now;
    this.metrics = options.metrics ?? new SessionMetrics();
    this.children = new ChildSessions({
      clusters: options.clusters,
      ...(options.cachedChild ? { cachedChild: options.cachedChild } : {}),
      requestTimeoutMs: positive("requestTimeoutMs", options.requestTimeoutMs, 10_000),
      metrics: this.metrics,
      log: this.log,
    });
    this.finalizer = new SessionFinalizer({
      parents: this.parents,
      children: this.children,
      secrets: this.secrets,
      clusters: options.clusters,
      routes: options.routes,
      log: this.log,
      now: this.now,
    });
  }

  async reconcile(key: ObjectKey, _signal: AbortSignal): Promise<ReconcileResult> {
    const namespace = key.namespace!;
    const name = key.name;
    const parent = await this.parents.get({ namespace, name });
    if (!parent) {
      this.options.routes?.remove(sessionKey(namespace, name));
      return;
    }
    if (parent.metadata.deletionTimestamp) return this.finalizer.finalize(parent);
    await this.ensureFinalizer(parent);

    // The clock first: an expired session is deleted whatever else is wrong with it.
    const now = this.now();
    const clock = sessionClock(
      parent,
      now,
      this.options.heartbeat.isLive({ namespace, name }),
      this.intervals,
    );
    if (clock.expired) return this.expire(parent, clock.ttlMs);
    const verdict = this.allow.check(namespace, parent.spec.target);
    if (!verdict.allowed) return this.refuse(parent, verdict, clock, now);

    const topology = this.options.clusters.topology();
    if (!topology) throw new TransientReconcileError("the cluster configuration is not loaded yet");
    const secrets = await this.secrets.forParent(
      parent,
      topology.clusters.map((c) => c.name),
    );
    const recorded = parent.status?.children ?? {};
    await this.recordIntent(parent, topology, now);

    const { observed, removed } = await this.driveChildren(parent, topology, secrets, recorded, now, clock);
    // The route goes to the routers as soon as it is known, before the status write returns:
    // a client that sees Ready finds its route there already. A failed write is corrected by
    // the next pass, which publishes again.
    await this.writeObserved(parent, observed, removed, clock, now, (projected) =>
      this.publish(projected, secrets),
    );

    const unreachable = observed.flatMap((o) =>
      (o.observation.state === "absent" || o.observation.state === "unreachable") && o.observation.error
        ? [`cluster ${o.name}: ${o.observation.error}`]
        : [],
    );
    if (unreachable.length > 0)
      throw new TransientReconcileError(`session ${namespace}/${name}: ${unreachable.join("; ")}`);
    return { requeueAfterMs: clock.requeueAfterMs };
  }

  /** Creates, renews and mirrors every configured child; deletes those of clusters no longer configured. */
  private async driveChildren(
    parent: MultiClusterSession,
    topology: WorkloadClusterTopology,
    secrets: Record<string, string>,
    recorded: Record<string, ChildSessionStatus>,
    now: number,
    clock: ActiveClock,
  ): Promise<{ observed: ObservedCluster[]; removed: Record<string, null> }> {
    const owner = { parentName: parent.metadata.name!, primaryClusterId: topology.primaryClusterId };
    const drive = async (
      c: WorkloadClusterTopology["clusters"][number],
      outputQueues?: ConnectParams["outputQueues"],
    ): Promise<ObservedCluster> => {
      const child = desiredChild(parent, c, topology.primaryClusterId, secrets[c.name]!, outputQueues);
      const seen = await this.children.ensure(c.name, child, owner, now, clock.childRenewMs);
      const last = recorded[c.name];
      const observation = seen.state === "unreachable" && last ? { ...seen, last } : seen;
      return { name: c.name, isDefault: c.isDefault, childName: child.metadata.name!, observation };
    };
    // With queue splits, the Default child goes first: its status names the output queues
    // that every other child's splitter sends to.
    const splits = (parent.spec.connectParams?.sqsSplit?.length ?? 0) > 0;
    const first = splits ? topology.clusters.find((c) => c.isDefault) : undefined;
    const firstSeen = first ? await drive(first) : undefined;
    const outputQueues =
      first && firstSeen?.observation.state === "present"
        ? outputQueuesOf(first.name, firstSeen.observation.child)
        : undefined;
    const observed = await Promise.all(
      topology.clusters.map((c) => (c === first ? firstSeen! : drive(c, outputQueues))),
    );
    // Dropped from status once gone (or unreachable for good: see ChildSessions.delete).
    const removed: Record<string, null> = {};
    for (const [cluster, entry] of Object.entries(recorded)) {
      if (topology.clusters.some((c) => c.name === cluster)) continue;
      const gone = await this.children
        .delete(cluster, parent.metadata.namespace!, entry.name, owner)
        .catch(() => false);
      if (gone) removed[cluster] = null;
    }
    return { observed, removed };
  }

  /** Ready and Pending parents are routed (session-route.ts); anything else is taken out of the routers' table. */
  private publish(parent: MultiClusterSession, secrets: Record<string, string>): void {
    const route = buildSessionRoute(
      parent,
      secrets,
      this.options.gatewayCaPem ? { gatewayCaPem: this.options.gatewayCaPem } : {},
    );
    if (route) this.options.routes?.upsert(route);
    else this.options.routes?.remove(sessionKey(parent.metadata.namespace!, parent.metadata.name!));
  }

  private async ensureFinalizer(parent: MultiClusterSession): Promise<void> {
    const finalizers = parent.metadata.finalizers ?? [];
    if (finalizers.includes(CHILDREN_FINALIZER)) return;
    const ref = { namespace: parent.metadata.namespace!, name: parent.metadata.name! };
    try {
      const updated = await this.parents.patch(
        ref,
        { metadata: { finalizers: [...finalizers, CHILDREN_FINALIZER] } },
        { resourceVersion: parent.metadata.resourceVersion! },
      );
      parent.metadata = updated.metadata;
    } catch (err) {
      throw withContext(`failed to add the finalizer to session ${ref.namespace}/${ref.name}`, err);
    }
  }

  /** No heartbeat within the TTL: the parent is deleted (its finalizer then cleans up). */
  private async expire(parent: MultiClusterSession, ttlMs: number): Promise<void> {
    const ref = { namespace: parent.metadata.namespace!, name: parent.metadata.name! };
    this.log.info(
      { session: ref.name, namespace: ref.namespace, ttlSeconds: ttlMs / 1000 },
      "no heartbeat within the TTL; deleting the session",
    );
    await this.parents.delete(ref);
    this.metrics.counts.expirations++;
    this.options.routes?.remove(sessionKey(ref.namespace, ref.name));
  }

  /** Refused by the allow-list: Failed, not routed, and left to expire by its TTL. */
  private async refuse(
    parent: MultiClusterSession,
    verdict: Extract<AllowListVerdict, { allowed: false }>,
    clock: ActiveClock,
    now: number,
  ): Promise<ReconcileResult> {
    await writeParentStatus(this.parents, parent, {
      phase: "Failed",
      ...(clock.heartbeat ? { connectedTimestamp: clock.heartbeat } : {}),
      conditions: setConditions(
        parent.status?.conditions,
        [
          { type: "Valid", status: "False", reason: verdict.reason, message: verdict.message },
          { type: "Ready", status: "False", reason: verdict.reason, message: verdict.message },
        ],
        new Date(now),
        parent.metadata.generation,
      ).conditions,
    });
    this.options.routes?.remove(sessionKey(parent.metadata.namespace!, parent.metadata.name!));
    return { requeueAfterMs: clock.untilExpiryMs };
  }

  /** Intent before action: every child about to exist is listed in status first. */
  private async recordIntent(
    parent: MultiClusterSession,
    topology: WorkloadClusterTopology,
    now: number,
  ): Promise<void> {
    const recorded = parent.status?.children ?? {};
    if (topology.clusters.every((c) => recorded[c.name])) return;
    const children: Record<string, ChildSessionStatus> = { ...recorded };
    for (const c of topology.clusters)
      children[c.name] ??= {
        name: childName(parent.metadata.name!, c.name),
        ready: false,
        ...(c.isDefault ? { defaultCluster: true } : {}),
      };
    const phase = parent.status?.phase;
    await writeParentStatus(this.parents, parent, {
      phase: phase === undefined || phase === "Initializing" ? "Initializing" : phase,
      children,
      conditions: setConditions(
        parent.status?.conditions,
        [
          {
            type: "Ready",
            status: "False",
            reason: "CreatingChildren",
            message: `creating child sessions on ${topology.clusters.map((c) => c.name).join(", ")}`,
          },
        ],
        new Date(now),
        parent.metadata.generation,
      ).conditions,
    });
  }

  /** Phase, children and conditions from what was observed, plus the heartbeat when due. */
  private async writeObserved(
    parent: MultiClusterSession,
    observed: ObservedCluster[],
    removed: Record<string, null>,
    clock: ActiveClock,
    now: number,
    /** Called with the parent as it will read once written (phase and children), before the write. */
    beforeWrite: (projected: MultiClusterSession) => void,
  ): Promise<MultiClusterSession> {
    const before = parent.status?.phase;
    const computed = computeStatus(observed, parent.spec.failurePolicy ?? "AllOrNothing", {
      routed: before === "Ready" || before === "Pending",
    });
    beforeWrite({
      ...parent,
      status: { ...parent.status, phase: computed.phase, children: computed.children },
    } as MultiClusterSession);
    const queues = defaultChildQueues(observed);
    const written = await writeParentStatus(this.parents, parent, {
      phase: computed.phase,
      children: { ...computed.children, ...removed } as Record<string, ChildSessionStatus>,
      ...(clock.heartbeat ? { connectedTimestamp: clock.heartbeat } : {}),
      ...(queues ? { queues: queues.queues } : {}),
      conditions: setConditions(
        parent.status?.conditions,
        [...computed.conditions, ...(queues?.overlap ? [queues.overlap] : [])],
        new Date(now),
        parent.metadata.generation,
      ).conditions,
      observedGeneration: parent.metadata.generation ?? 0,
    });
    if (clock.heartbeat) this.metrics.counts.heartbeatWrites++;
    if (computed.phase !== before)
      this.log.info(
        {
          session: parent.metadata.name,
          namespace: parent.metadata.namespace,
          phase: computed.phase,
          failed: computed.failed,
        },
        "session phase changed",
      );
    return written;
  }
}

/**
 * What the parent shows of its queue splits: the Default child's `status.queues` (output
 * queues and the local variable's value) and its overlap condition, told at admission.
 */
function defaultChildQueues(
  observed: readonly ObservedCluster[],
): { queues: QueueSplitStatus[]; overlap: ConditionUpdate | undefined } | undefined {
  const d = observed.find((o) => o.isDefault);
  if (d?.observation.state !== "present") return undefined;
  const child = d.observation.child;
  if (!child.spec.connectParams?.sqsSplit?.length) return undefined;
  const c = child.status?.conditions?.find((x) => x.type === "QueueSplitOverlap");
  return {
    queues: child.status?.queues ?? [],
    overlap: c ? { type: c.type, status: c.status, reason: c.reason, message: c.message } : undefined,
  };
}
