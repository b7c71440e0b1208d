// The Primary's cluster registry: loads and watches the multi-cluster configuration,
// keeps one client with self-renewing credentials per remote cluster, checks every
// cluster's health on an interval (in parallel, each bounded by request timeouts), and,
// while this replica holds the leader Lease, publishes the result in the
// SwitchyardOperator `operator`. Reconcilers get remote clients from `client(name)`.
// A cluster whose Secret is bad is "broken" (an error entry in status); the others run.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { pino } from "pino";
import { sleep, untilAborted } from "../../../lib/abortable-sleep.js";
import { describeApiError, firstLine } from "../../../lib/api-error.js";
import { OptionError, positive } from "../../../lib/option-error.js";
import type { MultiClusterConfig, RemoteClusterConfig } from "../config/cluster-config.js";
import { ClusterConfigError, ClusterConfigErrors } from "../config/cluster-config-error.js";
import { ClusterConfigSource, type ClusterConfigSnapshot } from "../config/cluster-config-source.js";
import type { ClusterCredentialMaterial } from "../config/credential-secret.js";
import { checkClusterHealth, type ClusterHealth } from "../clusters/cluster-health-checker.js";
import { OperatorStatusPublisher } from "../clusters/operator-status-publisher.js";
import type { RemoteClusterClient } from "../clusters/remote-cluster-client.js";
import { connectRemoteCluster, type RemoteClusterConnection } from "../clusters/remote-cluster-connection.js";
import { systemClock, type Clock } from "../credentials/clock.js";
import type { AwsCredentials } from "../credentials/eks-token.js";
import { LeaseElector } from "../leader/lease-elector.js";
import { ClusterRegistryMetrics } from "../metrics/cluster-registry-metrics.js";

export interface ClusterRegistryOptions {
  /** The control plane's own KubeConfig for the Primary cluster. */
  kubeConfig: KubeConfig;
  /** The control plane's namespace (ConfigMap, Secrets, Lease). */
  namespace: string;
  /** This replica's identity for leader election (pod name). */
  identity: string;
  /** ConfigMap holding clusters-config.yaml (default `switchyard-clusters`). */
  configMapName?: string;
  /** Health-check interval in ms (default 30 000). */
  checkIntervalMs?: number;
  /** Deadline of each request to a remote cluster in ms (default 5 000). */
  requestTimeoutMs?: number;
  /** Lease name (default `switchyard-control-plane`) and timings in ms (defaults 15 000 / 10 000 / 2 000). */
  leaseName?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Drives credential renewal; tests pass a ManualClock. */
  clock?: Clock;
  awsCredentialProvider?: () => Promise<AwsCredentials>;
  bearerRenewBeforeExpiryMs?: number;
  mtlsWarnBeforeExpiryMs?: number;
  logger?: Logger;
  metrics?: ClusterRegistryMetrics;
  /**
   * Called when this replica becomes leader; `leading` aborts when it stops leading. The
   * process runs its other leader-only work (session reconcilers) on the same Lease.
   */
  onStartedLeading?: (leading: AbortSignal) => void;
}

interface Entry {
  config: RemoteClusterConfig;
  material: ClusterCredentialMaterial | ClusterConfigError;
  connection?: RemoteClusterConnection;
  /** Why the cluster has no connection (bad Secret, bad credential). */
  brokenReason?: string;
  stop?: AbortController;
}

export class ClusterRegistry {
  readonly metrics: ClusterRegistryMetrics;
  private readonly logger: Logger;
  private readonly source: ClusterConfigSource;
  private readonly elector: LeaseElector;
  private readonly publisher: OperatorStatusPublisher;
  private readonly clock: Clock;
  private readonly checkIntervalMs: number;
  private readonly entries = new Map<string, Entry>();
  private snapshot: ClusterConfigSnapshot | undefined;
  private lastHealth = new Map<string, ClusterHealth>();
  private kick: AbortController = new AbortController();
  private rounds = 0;
  private readonly roundWaiters: Array<{ after: number; resolve: (h: ClusterHealth[]) => void }> = [];
  private signal: AbortSignal | undefined;
  private readonly loaded: Promise<void>;
  private resolveLoaded!: () => void;
  private rejectLoaded!: (e: unknown) => void;

  constructor(private readonly options: ClusterRegistryOptions) {
    if (!options.kubeConfig) throw new OptionError("kubeConfig", "is required (the Primary's own)");
    if (!options.namespace) throw new OptionError("namespace", "is required (the control plane's)");
    if (!options.identity) throw new OptionError("identity", "is required (e.g. the pod name)");
    this.checkIntervalMs = positive("checkIntervalMs", options.checkIntervalMs, 30_000);
    this.clock = options.clock ?? systemClock;
    this.logger = (options.logger ?? pino({ level: "silent" })).child({ component: "cluster-registry" });
    this.metrics = options.metrics ?? new ClusterRegistryMetrics();
    this.source = new ClusterConfigSource({
      kubeConfig: options.kubeConfig,
      namespace: options.namespace,
      ...(options.configMapName ? { configMapName: options.configMapName } : {}),
      logger: this.logger,
    });
    this.elector = new LeaseElector({
      kubeConfig: options.kubeConfig,
      namespace: options.namespace,
      name: options.leaseName ?? "switchyard-control-plane",
      identity: options.identity,
      ...(options.leaseDurationMs ? { leaseDurationMs: options.leaseDurationMs } : {}),
      ...(options.renewDeadlineMs ? { renewDeadlineMs: options.renewDeadlineMs } : {}),
      ...(options.retryPeriodMs ? { retryPeriodMs: options.retryPeriodMs } : {}),
      logger: this.logger,
      onStartedLeading: (leading) => {
        this.kickNow();
        options.onStartedLeading?.(leading);
      },
    });
    this.publisher = new OperatorStatusPublisher(options.kubeConfig);
    this.metrics.setStateProvider(() => ({
      leader: this.elector.isLeader(),
      clusters: [...this.entries.values()].map((e) => {
        const expiresAt = e.connection?.credential.status().expiresAt;
        return {
          cluster: e.config.name,
          authType: e.config.authType,
          // A failed check never carries `connected`; credential trouble alone does not disconnect.
          connected: this.lastHealth.get(e.config.name)?.connected !== undefined,
          ...(expiresAt !== undefined ? { credentialExpiresAt: expiresAt } : {}),
        };
      }),
    }));
    this.loaded = new Promise((res, rej) => {
      this.resolveLoaded = res;
      this.rejectLoaded = rej;
    });
    this.loaded.catch(() => undefined);
  }

  /** Resolves once the configuration loaded; rejects with ClusterConfigErrors when it is invalid. */
  ready(): Promise<void> {
    return this.loaded;
  }

  config(): MultiClusterConfig | undefined {
    return this.snapshot?.config;
  }

  /** The client of a connected (not broken) remote cluster. */
  client(name: string): RemoteClusterClient | undefined {
    return this.entries.get(name)?.connection?.client;
  }

  /** The latest health of every configured remote cluster. */
  health(): ClusterHealth[] {
    return [...this.lastHealth.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  isLeader(): boolean {
    return this.elector.isLeader();
  }

  /** Resolves with the health of the first full check round that starts after this call. */
  nextRound(): Promise<ClusterHealth[]> {
    return new Promise((resolve) => this.roundWaiters.push({ after: this.rounds + 1, resolve }));
  }

  /** Starts a check round now instead of at the next interval. */
  kickNow(): void {
    this.kick.abort();
  }

  /**
   * Runs until `signal` aborts. Rejects at once with ClusterConfigErrors when the
   * configuration is invalid at start-up (the process should exit and show it).
   */
  async start(signal: AbortSignal): Promise<void> {
    this.signal = signal;
    let snap: ClusterConfigSnapshot;
    try {
      snap = await this.source.load();
    } catch (err) {
      if (err instanceof ClusterConfigErrors) this.metrics.recordRejection("configmap");
      this.rejectLoaded(err);
      throw err;
    }
    this.apply(snap);
    this.source.onChange((s) => {
      this.apply(s);
      this.kickNow();
    });
    this.resolveLoaded();
    this.logger.info(
      { clusters: snap.config.remotes.map((r) => `${r.name}(${r.authType})`), enabled: snap.config.enabled },
      "cluster registry started",
    );
    await Promise.all([this.source.start(signal), this.elector.start(signal), this.healthLoop(signal)]);
    for (const e of this.entries.values()) e.stop?.abort();
    await untilAborted(signal);
  }

  private apply(snap: ClusterConfigSnapshot): void {
    // Counted once per distinct error: a later Secret event re-validates the same ConfigMap.
    if (snap.reloadError && snap.reloadError.message !== this.snapshot?.reloadError?.message)
      this.metrics.recordRejection("configmap");
    this.snapshot = snap;
    const wanted = new Map(snap.config.remotes.map((r) => [r.name, r]));
    for (const [name, e] of this.entries) {
      if (!wanted.has(name)) {
        e.stop?.abort();
        this.entries.delete(name);
        this.lastHealth.delete(name);
        this.logger.info({ cluster: name }, "cluster removed from configuration");
      }
    }
    for (const [name, cfg] of wanted) {
      const material = snap.credentials.get(name)!;
      const existing = this.entries.get(name);
      if (material instanceof ClusterConfigError && !(existing && sameMaterial(existing.material, material)))
        this.metrics.recordRejection("secret");
      if (
        existing &&
        sameCluster(existing.config, cfg) &&
        existing.connection &&
        !(material instanceof ClusterConfigError)
      ) {
        if (!sameMaterial(existing.material, material)) {
          try {
            existing.connection.update(material);
            existing.material = material;
            this.logger.info({ cluster: name }, "credentials reloaded from Secret");
          } catch (err) {
            this.logger.warn(
              { cluster: name, err: firstLine(err) },
              "new credentials rejected; keeping the old ones",
            );
          }
        }
        continue;
      }
      if (existing && sameCluster(existing.config, cfg) && sameMaterial(existing.material, material))
        continue;
      existing?.stop?.abort();
      this.entries.set(name, this.connect(cfg, material));
    }
  }

  private connect(
    config: RemoteClusterConfig,
    material: ClusterCredentialMaterial | ClusterConfigError,
  ): Entry {
    if (material instanceof ClusterConfigError) {
      this.logger.error({ cluster: config.name, code: material.code }, material.message);
      return { config, material, brokenReason: material.message };
    }
    try {
      const connection = connectRemoteCluster(config, material, {
        clock: this.clock,
        logger: this.logger,
        recordRenewal: this.metrics.recordRenewal,
        requestTimeoutMs: this.options.requestTimeoutMs ?? 5_000,
        ...(this.options.awsCredentialProvider
          ? { awsCredentialProvider: this.options.awsCredentialProvider }
          : {}),
        ...(this.options.bearerRenewBeforeExpiryMs
          ? { bearerRenewBeforeExpiryMs: this.options.bearerRenewBeforeExpiryMs }
          : {}),
        ...(this.options.mtlsWarnBeforeExpiryMs !== undefined
          ? { mtlsWarnBeforeExpiryMs: this.options.mtlsWarnBeforeExpiryMs }
          : {}),
      });
      const stop = new AbortController();
      const parent = this.signal;
      const signal = parent ? AbortSignal.any([parent, stop.signal]) : stop.signal;
      void connection.credential
        .start(signal)
        .catch((err: unknown) =>
          this.logger.error({ cluster: config.name, err: firstLine(err) }, "credential renewal loop failed"),
        );
      return { config, material, connection, stop };
    } catch (err) {
      const reason = `cluster "${config.name}": credentials unusable: ${firstLine(err)}`;
      this.logger.error({ cluster: config.name }, reason);
      return { config, material, brokenReason: reason };
    }
  }

  private async healthLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.checkRound();
      if (this.elector.isLeader() && this.snapshot) {
        try {
          await this.publisher.publish(
            this.snapshot.config,
            this.health(),
            Date.now(),
            this.snapshot.reloadError?.message,
          );
          this.metrics.recordStatusWrite("success");
        } catch (err) {
          this.metrics.recordStatusWrite("failure");
          this.logger.warn(
            { err: describeApiError(err) },
            "publishing SwitchyardOperator status failed; retrying next round",
          );
        }
      }
      this.rounds++;
      const h = this.health();
      for (let i = this.roundWaiters.length - 1; i >= 0; i--) {
        if (this.roundWaiters[i]!.after <= this.rounds) this.roundWaiters.splice(i, 1)[0]!.resolve(h);
      }
      if (this.kick.signal.aborted) this.kick = new AbortController();
      await sleep(this.checkIntervalMs, AbortSignal.any([signal, this.kick.signal]));
    }
  }

  /** Checks every cluster in parallel; one slow or dead cluster delays none of the others' results. */
  private async checkRound(): Promise<void> {
    const entries = [...this.entries.values()];
    await Promise.all(
      entries.map(async (e) => {
        let h: ClusterHealth;
        if (!e.connection) {
          h = { name: e.config.name, lastCheck: this.clock.now(), error: e.brokenReason ?? "not connected" };
        } else {
          h = await checkClusterHealth(e.connection.client, systemClock);
          if (h.latencyMs !== undefined) this.metrics.observeCheck(e.config.name, h.latencyMs / 1000);
        }
        const before = this.lastHealth.get(e.config.name);
        if (this.entries.get(e.config.name) !== e) return; // replaced meanwhile
        this.lastHealth.set(e.config.name, h);
        if (!!before?.error !== !!h.error || (before === undefined && h.error))
          this.logger[h.error ? "warn" : "info"](
            { cluster: h.name, ...(h.error ? { error: h.error } : { latencyMs: h.latencyMs }) },
            h.error ? "remote cluster unhealthy" : "remote cluster connected",
          );
      }),
    );
  }
}

function sameCluster(a: RemoteClusterConfig, b: RemoteClusterConfig): boolean {
  return (
    a.authType === b.authType &&
    a.eksClusterName === b.eksClusterName && // the name EKS tokens sign
    a.server === b.server &&
    a.caPem === b.caPem &&
    a.region === b.region &&
    a.namespace === b.namespace &&
    a.isDefault === b.isDefault
  );
}

function sameMaterial(
  a: ClusterCredentialMaterial | ClusterConfigError,
  b: ClusterCredentialMaterial | ClusterConfigError,
): boolean {
  if (a instanceof ClusterConfigError || b instanceof ClusterConfigError)
    return a instanceof ClusterConfigError && b instanceof ClusterConfigError && a.message === b.message;
  return JSON.stringify(a) === JSON.stringify(b);
}
