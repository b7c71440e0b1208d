// Prometheus metrics of the cluster registry, on a per-instance Registry: remote
// cluster connectivity, health-check latency, credential renewals/failures by auth
// type, credential expiry, rejected configurations and Secrets, and leadership. Counters
// are plain numbers published at scrape; gauges read the registry's current state at
// scrape. Labels are bounded: the configured cluster names, the three auth types, two
// outcomes, two configuration sources.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { AuthType } from "../credentials/credential-source.js";

/** Where a rejected configuration came from: the clusters ConfigMap, or a credential Secret. */
export type ConfigRejectionSource = "configmap" | "secret";

/** Auth types whose credentials are renewed (mtls certificates are not). */
const RENEWED: readonly AuthType[] = ["bearerToken", "eks"];

export interface ClusterMetricState {
  cluster: string;
  authType: AuthType;
  connected: boolean;
  /** Credential expiry, ms since epoch, when known. */
  credentialExpiresAt?: number;
}

export class ClusterRegistryMetrics {
  readonly registry: Registry;
  private readonly renewals = new Map<string, number>();
  private readonly statusWrites = { success: 0, failure: 0 };
  private readonly rejections: Record<ConfigRejectionSource, number> = { configmap: 0, secret: 0 };
  private readonly checkDuration: Histogram<"cluster">;
  private state: () => { clusters: ClusterMetricState[]; leader: boolean } = () => ({
    clusters: [],
    leader: false,
  });

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    // collect() runs with `this` bound to the metric, so read our state through a closure.
    const state = () => this.state();
    const renewals = this.renewals;
    new Gauge({
      name: "switchyard_remote_cluster_connected",
      help: "1 when the last health check of the remote cluster succeeded, else 0.",
      labelNames: ["cluster", "auth_type"],
      registers: [registry],
      collect() {
        this.reset();
        for (const c of state().clusters)
          this.set({ cluster: c.cluster, auth_type: c.authType }, c.connected ? 1 : 0);
      },
    });
    new Gauge({
      name: "switchyard_remote_credential_expiry_timestamp_seconds",
      help: "When the credential in use for the remote cluster expires (unix seconds).",
      labelNames: ["cluster", "auth_type"],
      registers: [registry],
      collect() {
        this.reset();
        for (const c of state().clusters)
          if (c.credentialExpiresAt !== undefined)
            this.set({ cluster: c.cluster, auth_type: c.authType }, Math.floor(c.credentialExpiresAt / 1000));
      },
    });
    new Counter({
      name: "switchyard_remote_credential_renewals_total",
      help: "Credential renewals (bearer TokenRequest, EKS token minting) by auth type and outcome.",
      labelNames: ["auth_type", "outcome"],
      registers: [registry],
      collect() {
        this.reset();
        // Configured auth types that renew are published from 0: "no renewals yet" is a value.
        const keys = new Set(renewals.keys());
        for (const c of state().clusters)
          if (RENEWED.includes(c.authType))
            for (const o of ["success", "failure"]) keys.add(`${c.authType}/${o}`);
        for (const key of keys) {
          const [auth_type, outcome] = key.split("/") as [string, string];
          this.inc({ auth_type, outcome }, renewals.get(key) ?? 0);
        }
      },
    });
    const statusWrites = this.statusWrites;
    new Counter({
      name: "switchyard_operator_status_writes_total",
      help: "Writes of SwitchyardOperator spec/status by this replica (only the leader writes).",
      labelNames: ["outcome"],
      registers: [registry],
      collect() {
        this.reset();
        this.inc({ outcome: "success" }, statusWrites.success);
        this.inc({ outcome: "failure" }, statusWrites.failure);
      },
    });
    const rejections = this.rejections;
    new Counter({
      name: "switchyard_cluster_config_rejections_total",
      help:
        "Configurations refused, by source: a clusters ConfigMap that does not validate (the last " +
        "valid one stays in force), or a credential Secret that breaks its cluster (the others run).",
      labelNames: ["source"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [source, n] of Object.entries(rejections)) this.inc({ source }, n);
      },
    });
    new Gauge({
      name: "switchyard_control_plane_leader",
      help: "1 while this control-plane replica holds the leader lease.",
      registers: [registry],
      collect() {
        this.set(state().leader ? 1 : 0);
      },
    });
    this.checkDuration = new Histogram({
      name: "switchyard_remote_cluster_check_duration_seconds",
      help: "Round trip of a remote cluster health check (its /version call).",
      labelNames: ["cluster"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
  }

  /** Where gauges read current state at scrape. */
  setStateProvider(fn: () => { clusters: ClusterMetricState[]; leader: boolean }): void {
    this.state = fn;
  }

  recordRenewal = (authType: AuthType, outcome: "success" | "failure"): void => {
    const key = `${authType}/${outcome}`;
    this.renewals.set(key, (this.renewals.get(key) ?? 0) + 1);
  };

  /** A ConfigMap version or a Secret was refused (each distinct error once). */
  recordRejection(source: ConfigRejectionSource): void {
    this.rejections[source]++;
  }

  /** Rejections so far, by source. */
  rejectionCount(): Record<ConfigRejectionSource, number> {
    return { ...this.rejections };
  }

  recordStatusWrite(outcome: "success" | "failure"): void {
    this.statusWrites[outcome]++;
  }

  /** Status writes so far, by outcome. */
  statusWriteCount(): { success: number; failure: number } {
    return { ...this.statusWrites };
  }

  observeCheck(cluster: string, seconds: number): void {
    this.checkDuration.observe({ cluster }, seconds);
  }
}
