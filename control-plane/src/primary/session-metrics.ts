// Prometheus metrics of the Primary's session lifecycle, on a per-instance Registry:
// sessions by phase and sessions refused as invalid by reason (both read from the
// informer cache at scrape), children created and deleted per workload cluster, TTL
// expirations and heartbeat writes. Counters are plain numbers published at scrape.
// Labels are bounded: the five phases, the allow-list's refusal reasons (anything else is
// "Other") and the configured cluster names — never a session id. Reconcile duration and errors come from the
// runtime's ControllerMetrics (controller="multi-cluster-session").
import { Counter, Gauge, Registry } from "prom-client";
import { MULTI_CLUSTER_SESSION_PHASES } from "../../../proto/api/v1alpha1/index.js";
import { refusalGauge } from "../allow-list/index.js";

export class SessionMetrics {
  readonly registry: Registry;
  /** Plain counters, incremented by the reconciler. */
  readonly counts = { expirations: 0, heartbeatWrites: 0 };
  readonly childrenCreated = new Map<string, number>();
  readonly childrenDeleted = new Map<string, number>();
  private phases: () => Iterable<string | undefined> = () => [];
  private refusals: () => Iterable<string> = () => [];

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    const phases = () => this.phases();
    new Gauge({
      name: "switchyard_sessions",
      help: "MultiClusterSessions on this Primary by phase (Unknown: no phase yet).",
      labelNames: ["phase"],
      registers: [registry],
      collect() {
        this.reset();
        const n = new Map<string, number>([...MULTI_CLUSTER_SESSION_PHASES, "Unknown"].map((p) => [p, 0]));
        for (const p of phases()) n.set(p ?? "Unknown", (n.get(p ?? "Unknown") ?? 0) + 1);
        for (const [phase, v] of n) this.set({ phase }, v);
      },
    });
    refusalGauge(
      registry,
      "switchyard_sessions_invalid",
      "MultiClusterSessions on this Primary refused as invalid (Valid=False: outside the allow-list, " +
        "or a target that does not parse), by reason. They are Failed, not routed, and expire by their TTL.",
      () => this.refusals(),
    );
    const perCluster = (name: string, help: string, source: Map<string, number>) =>
      new Counter({
        name,
        help,
        labelNames: ["cluster"],
        registers: [registry],
        collect() {
          this.reset();
          for (const [cluster, v] of source) this.inc({ cluster }, v);
        },
      });
    perCluster(
      "switchyard_session_children_created_total",
      "Child ClusterSessions created, by workload cluster.",
      this.childrenCreated,
    );
    perCluster(
      "switchyard_session_children_deleted_total",
      "Child ClusterSessions deleted, by workload cluster.",
      this.childrenDeleted,
    );
    const counts = this.counts;
    new Counter({
      name: "switchyard_session_expirations_total",
      help: "Sessions deleted because no client heartbeat arrived within their TTL.",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(counts.expirations);
      },
    });
    new Counter({
      name: "switchyard_session_heartbeat_writes_total",
      help: "connectedTimestamp refreshes written for sessions with a live client.",
      registers: [registry],
      collect() {
        this.reset();
        this.inc(counts.heartbeatWrites);
      },
    });
  }

  /** Where the phase gauge reads from (the controller's informer cache). */
  setPhaseSource(source: () => Iterable<string | undefined>): void {
    this.phases = source;
  }

  /** Where the invalid-sessions gauge reads from: the reason of each parent whose Valid is False. */
  setRefusalSource(source: () => Iterable<string>): void {
    this.refusals = source;
  }

  childCreated(cluster: string): void {
    this.childrenCreated.set(cluster, (this.childrenCreated.get(cluster) ?? 0) + 1);
  }

  childDeleted(cluster: string): void {
    this.childrenDeleted.set(cluster, (this.childrenDeleted.get(cluster) ?? 0) + 1);
  }
}
