// Reads the multi-cluster configuration from the Primary's API server and keeps it
// current: the ConfigMap (key clusters-config.yaml) and the labelled credential Secrets
// in the control plane's namespace, watched with informers so edits apply without a
// restart. At start-up an invalid ConfigMap is fatal (the process must not run with a
// configuration the operator did not intend); on a live reload an invalid ConfigMap is
// reported and the last valid one stays in force. Secret problems never fail the whole
// configuration: they fail only their cluster. Bearer-token material comes with the way
// to save a renewed token back into its Secret (renewed-token-writer.ts).
import { CoreV1Api, type KubeConfig, type V1ConfigMap, type V1Secret } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { pino } from "pino";
import { OptionError } from "../../../lib/option-error.js";
import { configMapInformer, secretInformer } from "../runtime/index.js";
import { CLUSTERS_CONFIG_KEY, parseClusterConfig, type MultiClusterConfig } from "./cluster-config.js";
import {
  ClusterConfigError,
  ClusterConfigErrors,
  ClusterConfigNotLoadedError,
} from "./cluster-config-error.js";
import {
  CREDENTIALS_LABEL,
  credentialSecretName,
  parseCredentialSecret,
  type ClusterCredentialMaterial,
} from "./credential-secret.js";
import { RenewedTokenWriter } from "./renewed-token-writer.js";

export interface ClusterConfigSnapshot {
  /** The configuration in force (the last valid one). */
  readonly config: MultiClusterConfig;
  /** Per remote cluster: its credential material, or why its Secret is unusable. */
  readonly credentials: ReadonlyMap<string, ClusterCredentialMaterial | ClusterConfigError>;
  /** Set when the newest ConfigMap was rejected and `config` is the previous valid one. */
  readonly reloadError: ClusterConfigErrors | undefined;
}

export interface ClusterConfigSourceOptions {
  /** Admin-side KubeConfig of the Primary cluster (the control plane's own identity). */
  kubeConfig: KubeConfig;
  /** Namespace of the control plane, where the ConfigMap and Secrets live. */
  namespace: string;
  /** Name of the ConfigMap (default `switchyard-clusters`). */
  configMapName?: string;
  logger?: Logger;
}

export const DEFAULT_CONFIG_MAP_NAME = "switchyard-clusters";

export class ClusterConfigSource {
  private readonly core: CoreV1Api;
  private readonly renewedTokens: RenewedTokenWriter;
  private readonly configMapName: string;
  private readonly logger: Logger;
  private configMap: V1ConfigMap | undefined;
  private readonly secrets = new Map<string, V1Secret>();
  private current: ClusterConfigSnapshot | undefined;
  private readonly listeners = new Set<(s: ClusterConfigSnapshot) => void>();

  constructor(private readonly options: ClusterConfigSourceOptions) {
    if (!options.kubeConfig) throw new OptionError("kubeConfig", "is required");
    if (!options.namespace) throw new OptionError("namespace", "is required (the control plane's namespace)");
    this.configMapName = options.configMapName ?? DEFAULT_CONFIG_MAP_NAME;
    this.logger = (options.logger ?? pino({ level: "silent" })).child({ component: "cluster-config" });
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.renewedTokens = new RenewedTokenWriter({
      kubeConfig: options.kubeConfig,
      namespace: options.namespace,
    });
  }

  /**
   * Reads ConfigMap and Secrets once and validates them. Throws ClusterConfigErrors
   * when the configuration is invalid: the start-up check.
   */
  async load(): Promise<ClusterConfigSnapshot> {
    const ns = this.options.namespace;
    try {
      this.configMap = await this.core.readNamespacedConfigMap({ name: this.configMapName, namespace: ns });
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
      this.configMap = undefined;
    }
    const secrets = await this.core.listNamespacedSecret({
      namespace: ns,
      labelSelector: `${CREDENTIALS_LABEL}=true`,
    });
    this.secrets.clear();
    for (const s of secrets.items) if (s.metadata?.name) this.secrets.set(s.metadata.name, s);
    const config = this.parseConfigMap(); // throws on invalid: start-up is strict
    this.current = this.snapshot(config, undefined);
    return this.current;
  }

  /** The snapshot in force; `load()` must have succeeded. */
  snapshot(): ClusterConfigSnapshot;
  snapshot(config: MultiClusterConfig, reloadError: ClusterConfigErrors | undefined): ClusterConfigSnapshot;
  snapshot(config?: MultiClusterConfig, reloadError?: ClusterConfigErrors): ClusterConfigSnapshot {
    if (config === undefined) {
      if (!this.current) throw new ClusterConfigNotLoadedError();
      return this.current;
    }
    const credentials = new Map<string, ClusterCredentialMaterial | ClusterConfigError>();
    for (const c of config.remotes) {
      const secret = this.secrets.get(credentialSecretName(c.name));
      // A Secret without keys has no `data` at all: it exists, its keys are missing.
      const data = secret ? (secret.data ?? {}) : undefined;
      try {
        const material = parseCredentialSecret(c.name, c.authType, data);
        credentials.set(
          c.name,
          material.authType === "bearerToken"
            ? {
                ...material,
                saveRenewedToken: async (token) => {
                  await this.renewedTokens.save(c.name, token);
                },
              }
            : material,
        );
      } catch (err) {
        if (!(err instanceof ClusterConfigError)) throw err;
        credentials.set(c.name, err);
      }
    }
    return { config, credentials, reloadError };
  }

  /** Called with every new snapshot after a watched object changed. */
  onChange(listener: (s: ClusterConfigSnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Watches the ConfigMap and Secrets until `signal` aborts. Call after `load()`. */
  async start(signal: AbortSignal): Promise<void> {
    const kc = this.options.kubeConfig;
    // Kept running through API server restarts and network blips; a restart re-lists,
    // which also repairs any event missed while disconnected. Every change is compared
    // by resourceVersion below, so no periodic resync is needed.
    const common = {
      namespace: this.options.namespace,
      resyncMs: 0,
      restartBackoffMs: 500,
      maxRestartBackoffMs: 15_000,
      logger: this.logger,
    };
    const configMaps = configMapInformer(kc, {
      ...common,
      what: `configmap ${this.configMapName}`,
      fieldSelector: `metadata.name=${this.configMapName}`,
    });
    const secrets = secretInformer(kc, {
      ...common,
      what: "credential secrets",
      labelSelector: `${CREDENTIALS_LABEL}=true`,
    });
    configMaps.subscribe((event, cm) => this.onConfigMap(event === "delete" ? undefined : cm));
    secrets.subscribe((event, s) => {
      if (!s.metadata?.name) return;
      if (event === "delete") {
        if (this.secrets.delete(s.metadata.name)) this.recompute("secret deleted", s.metadata.name);
        return;
      }
      const prev = this.secrets.get(s.metadata.name);
      if (prev?.metadata?.resourceVersion === s.metadata.resourceVersion) return;
      this.secrets.set(s.metadata.name, s);
      this.recompute("secret changed", s.metadata.name);
    });
    await Promise.all([configMaps.start(signal), secrets.start(signal)]);
  }

  private onConfigMap(cm: V1ConfigMap | undefined): void {
    if (cm?.metadata?.resourceVersion === this.configMap?.metadata?.resourceVersion && cm !== undefined)
      return;
    this.configMap = cm;
    this.recompute("configmap changed", this.configMapName);
  }

  private parseConfigMap(): MultiClusterConfig {
    const text = this.configMap?.data?.[CLUSTERS_CONFIG_KEY];
    if (this.configMap === undefined) {
      // No ConfigMap: multi-cluster is off, the install runs single-cluster sessions.
      return parseClusterConfig("enabled: false");
    }
    if (text === undefined)
      throw new ClusterConfigErrors([
        new ClusterConfigError(
          "SWITCHYARD_CLUSTER_CONFIG_MISSING",
          undefined,
          `ConfigMap ${this.configMapName} key ${CLUSTERS_CONFIG_KEY}`,
          "is missing",
          `put the multi-cluster YAML under key ${CLUSTERS_CONFIG_KEY}`,
        ),
      ]);
    return parseClusterConfig(text);
  }

  private recompute(reason: string, object: string): void {
    if (!this.current) return;
    let next: ClusterConfigSnapshot;
    try {
      next = this.snapshot(this.parseConfigMap(), undefined);
    } catch (err) {
      if (!(err instanceof ClusterConfigErrors)) throw err;
      this.logger.error(
        { object, errors: err.errors.map((e) => e.message) },
        "configuration change rejected; keeping the last valid configuration",
      );
      next = { ...this.current, reloadError: err };
    }
    this.current = next;
    this.logger.info({ reason, object }, "configuration reloaded");
    for (const l of this.listeners) l(next);
  }
}
