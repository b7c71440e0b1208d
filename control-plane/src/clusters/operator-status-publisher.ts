// Publishes the cluster registry's view in the Primary's SwitchyardOperator `operator`:
// spec summarises the multi-cluster configuration (never credentials) and
// status.connectedClusters[] holds one entry per remote cluster from the last health
// check. Three conditions of our own: RemoteClustersReady (False naming the clusters in
// error), RemoteCredentialsExpiring (True while a credential's renewal is failing or a
// client certificate is close to expiry, with the date) and ConfigurationValid (False while
// the latest clusters ConfigMap is refused, with every field and fix, the last valid
// configuration staying in force: an edit that was refused shows where the operator looks,
// not only in a log). Conditions of other types (written by other parts of the control
// plane) are kept. Only the leader calls this.
import type { KubeConfig } from "@kubernetes/client-node";
import type { MultiClusterConfig } from "../config/cluster-config.js";
import {
  OPERATOR_OBJECT_NAME,
  setConditions,
  switchyardOperatorClient,
  type SwitchyardOperatorSpec,
  type SwitchyardOperatorStatus,
} from "../../../proto/api/v1alpha1/index.js";
import type { ClusterHealth } from "./cluster-health-checker.js";

type ConnectedCluster = NonNullable<SwitchyardOperatorStatus["connectedClusters"]>[number];

export const REMOTE_CLUSTERS_READY = "RemoteClustersReady";
export const REMOTE_CREDENTIALS_EXPIRING = "RemoteCredentialsExpiring";
export const CONFIGURATION_VALID = "ConfigurationValid";

export function operatorSpecFor(config: MultiClusterConfig): SwitchyardOperatorSpec {
  return {
    clusterName: config.clusterName || "default",
    ...(config.enabled && config.defaultCluster ? { defaultCluster: config.defaultCluster } : {}),
    managementOnly: config.managementOnly,
    multiCluster: config.enabled,
    clusters: config.remotes.map((r) => ({ name: r.name, server: r.server, authType: r.authType })),
  };
}

const VERSION = /^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?$/;
const isVersion = (v: string | undefined): v is string =>
  v !== undefined && v.length <= 64 && VERSION.test(v);

export function connectedClusterEntry(h: ClusterHealth): ConnectedCluster {
  const credentialProblem = h.credential?.error ?? h.credential?.warning;
  const error = h.error ?? (h.credential?.error ? h.credential.error : undefined);
  return {
    name: h.name,
    ...(h.connected
      ? {
          connected: {
            kubernetesVersion: h.connected.kubernetesVersion.slice(0, 64),
            // A member's version that our schema would refuse must not block the whole status write.
            ...(isVersion(h.connected.operatorVersion)
              ? { operatorVersion: h.connected.operatorVersion }
              : {}),
            ...(isVersion(h.connected.protocolVersion)
              ? { protocolVersion: h.connected.protocolVersion }
              : {}),
          },
          ...(h.connected.agents ? { agents: h.connected.agents } : {}),
        }
      : {}),
    ...(error
      ? { error: error.slice(0, 4096) }
      : !h.connected && credentialProblem
        ? { error: credentialProblem }
        : {}),
    lastCheck: new Date(h.lastCheck).toISOString(),
    ...(h.latencyMs !== undefined ? { latencyMs: Math.max(0, Math.round(h.latencyMs)) } : {}),
    ...(h.credential?.expiresAt !== undefined
      ? { credentialExpiresAt: new Date(h.credential.expiresAt).toISOString() }
      : {}),
  };
}

export class OperatorStatusPublisher {
  private readonly client;
  constructor(kubeConfig: KubeConfig) {
    this.client = switchyardOperatorClient(kubeConfig, { fieldManager: "switchyard-cluster-registry" });
  }

  /** `rejectedConfig`: why the newest ConfigMap was refused (ClusterConfigErrors' message), if it was. */
  async publish(
    config: MultiClusterConfig,
    health: readonly ClusterHealth[],
    now = Date.now(),
    rejectedConfig?: string,
  ): Promise<void> {
    const spec = operatorSpecFor(config);
    const ref = { name: OPERATOR_OBJECT_NAME };
    let current = await this.client.get(ref);
    if (!current) {
      try {
        current = await this.client.create({ metadata: { name: OPERATOR_OBJECT_NAME }, spec });
      } catch (err) {
        if ((err as { code?: number }).code !== 409) throw err;
        current = await this.client.get(ref);
      }
    } else if (JSON.stringify(pickSpec(current.spec)) !== JSON.stringify(spec)) {
      current = await this.client.patch(ref, { spec });
    }
    const inError = health.filter((h) => h.error !== undefined || !h.connected);
    const expiring = health
      .map((h) => ({ name: h.name, c: h.credential }))
      .filter((x) => x.c?.error || x.c?.warning)
      .map((x) => {
        const at = x.c?.expiresAt ? ` (credential expires ${new Date(x.c.expiresAt).toISOString()})` : "";
        return `${x.name}: ${x.c?.error ?? x.c?.warning}${at}`;
      });
    const { conditions } = setConditions(
      current?.status?.conditions,
      [
        {
          type: REMOTE_CLUSTERS_READY,
          status: inError.length === 0 ? "True" : "False",
          reason: inError.length === 0 ? "AllConnected" : "ClustersUnreachable",
          message:
            inError.length === 0
              ? `${health.length} remote cluster(s) connected`
              : inError.map((h) => `${h.name}: ${h.error ?? "not connected"}`).join("; "),
        },
        {
          type: REMOTE_CREDENTIALS_EXPIRING,
          status: expiring.length > 0 ? "True" : "False",
          reason: expiring.length > 0 ? "CredentialAtRisk" : "CredentialsHealthy",
          message:
            expiring.length > 0 ? expiring.join("; ") : "no credential renewal failing or close to expiry",
        },
        rejectedConfig === undefined
          ? {
              type: CONFIGURATION_VALID,
              status: "True",
              reason: "ConfigurationApplied",
              message: "the clusters ConfigMap in force is the latest one",
            }
          : {
              type: CONFIGURATION_VALID,
              status: "False",
              reason: "ConfigurationRejected",
              message: `${rejectedConfig}\nThe last valid configuration stays in force until the ConfigMap is fixed.`,
            },
      ],
      new Date(now),
      current?.metadata.generation,
    );
    await this.client.patchStatus(ref, {
      connectedClusters: health.map(connectedClusterEntry),
      conditions,
    });
  }
}

function pickSpec(s: SwitchyardOperatorSpec | undefined): SwitchyardOperatorSpec | undefined {
  if (!s) return s;
  return {
    clusterName: s.clusterName,
    ...(s.defaultCluster ? { defaultCluster: s.defaultCluster } : {}),
    managementOnly: s.managementOnly,
    multiCluster: s.multiCluster,
    clusters: s.clusters ?? [],
  };
}
