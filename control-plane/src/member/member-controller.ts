// Member mode wired together: informers on this cluster's ClusterSessions, Pods,
// Deployments and StatefulSets; a Controller that maps their events to the sessions
// they concern; the ClusterSessionReconciler; and the readiness of the routing table
// (the snapshot cache is marked ready once every session that existed at start was
// reconciled once, so routers never get a half-built table after a restart). It also
// renews single-cluster sessions (no parent) from the routers' live-session reports,
// since no Primary does that for them; a report names session keys (`<namespace>:<name>`),
// so a live client renews its own session only, never a same-named one elsewhere.
// `start` runs one leadership term and may be called again for the next: a Controller runs
// once, so each term builds its own (with its own initial-sync tracking, timer and agent
// watch) on the long-lived informers, and starts only once the previous term has drained.
// Each term also runs the linger controller (linger-reconciler.ts), which restores workloads
// whose idle agent's linger ran out, and the agent inventory (agent-inventory.ts) is read
// from the same caches for the operator status and the metrics.
import type { KubeConfig, V1Deployment, V1Pod, V1StatefulSet } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { positive } from "../../../lib/option-error.js";
import {
  clusterSessionClient,
  clusterSessionCrd,
  parseTarget,
  type ClusterSession,
} from "../../../proto/api/v1alpha1/index.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import { refusalGauge, refusalReasons, type SessionAllowListOptions } from "../allow-list/index.js";
import type { RouteSnapshotCache } from "../route-discovery/index.js";
import {
  Controller,
  ControllerMetrics,
  customResourceInformer,
  deploymentInformer,
  keyString,
  podInformer,
  statefulSetInformer,
  type ObjectKey,
  type Reconciler,
  type ResourceInformer,
} from "../runtime/index.js";
import { Gauge } from "prom-client";
import type { AgentsSummary } from "../../../proto/api/v1alpha1/index.js";
import { agentInventory } from "./agent-inventory.js";
import type { AgentProvisioner } from "./agent-provisioner.js";
import { LingerReconciler, lingerKey } from "./linger-reconciler.js";
import { ClusterSessionReconciler } from "./cluster-session-reconciler.js";
import { selectorMatches } from "./label-selector.js";
import { targetId, type TargetSource } from "./target-resolver.js";

export interface MemberControllerOptions {
  kubeConfig: KubeConfig;
  /** Base URL of this cluster's gateway routers, e.g. wss://gw.east.example:8443. */
  routerEndpoint: string;
  provisioner: AgentProvisioner;
  routes: RouteSnapshotCache;
  /** Mark `routes` ready after the initial reconcile of every session (default true; false when another owner does). */
  markRoutesReady?: boolean;
  /** Mark `routes` ready after this long even if some session keeps failing, ms (default 30 000). */
  initialSyncTimeoutMs?: number;
  /** Reconciles at once (default 4). */
  concurrency?: number;
  /** Informer resync period, ms (default 60 000 for sessions, 300 000 for pods and workloads). */
  resyncMs?: number;
  /** Renew a single-cluster session's renewedAt at most this often, ms (default 10 000). */
  renewIntervalMs?: number;
  /** CA PEM routers use to verify wss:// agents (default: none). */
  agentCaPem?: string;
  /** DNS name wss:// agents' certificates are verified against (upstream server_name; default: the pod IP). */
  agentServerName?: string;
  /** Namespace for agent Secrets (the control plane's own; default: each target's namespace). */
  secretNamespace?: string;
  /** Install-time allow-list this cluster enforces on every ClusterSession (default: everything). */
  allowList?: SessionAllowListOptions;
  /** This control plane runs the queue split controller: sessions with splits wait for it. */
  queueSplitting?: boolean;
  waitingRecheckMs?: number;
  logger?: Logger;
  metrics?: ControllerMetrics;
  now?: () => number;
}

export class MemberController {
  /** Reconcile metrics of every term (`options.metrics`, or a Registry of its own). */
  readonly metrics: ControllerMetrics;
  readonly reconciler: ClusterSessionReconciler;
  readonly sessions: ResourceInformer<ClusterSession>;
  readonly pods: ResourceInformer<V1Pod>;
  readonly deployments: ResourceInformer<V1Deployment>;
  readonly statefulSets: ResourceInformer<V1StatefulSet>;
  readonly #o: MemberControllerOptions;
  readonly #client;
  readonly #renewed = new Map<string, number>();
  /** The running term's controller; undefined between terms. */
  #controller: Controller | undefined;
  readonly #linger: LingerReconciler;

  constructor(options: MemberControllerOptions) {
    const timeout = positive("initialSyncTimeoutMs", options.initialSyncTimeoutMs, 30_000);
    const renew = positive("renewIntervalMs", options.renewIntervalMs, 10_000);
    this.#o = { ...options, initialSyncTimeoutMs: timeout, renewIntervalMs: renew };
    const kc = options.kubeConfig;
    const logger = options.logger;
    this.#client = clusterSessionClient(kc);
    this.metrics = options.metrics ?? new ControllerMetrics();
    this.sessions = customResourceInformer<ClusterSession>(kc, clusterSessionCrd, {
      resyncMs: options.resyncMs ?? 60_000,
      logger,
    });
    const sessions = this.sessions;
    refusalGauge(
      this.metrics.registry,
      "switchyard_cluster_sessions_invalid",
      "ClusterSessions on this cluster refused as invalid by its allow-list (Valid=False), by reason. " +
        "They are Failed, get no agent, and expire by their TTL.",
      () => refusalReasons(sessions.list()),
    );
    const slow = { resyncMs: options.resyncMs ?? 300_000, logger };
    this.pods = podInformer(kc, slow);
    this.deployments = deploymentInformer(kc, slow);
    this.statefulSets = statefulSetInformer(kc, slow);
    const targets: TargetSource = {
      deployment: (ns, name) => this.deployments.get(name, ns),
      statefulSet: (ns, name) => this.statefulSets.get(name, ns),
      pod: (ns, name) => this.pods.get(name, ns),
      pods: (ns) => this.pods.list(ns),
    };
    this.reconciler = new ClusterSessionReconciler({
      kubeConfig: kc,
      routerEndpoint: options.routerEndpoint,
      provisioner: options.provisioner,
      routes: options.routes,
      targets,
      ...(options.agentCaPem !== undefined ? { agentCaPem: options.agentCaPem } : {}),
      ...(options.agentServerName !== undefined ? { agentServerName: options.agentServerName } : {}),
      ...(options.secretNamespace !== undefined ? { secretNamespace: options.secretNamespace } : {}),
      ...(options.allowList !== undefined ? { allowList: options.allowList } : {}),
      ...(options.waitingRecheckMs !== undefined ? { waitingRecheckMs: options.waitingRecheckMs } : {}),
      ...(options.queueSplitting !== undefined ? { queueSplitting: options.queueSplitting } : {}),
      cachedSessions: (namespace) => this.sessions.list(namespace),
      registry: this.metrics.registry,
      ...(logger ? { logger } : {}),
      ...(options.now ? { now: options.now } : {}),
    });
    this.#linger = new LingerReconciler({
      kubeConfig: kc,
      idle: this.reconciler.idleAgents,
      ...(options.now ? { now: options.now } : {}),
    });
    const agents = () => this.agents();
    new Gauge({
      name: "switchyard_agents",
      help:
        "Workloads on this cluster carrying the sidecar agent, by state: in-use (a session uses it), " +
        "lingering (idle until its linger ends or it is removed), born (pods born with it, none in use).",
      labelNames: ["state"],
      registers: [this.metrics.registry],
      collect() {
        const items = agents()?.items ?? [];
        this.reset();
        this.set({ state: "in-use" }, items.filter((i) => i.sessions > 0).length);
        this.set({ state: "lingering" }, items.filter((i) => i.lingerUntil !== undefined).length);
        this.set({ state: "born" }, items.filter((i) => i.sessions === 0 && i.bornWithAgent).length);
      },
    });
  }

  /** The workloads carrying the agent here, from the caches; undefined until they synced. */
  agents(): AgentsSummary | undefined {
    if (!this.deployments.hasSynced || !this.statefulSets.hasSynced || !this.pods.hasSynced) return undefined;
    if (!this.sessions.hasSynced) return undefined;
    return agentInventory({
      deployments: () => this.deployments.list(),
      statefulSets: () => this.statefulSets.list(),
      pods: (ns) => this.pods.list(ns),
      sessions: (ns) => this.sessions.list(ns),
    });
  }

  /**
   * Reconciles until `signal` aborts: one leadership term, run by the runtime's
   * LeadershipTerms, which calls the next term only after this one drained — two terms never
   * reconcile at once, and the informers they share are stopped before the next starts them.
   */
  async start(signal: AbortSignal): Promise<void> {
    if (!signal.aborted) await this.#runTerm(signal);
  }

  /** Queues a session for reconcile in the running term; none between terms (the next reconciles all). */
  enqueue(key: ObjectKey): void {
    this.#controller?.enqueue(key);
  }

  async #runTerm(signal: AbortSignal): Promise<void> {
    const initial = (this.#o.markRoutesReady ?? true) ? this.#initialSync(signal) : undefined;
    const controller = new Controller({
      name: "cluster-session",
      reconciler: this.#trackInitialSync(this.reconciler, initial),
      concurrency: this.#o.concurrency ?? 4,
      ...(this.#o.logger ? { logger: this.#o.logger } : {}),
      metrics: this.metrics,
    });
    // Its own writes' events do not wake it again: the pass that wrote went on from there.
    controller.watch(this.sessions, { predicates: [this.reconciler.ownWrites.notOwn] });
    controller.watch(this.pods, { map: (pod) => this.#sessionsForPod(pod) });
    controller.watch(this.deployments, { map: (d) => this.#sessionsForWorkload("deployment", d) });
    controller.watch(this.statefulSets, { map: (s) => this.#sessionsForWorkload("statefulset", s) });
    this.#controller = controller;
    // Idle agents whose linger ends: woken by their workloads' records, requeued for the moment.
    const linger = new Controller({
      name: "agent-linger",
      reconciler: this.#linger,
      concurrency: 1,
      ...(this.#o.logger ? { logger: this.#o.logger } : {}),
      metrics: this.metrics,
    });
    linger.watch(this.deployments, { map: (d) => lingerKey("deployment", d) });
    linger.watch(this.statefulSets, { map: (s) => lingerKey("statefulset", s) });
    const lingering = linger.start(signal);
    try {
      // An agent that dies on its own is replaced now, not at the next resync.
      this.#o.provisioner.watch?.((id) => {
        this.reconciler.forgetTarget(id);
        for (const key of this.#sessionsForTarget(id)) controller.enqueue(key);
      }, signal);
      await Promise.all([controller.start(signal), lingering]);
    } finally {
      if (this.#controller === controller) this.#controller = undefined;
    }
  }

  /**
   * The sessions that exist when this term's cache fills; the routes are marked ready once
   * each was reconciled (at once when there are none), or after initialSyncTimeoutMs anyway.
   */
  #initialSync(signal: AbortSignal): Promise<Set<string>> {
    const initial = this.sessions
      .waitForSync(signal)
      .then(
        () =>
          new Set(
            this.sessions
              .list()
              .map((s) => keyString({ namespace: s.metadata!.namespace, name: s.metadata!.name! })),
          ),
      );
    initial.then(
      (set) => {
        if (set.size === 0) this.#o.routes.markReady();
      },
      () => undefined,
    );
    const timer = setTimeout(() => {
      if (!this.#o.routes.ready()) {
        this.#o.logger?.warn("some sessions did not reconcile in time; serving the routing table anyway");
        this.#o.routes.markReady();
      }
    }, this.#o.initialSyncTimeoutMs);
    timer.unref?.();
    signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
    return initial;
  }

  /**
   * Routers' live-session report (RouteDiscoveryStreamServer.onLiveSessions): renews the
   * TTL of single-cluster sessions with a live client. Children are renewed by their Primary.
   * `sessionIds` are session keys (`<namespace>:<name>`, the routes' ids).
   */
  async observeLiveSessions(sessionIds: readonly string[]): Promise<void> {
    const now = (this.#o.now ?? Date.now)();
    const live = new Set(sessionIds);
    // Forget sessions that no longer exist, so the map stays as small as the session list.
    const existing = new Set(
      this.sessions
        .list()
        .map((s) => keyString({ namespace: s.metadata!.namespace, name: s.metadata!.name! })),
    );
    for (const k of this.#renewed.keys()) if (!existing.has(k)) this.#renewed.delete(k);
    for (const s of this.sessions.list()) {
      const namespace = s.metadata?.namespace;
      const name = s.metadata?.name;
      if (!namespace || !name || s.spec.parent || s.metadata.deletionTimestamp) continue;
      if (!live.has(sessionKey(namespace, name))) continue;
      const key = keyString({ namespace, name });
      const last = Math.max(this.#renewed.get(key) ?? 0, Date.parse(s.status?.renewedAt ?? "") || 0);
      if (now - last < this.#o.renewIntervalMs!) continue;
      this.#renewed.set(key, now);
      await this.#client
        .patchStatus({ namespace, name }, { renewedAt: new Date(now).toISOString() })
        .catch((err: unknown) =>
          this.#o.logger?.warn(
            { session: name, namespace, err: (err as Error).message },
            "could not renew a single-cluster session",
          ),
        );
    }
  }

  #trackInitialSync(inner: Reconciler, initial: Promise<Set<string>> | undefined): Reconciler {
    return {
      reconcile: async (key, signal) => {
        try {
          return await inner.reconcile(key, signal);
        } finally {
          const set = initial ? await initial.catch(() => undefined) : undefined;
          if (set && set.delete(keyString(key)) && set.size === 0) this.#o.routes.markReady();
        }
      },
      ...(inner.onTerminalError ? { onTerminalError: inner.onTerminalError.bind(inner) } : {}),
    };
  }

  #sessionsForPod(pod: V1Pod): ObjectKey[] {
    const ns = pod.metadata?.namespace;
    if (!ns) return [];
    const out: ObjectKey[] = [];
    for (const s of this.sessions.list(ns)) {
      const t = safeTarget(s.spec.target);
      if (!t) continue;
      let match: boolean;
      if (t.kind === "pod") match = t.name === pod.metadata?.name;
      else {
        const w =
          t.kind === "deployment" ? this.deployments.get(t.name, ns) : this.statefulSets.get(t.name, ns);
        // Unknown workload: wake the session anyway, it will report TargetNotFound or pick the pod up.
        match = !w || selectorMatches(w.spec?.selector, pod.metadata?.labels);
      }
      if (match) out.push({ namespace: ns, name: s.metadata!.name! });
    }
    return out;
  }

  #sessionsForTarget(id: string): ObjectKey[] {
    const out: ObjectKey[] = [];
    for (const s of this.sessions.list()) {
      const ns = s.metadata?.namespace;
      const t = safeTarget(s.spec.target);
      if (ns && t && targetId(ns, t) === id) out.push({ namespace: ns, name: s.metadata!.name! });
    }
    return out;
  }

  #sessionsForWorkload(kind: "deployment" | "statefulset", w: V1Deployment | V1StatefulSet): ObjectKey[] {
    const ns = w.metadata?.namespace;
    if (!ns) return [];
    return this.sessions
      .list(ns)
      .filter((s) => {
        const t = safeTarget(s.spec.target);
        return t?.kind === kind && t.name === w.metadata?.name;
      })
      .map((s) => ({ namespace: ns, name: s.metadata!.name! }));
  }
}

function safeTarget(target: string) {
  try {
    return parseTarget(target);
  } catch {
    return undefined;
  }
}
