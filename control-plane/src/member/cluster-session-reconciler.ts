// The member's ClusterSession reconciler (DESIGN §3-§4, step 3). For one session it:
// keeps its finalizer; deletes it once its TTL lapsed without renewal (a member whose
// Primary vanished cleans up by itself); resolves the target to pods; makes sure agents
// serve them (through the AgentProvisioner) with the target's agent secret; pushes the
// session's routing table (one upstream per agent serving a ready pod, the resolved
// pod's agent is_default) to this member's routers; and writes phase, gateway, pod and
// the Ready condition. On deletion it removes the table and, when it was the last
// session on the target, releases the agents (restoring the workload) before letting
// the object go. Everything is read again on every call: nothing depends on memory.
// Before anything else it checks the operator's allow-list itself (whoever created the
// session — a Primary or a user on this cluster — is not trusted to have done so): a
// refused session gets no finalizer, agent or route, only a Failed status naming the field
// and the fix. Routes and gateway URLs are keyed by the session's namespace and name
// (sessionKey), so a same-named session of another namespace is another route.
import { create } from "@bufbuild/protobuf";
import type { Logger } from "pino";
import { OptionError, positive } from "../../../lib/option-error.js";
import {
  SessionRouteSchema,
  SessionState,
  type SessionRoute,
} from "../../../proto/gen/route_discovery_pb.js";
import { clusterSessionClient, parseTarget, type ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { sessionKey, sessionUrl } from "../../../proto/session-endpoint.js";
import { SessionAllowList, type AllowListVerdict } from "../allow-list/index.js";
import {
  OwnWrites,
  withContext,
  type ObjectKey,
  type Reconciler,
  type ReconcileResult,
  type TerminalReconcileError,
} from "../runtime/index.js";
import type { EnsureAgentsResult } from "./agent-provisioner.js";
import { agentUpstreams } from "./agent-upstreams.js";
import { queueSplitGate } from "./queue-split-gate.js";
import { ttlDeadline } from "./session-ttl.js";
import { writeSessionStatus } from "./session-status-writer.js";
import type { ClusterSessionReconcilerOptions } from "./cluster-session-options.js";
import { EnsuredTargets } from "./ensured-targets.js";
import { AgentSecretStore, type AgentSecret } from "./agent-secret-store.js";
import { IdleAgents } from "./idle-agents.js";
import { removalStatus } from "./agent-removal-status.js";
import { TargetLocks } from "./target-locks.js";
import { MEMBER_FINALIZER, releasesAgentsOnly, TargetSessions } from "./target-sessions.js";
import { resolveTarget, targetId, type ResolvedTarget } from "./target-resolver.js";

export { MEMBER_FINALIZER } from "./target-sessions.js";
export { agentUpstreams } from "./agent-upstreams.js";
export { queueSplitGate } from "./queue-split-gate.js";
export { ttlDeadline } from "./session-ttl.js";
export type { ClusterSessionReconcilerOptions } from "./cluster-session-options.js";

export class ClusterSessionReconciler implements Reconciler {
  readonly #client;
  readonly #secrets: AgentSecretStore;
  readonly #locks = new TargetLocks();
  readonly #ensured: EnsuredTargets;
  readonly #targetSessions: TargetSessions;
  /** What becomes of a target's agents once no session needs them (shared with the linger reconciler). */
  readonly idleAgents: IdleAgents;
  /** This reconciler's own writes to sessions, whose watch events need not wake it (own-writes.ts). */
  readonly ownWrites = new OwnWrites();
  readonly #allow: SessionAllowList;
  readonly #o: ClusterSessionReconcilerOptions;
  readonly #endpoint: string;
  readonly #now: () => number;
  readonly #recheckMs: number;
  readonly #logger: Logger | undefined;

  constructor(options: ClusterSessionReconcilerOptions) {
    let url: URL;
    try {
      url = new URL(options.routerEndpoint);
    } catch {
      throw new OptionError(
        "routerEndpoint",
        `must be a URL such as wss://gw.example:8443, got "${options.routerEndpoint}"`,
      );
    }
    if (!/^(wss?|https?):$/.test(url.protocol) || url.search || url.hash) {
      throw new OptionError(
        "routerEndpoint",
        `must be a ws(s):// or http(s):// URL without query, got "${options.routerEndpoint}"`,
      );
    }
    const recheck = positive("waitingRecheckMs", options.waitingRecheckMs, 5000);
    this.#allow = new SessionAllowList(options.allowList);
    this.#o = options;
    this.#endpoint = options.routerEndpoint.replace(/\/+$/, "");
    this.#client = clusterSessionClient(options.kubeConfig, {
      onWrite: (written) => this.ownWrites.record(written),
    });
    this.#secrets = new AgentSecretStore(options.kubeConfig, options.secretNamespace);
    this.#now = options.now ?? Date.now;
    this.#ensured = new EnsuredTargets(options.ensuredFreshMs, this.#now);
    this.#targetSessions = new TargetSessions(this.#client, options.cachedSessions);
    this.idleAgents = new IdleAgents({
      provisioner: options.provisioner,
      secrets: this.#secrets,
      locks: this.#locks,
      sessions: this.#targetSessions,
      forget: (id) => this.#ensured.forget(id),
      ...(options.registry ? { registry: options.registry } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    });
    this.#recheckMs = recheck;
    this.#logger = options.logger;
  }

  /** An agent of target `id` stopped on its own: the next reconcile checks its agents again. */
  forgetTarget(id: string): void {
    this.#ensured.forget(id);
  }

  /** The gateway URL of session `namespace`/`name` (the Primary's routers dial it). */
  gatewayFor(namespace: string, name: string): string {
    return sessionUrl(this.#endpoint, sessionKey(namespace, name));
  }

  async reconcile(key: ObjectKey, signal: AbortSignal): Promise<ReconcileResult> {
    const ref = { namespace: key.namespace!, name: key.name };
    const routeId = sessionKey(ref.namespace, ref.name);
    let session = await this.#client.get(ref);
    if (!session) {
      // Deleted (our finalizer already ran, or it was never ours): nothing may stay routed.
      this.#o.routes.remove(routeId);
      return;
    }
    if (session.metadata.deletionTimestamp) return this.#finalize(session, signal);
    const now = this.#now();
    const deadline = ttlDeadline(session);
    if (now >= deadline) {
      this.#logger?.info(
        { session: key.name, namespace: key.namespace, renewedAt: session.status?.renewedAt },
        "session TTL lapsed without renewal; deleting it",
      );
      await this.#client.delete(ref);
      return;
    }
    const untilExpiry = deadline - now;
    const verdict = this.#allow.check(ref.namespace, session.spec.target);
    if (!verdict.allowed) return this.#refuse(session, verdict, untilExpiry);
    if (releasesAgentsOnly(session)) return this.#removeAgents(session, untilExpiry, signal);
    const finalizers = session.metadata.finalizers ?? [];
    if (!finalizers.includes(MEMBER_FINALIZER)) {
      session = await this.#client.patch(
        ref,
        { metadata: { finalizers: [...finalizers, MEMBER_FINALIZER] } },
        { resourceVersion: session.metadata.resourceVersion },
      );
    }
    const resolution = resolveTarget(
      this.#o.targets,
      ref.namespace,
      session.spec.target,
      session.status?.pod?.name,
    );
    if (!resolution.ok) {
      this.#o.routes.remove(routeId);
      await writeSessionStatus(
        this.#client,
        this.#now,
        session,
        { phase: "Failed", pod: null, gateway: null, agents: 0 },
        {
          type: "Ready",
          status: "False",
          reason: resolution.reason,
          message: resolution.message,
        },
      );
      return { requeueAfterMs: untilExpiry };
    }
    const resolved = resolution.resolved;
    const { agents, waiting, recheckAfterMs, secret } = await this.#ensureAgents(
      ref.namespace,
      resolved,
      signal,
    );
    // Not servable yet: routers hold clients ("retry") until the table says READY.
    const creating = () =>
      this.#o.routes.upsert(
        create(SessionRouteSchema, {
          sessionId: routeId,
          clientKeyHash: session.spec.clientKeyHash,
          state: SessionState.CREATING,
          upstreams: [],
        }),
      );
    if (agents.length === 0) {
      creating();
      const why = waiting ?? { reason: "NoReadyPod", message: "no agent serves the target yet" };
      await writeSessionStatus(
        this.#client,
        this.#now,
        session,
        { phase: "Pending", pod: null, gateway: null, agents: 0 },
        {
          type: "Ready",
          status: "False",
          reason: why.reason,
          message: why.message,
        },
      );
      return { requeueAfterMs: Math.min(untilExpiry, this.#recheckMs) };
    }
    const gate = queueSplitGate(session, this.#o.queueSplitting ?? false);
    if (gate) {
      // Agents serve, but a queue split the session asked for is not in force yet: clients
      // would miss the messages it routes, so the session is not Ready until it is.
      creating();
      await writeSessionStatus(
        this.#client,
        this.#now,
        session,
        { phase: gate.phase, pod: null, gateway: null, agents: agents.length },
        { type: "Ready", status: "False", reason: gate.reason, message: gate.message },
      );
      return { requeueAfterMs: Math.min(untilExpiry, this.#recheckMs) };
    }
    const route: SessionRoute = create(SessionRouteSchema, {
      sessionId: routeId,
      clientKeyHash: session.spec.clientKeyHash,
      state: SessionState.READY,
      upstreams: agentUpstreams(agents, routeId, secret.secret, this.#o),
    });
    this.#o.routes.upsert(route);
    const pod = agents[0]!.pod;
    await writeSessionStatus(
      this.#client,
      this.#now,
      session,
      {
        phase: "Ready",
        gateway: this.gatewayFor(ref.namespace, ref.name),
        pod: {
          name: pod.metadata!.name!,
          ...(pod.status?.podIP ? { ip: pod.status.podIP } : {}),
          container: resolved.container,
        },
        agents: agents.length,
      },
      {
        type: "Ready",
        status: "True",
        reason: "AgentsServing",
        message: `${agents.length} agent(s) serve ${resolved.target.kind} ${resolved.target.name}; stateful operations go to pod ${pod.metadata!.name}`,
      },
    );
    return { requeueAfterMs: Math.min(untilExpiry, recheckAfterMs ?? untilExpiry) };
  }

  /**
   * The target's agent secret and agents, under the target's lock: made sure of (a Secret
   * read, the provisioner's checks), or a fresh earlier result for the same ready pods.
   */
  #ensureAgents(
    namespace: string,
    resolved: ResolvedTarget,
    signal: AbortSignal,
  ): Promise<EnsureAgentsResult & { secret: AgentSecret }> {
    return this.#locks.with(resolved.id, async () => {
      const known = this.#ensured.get(resolved.id, resolved.readyPods);
      if (known) return known;
      const secret = await this.#secrets
        .ensure(namespace, resolved.id)
        .catch((err: unknown) =>
          Promise.reject(withContext(`failed to read or create the agent secret of ${resolved.id}`, err)),
        );
      const out = await this.#o.provisioner
        .ensure({ resolved, secretHash: secret.hash, signal })
        .catch((err: unknown) =>
          Promise.reject(
            withContext(`failed to provision ${this.#o.provisioner.mode} agents for ${resolved.id}`, err),
          ),
        );
      if (out.agents.length > 0 && !out.waiting && out.recheckAfterMs === undefined)
        this.#ensured.set(resolved.id, resolved.readyPods, { secret, agents: out.agents });
      return { ...out, secret };
    });
  }

  /** A failure retrying cannot fix (e.g. a sidecar for a bare pod): Failed, with the reason. */
  async onTerminalError(key: ObjectKey, error: TerminalReconcileError): Promise<void> {
    const session = await this.#client.get({ namespace: key.namespace!, name: key.name });
    if (!session || session.metadata.deletionTimestamp) return;
    this.#o.routes.remove(sessionKey(key.namespace!, key.name));
    await writeSessionStatus(
      this.#client,
      this.#now,
      session,
      { phase: "Failed", pod: null, gateway: null, agents: 0 },
      {
        type: "Ready",
        status: "False",
        reason: error.reason,
        message: error.message.slice(0, 4000),
      },
    );
  }

  async #finalize(session: ClusterSession, signal: AbortSignal): Promise<void> {
    const ref = { namespace: session.metadata.namespace!, name: session.metadata.name! };
    const finalizers = session.metadata.finalizers ?? [];
    this.#o.routes.remove(sessionKey(ref.namespace, ref.name));
    if (!finalizers.includes(MEMBER_FINALIZER)) return;
    const target = parseTarget(session.spec.target);
    const id = targetId(ref.namespace, target);
    // A target outside the allow-list (narrowed since the session started) is not ours to
    // touch any more, and this cluster may no longer grant access to it: release nothing.
    const allowed = this.#allow.check(ref.namespace, session.spec.target).allowed;
    const releaseFinalizer = () =>
      this.#client.patch(
        ref,
        { metadata: { finalizers: finalizers.filter((f) => f !== MEMBER_FINALIZER) } },
        { resourceVersion: session.metadata.resourceVersion },
      );
    if (!allowed) {
      await releaseFinalizer();
      return;
    }
    // Under the target's lock, and this session's finalizer is removed before the lock is
    // released: of sessions deleted together, each sees the others still holding theirs
    // and only the last one releases the agents — once.
    await this.#locks.with(id, async () => {
      if (!(await this.#targetSessions.any(ref.namespace, target, ref.name))) {
        const outcome = await this.idleAgents
          .lastSessionEnded({ namespace: ref.namespace, id, kind: target.kind, name: target.name }, signal)
          .catch((err: unknown) =>
            Promise.reject(
              withContext(`failed to release the agents of ${id} for deleted session ${ref.name}`, err),
            ),
          );
        if (outcome.kind === "released")
          this.#logger?.info(
            { target: id, session: ref.name },
            "last session on the target ended; agents released",
          );
      }
      await releaseFinalizer();
    });
  }

  /**
   * A release-only session (`switchyard agents remove`): no finalizer, agent or route; the
   * target's idle agents go now (or when the sessions using them end), once — a session
   * that already reported leaves the target alone, whatever happened to it since.
   */
  async #removeAgents(
    session: ClusterSession,
    untilExpiry: number,
    signal: AbortSignal,
  ): Promise<ReconcileResult> {
    const namespace = session.metadata.namespace!;
    if (session.status?.phase === "Ready" || session.status?.phase === "Failed")
      return { requeueAfterMs: untilExpiry };
    const target = parseTarget(session.spec.target);
    const id = targetId(namespace, target);
    const outcome = await this.idleAgents
      .remove({ namespace, id, kind: target.kind, name: target.name }, signal)
      .catch((err: unknown) => Promise.reject(withContext(`failed to remove the agents of ${id}`, err)));
    const st = removalStatus(outcome, `${target.kind} ${target.name}`);
    await writeSessionStatus(
      this.#client,
      this.#now,
      session,
      // Ready children carry a gateway (the Primary counts on it); no route stands behind it.
      {
        phase: st.phase,
        pod: null,
        gateway: st.phase === "Ready" ? this.gatewayFor(namespace, session.metadata.name!) : null,
        agents: 0,
      },
      {
        type: "Ready",
        status: st.phase === "Ready" ? "True" : "False",
        reason: st.reason,
        message: st.message,
      },
    );
    return { requeueAfterMs: untilExpiry };
  }

  /**
   * Refused by this cluster's allow-list: Failed, with Valid and Ready False naming the field
   * and the fix (the Primary mirrors Ready's message as the child's error); not routed, no
   * finalizer, nothing provisioned; deleted by its own TTL like any session.
   */
  async #refuse(
    session: ClusterSession,
    verdict: Extract<AllowListVerdict, { allowed: false }>,
    untilExpiry: number,
  ): Promise<ReconcileResult> {
    const namespace = session.metadata.namespace!;
    const name = session.metadata.name!;
    this.#o.routes.remove(sessionKey(namespace, name));
    const known = session.status?.conditions?.some((c) => c.type === "Valid" && c.reason === verdict.reason);
    if (!known)
      this.#logger?.info(
        {
          session: name,
          namespace,
          target: session.spec.target,
          reason: verdict.reason,
          field: verdict.field,
        },
        "session refused by the allow-list",
      );
    const refused = { status: "False", reason: verdict.reason, message: verdict.message } as const;
    await writeSessionStatus(
      this.#client,
      this.#now,
      session,
      { phase: "Failed", pod: null, gateway: null, agents: 0 },
      { type: "Ready", ...refused },
      { type: "Valid", ...refused },
    );
    return { requeueAfterMs: untilExpiry };
  }
}
