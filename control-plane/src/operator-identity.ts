// What this cluster's control plane advertises about itself in the SwitchyardOperator
// `operator`: operator and protocol versions, supported features (the CLI picks single- or
// multi-cluster sessions from them; a Primary reads a member's), the router endpoint the CLI
// connects to, the default namespace and how many sessions it serves (live-session-counts.ts).
// Features are what is enabled, not what the binary could do: `MultiClusterPrimary` only
// while the configuration in force enables multi-cluster sessions. Written by the leader on
// every term, within a second of any change (a configuration reload, a session count), and
// every `intervalMs` regardless, as a merge patch of these status fields only — the cluster
// registry owns spec, connectedClusters and its conditions.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { sleep } from "../../lib/abortable-sleep.js";
import { PROTOCOL_VERSION_MAX } from "../../proto/frame-version.js";
import {
  OPERATOR_OBJECT_NAME,
  switchyardOperatorClient,
  type AgentsSummary,
  type KnownFeature,
  type SwitchyardOperatorStatus,
} from "../../proto/api/v1alpha1/index.js";
import type { ControlPlaneMode } from "./runtime/index.js";
import type { SessionCounts } from "./live-session-counts.js";

/** Version of this control plane (kept in step with package.json by the release). */
export const OPERATOR_VERSION = "0.1.0";

export interface OperatorIdentity {
  mode: ControlPlaneMode;
  clusterName: string;
  routerEndpoint: string | undefined;
  defaultNamespace: string;
  /**
   * Primary and both: whether the configuration in force enables multi-cluster sessions;
   * undefined while it is not loaded (nothing is published until it is). Default: enabled.
   */
  multiClusterEnabled?: () => boolean | undefined;
  /** Member and both: this control plane splits SQS queues (`--sqs-splitting`). */
  sqsSplitting?: boolean;
  /** Live sessions served here; runs per leadership term. Default: `status.sessions` not written. */
  sessions?: {
    start(signal: AbortSignal): Promise<void>;
    /** undefined while not known yet. */
    counts(): SessionCounts | undefined;
  };
  /** Member and both: the agents kept in workloads here; undefined while not known. Default: not written. */
  agents?: () => AgentsSummary | undefined;
}

/** Features of `mode` as configured: `MultiClusterPrimary` only with multi-cluster enabled. */
export function featuresFor(
  mode: ControlPlaneMode,
  multiClusterEnabled = true,
  sqsSplitting = false,
): KnownFeature[] {
  const f: KnownFeature[] = [];
  if ((mode === "primary" || mode === "both") && multiClusterEnabled) f.push("MultiClusterPrimary");
  if (mode === "member" || mode === "both") f.push("MultiClusterMember");
  if (sqsSplitting && mode !== "primary") f.push("SqsQueueSplitting");
  // Clients may lose a router and resume the same session through another one.
  f.push("LayerReconnect");
  return f;
}

/** The status fields to publish now; undefined while the configuration is not loaded. */
export function identityStatus(id: OperatorIdentity): Partial<SwitchyardOperatorStatus> | undefined {
  const enabled = id.multiClusterEnabled ? id.multiClusterEnabled() : true;
  if (enabled === undefined) return undefined;
  const sessions = id.sessions?.counts();
  const agents = id.agents?.();
  return {
    operatorVersion: OPERATOR_VERSION,
    protocolVersion: `${PROTOCOL_VERSION_MAX}.0.0`,
    supportedFeatures: featuresFor(id.mode, enabled, id.sqsSplitting === true),
    defaultNamespace: id.defaultNamespace,
    ...(id.routerEndpoint ? { routerEndpoint: id.routerEndpoint } : {}),
    ...(sessions ? { sessions } : {}),
    ...(agents ? { agents } : {}),
  };
}

/** Creates `operator` if missing and patches `status` (identityStatus) into its status. */
export async function publishOperatorIdentity(
  kc: KubeConfig,
  id: OperatorIdentity,
  status: Partial<SwitchyardOperatorStatus>,
): Promise<void> {
  const client = switchyardOperatorClient(kc, { fieldManager: "switchyard-operator-identity" });
  const ref = { name: OPERATOR_OBJECT_NAME };
  if (!(await client.get(ref))) {
    try {
      await client.create({
        metadata: { name: OPERATOR_OBJECT_NAME },
        spec: { clusterName: id.clusterName, managementOnly: false, multiCluster: false },
      });
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err; // the registry made it first
    }
  }
  await client.patchStatus(ref, status);
}

/**
 * Publishes while `signal` lives (the leadership term): as soon as the status is known, again
 * whenever it changes (checked every `refreshMs`, in memory), and every `intervalMs` anyway
 * (repairs an edit by hand or a lost write).
 */
export async function runOperatorIdentity(
  kc: KubeConfig,
  id: OperatorIdentity,
  signal: AbortSignal,
  logger: Logger,
  intervalMs = 60_000,
  refreshMs = 1_000,
): Promise<void> {
  const counting = id.sessions?.start(signal).catch((err: Error) => {
    logger.warn({ err: err.message }, "counting sessions failed; status.sessions is not updated");
  });
  let published: string | undefined;
  let publishedAt = -Infinity;
  let retryAt = -Infinity;
  while (!signal.aborted) {
    const status = identityStatus(id);
    const now = Date.now();
    const text = JSON.stringify(status);
    if (status && now >= retryAt && (text !== published || now - publishedAt >= intervalMs)) {
      try {
        await publishOperatorIdentity(kc, id, status);
        published = text;
        publishedAt = now;
      } catch (err) {
        logger.warn({ err: (err as Error).message }, "publishing the operator identity failed; retrying");
        retryAt = now + Math.min(intervalMs, 5_000);
      }
    }
    await sleep(refreshMs, signal);
  }
  await counting;
}
