// One health check of one remote cluster: its Kubernetes version (the round trip we
// report as latency), which Switchyard kinds it serves (discovery of switchyard.dev),
// and, when it runs a Switchyard control plane, that operator's versions and features.
// A check never throws: failures become `error`, so one cluster's problem is data in
// status, not an exception that stops the loop for the others.
import { CustomObjectsApi, VersionApi } from "@kubernetes/client-node";
import {
  GROUP,
  OPERATOR_OBJECT_NAME,
  VERSION,
  switchyardOperatorCrd,
  type AgentsSummary,
} from "../../../proto/api/v1alpha1/index.js";
import type { Clock } from "../credentials/clock.js";
import { systemClock } from "../credentials/clock.js";
import type { CredentialStatus } from "../credentials/credential-source.js";
import { memberAgentsSummary } from "./member-agents.js";
import { describeRemoteError } from "./remote-error.js";
import type { RemoteClusterClient } from "./remote-cluster-client.js";

const SWITCHYARD_GROUP = GROUP;
const SWITCHYARD_VERSION = VERSION;
const OPERATOR_PLURAL = switchyardOperatorCrd.plural;
const OPERATOR_NAME = OPERATOR_OBJECT_NAME;

export interface ClusterConnectedInfo {
  kubernetesVersion: string;
  /** Plural resource names of switchyard.dev/v1alpha1 the cluster serves. */
  switchyardResources: string[];
  operatorVersion?: string;
  protocolVersion?: string;
  supportedFeatures?: string[];
  /** The agents the member keeps in workloads there (its operator's status.agents), when valid. */
  agents?: AgentsSummary;
}

export interface ClusterHealth {
  name: string;
  /** When the check finished (ms since epoch). */
  lastCheck: number;
  /** Round trip of the version call in ms (absent when it failed). */
  latencyMs?: number;
  connected?: ClusterConnectedInfo;
  error?: string;
  /** Credential state (expiry, renewal errors, warnings). */
  credential?: CredentialStatus;
}

export async function checkClusterHealth(
  client: RemoteClusterClient,
  clock: Clock = systemClock,
): Promise<ClusterHealth> {
  const name = client.name;
  const credential = client.credential.status();
  const t0 = performance.now();
  let kubernetesVersion: string;
  let latencyMs: number;
  try {
    const v = await client.makeApiClient(VersionApi).getCode();
    latencyMs = Math.round(performance.now() - t0);
    kubernetesVersion = v.gitVersion;
  } catch (err) {
    const base = describeRemoteError(err, client.cluster.authType, client.cluster.server);
    // A credential problem we already know about explains a 401 better than the 401.
    const error = credential.error && /\b401\b/.test(base) ? `${base}; ${credential.error}` : base;
    return { name, lastCheck: clock.now(), error, credential };
  }
  const connected: ClusterConnectedInfo = { kubernetesVersion, switchyardResources: [] };
  const custom = client.makeApiClient(CustomObjectsApi);
  try {
    const list = await custom.getAPIResources({ group: SWITCHYARD_GROUP, version: SWITCHYARD_VERSION });
    connected.switchyardResources = list.resources
      .map((r) => r.name)
      .filter((n) => !n.includes("/"))
      .sort();
  } catch (err) {
    if ((err as { code?: unknown }).code !== 404) {
      return {
        name,
        lastCheck: clock.now(),
        latencyMs,
        error: `discovery of ${SWITCHYARD_GROUP} failed: ${describeRemoteError(err, client.cluster.authType, client.cluster.server)}`,
        credential,
      };
    }
  }
  if (connected.switchyardResources.includes(OPERATOR_PLURAL)) {
    try {
      const op = (await custom.getClusterCustomObject({
        group: SWITCHYARD_GROUP,
        version: SWITCHYARD_VERSION,
        plural: OPERATOR_PLURAL,
        name: OPERATOR_NAME,
      })) as {
        status?: {
          operatorVersion?: unknown;
          protocolVersion?: unknown;
          supportedFeatures?: unknown;
          agents?: unknown;
        };
      };
      const s = op.status ?? {};
      if (typeof s.operatorVersion === "string") connected.operatorVersion = s.operatorVersion;
      if (typeof s.protocolVersion === "string") connected.protocolVersion = s.protocolVersion;
      if (Array.isArray(s.supportedFeatures))
        connected.supportedFeatures = s.supportedFeatures.filter((f): f is string => typeof f === "string");
      const agents = memberAgentsSummary(s.agents);
      if (agents) connected.agents = agents;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code !== 404 && code !== 403)
        return {
          name,
          lastCheck: clock.now(),
          latencyMs,
          error: `reading SwitchyardOperator failed: ${describeRemoteError(err, client.cluster.authType, client.cluster.server)}`,
          credential,
        };
    }
  }
  return { name, lastCheck: clock.now(), latencyMs, connected, credential };
}
