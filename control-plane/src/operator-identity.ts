// What this cluster's control plane advertises about itself in the SwitchyardOperator
// `operator`: operator and protocol versions, supported features (the CLI picks single- or
// multi-cluster sessions from them; a Primary reads a member's), the router endpoint the CLI
// connects to, and the default namespace. Written by the leader on every term and then
// periodically, as a merge patch of these status fields only — the cluster registry owns
// spec, connectedClusters and its conditions.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { sleep } from "../../lib/abortable-sleep.js";
import { PROTOCOL_VERSION_MAX } from "../../proto/frame-version.js";
import {
  OPERATOR_OBJECT_NAME,
  switchyardOperatorClient,
  type KnownFeature,
  type SwitchyardOperatorStatus,
} from "../../proto/api/v1alpha1/index.js";
import type { ControlPlaneMode } from "./control-plane-options.js";

/** Version of this control plane (kept in step with package.json by the release). */
export const OPERATOR_VERSION = "0.1.0";

export interface OperatorIdentity {
  mode: ControlPlaneMode;
  clusterName: string;
  routerEndpoint: string | undefined;
  defaultNamespace: string;
}

export function featuresFor(mode: ControlPlaneMode): KnownFeature[] {
  const f: KnownFeature[] = [];
  if (mode === "primary" || mode === "both") f.push("MultiClusterPrimary");
  if (mode === "member" || mode === "both") f.push("MultiClusterMember");
  // Clients may lose a router and resume the same session through another one.
  f.push("LayerReconnect");
  return f;
}

export function identityStatus(id: OperatorIdentity): Partial<SwitchyardOperatorStatus> {
  return {
    operatorVersion: OPERATOR_VERSION,
    protocolVersion: `${PROTOCOL_VERSION_MAX}.0.0`,
    supportedFeatures: featuresFor(id.mode),
    defaultNamespace: id.defaultNamespace,
    ...(id.routerEndpoint ? { routerEndpoint: id.routerEndpoint } : {}),
  };
}

/** Creates `operator` if missing and patches this process's identity into its status. */
export async function publishOperatorIdentity(kc: KubeConfig, id: OperatorIdentity): Promise<void> {
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
  await client.patchStatus(ref, identityStatus(id));
}

/** Publishes now and every `intervalMs` until `signal` aborts (the leadership term). */
export async function runOperatorIdentity(
  kc: KubeConfig,
  id: OperatorIdentity,
  signal: AbortSignal,
  logger: Logger,
  intervalMs = 60_000,
): Promise<void> {
  while (!signal.aborted) {
    let wait = intervalMs;
    try {
      await publishOperatorIdentity(kc, id);
    } catch (err) {
      logger.warn({ err: (err as Error).message }, "publishing the operator identity failed; retrying");
      wait = Math.min(intervalMs, 5_000);
    }
    await sleep(wait, signal);
  }
}
