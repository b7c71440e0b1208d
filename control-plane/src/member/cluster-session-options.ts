// What the member's ClusterSession reconciler is built from: where its routers are, the agent
// provisioner, the routing-table cache, the target caches and the policies it applies.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import type { SessionAllowListOptions } from "../allow-list/index.js";
import type { RouteSnapshotCache } from "../route-discovery/index.js";
import type { AgentProvisioner } from "./agent-provisioner.js";
import type { TargetSource } from "./target-resolver.js";

export interface ClusterSessionReconcilerOptions {
  kubeConfig: KubeConfig;
  /** Base URL of this cluster's gateway routers (ws[s]:// or http[s]://, no path); the gateway is <base>/v1/sessions/<namespace>:<name>. */
  routerEndpoint: string;
  provisioner: AgentProvisioner;
  routes: RouteSnapshotCache;
  targets: TargetSource;
  /** CA PEM routers use to verify wss:// agents (default: none). */
  agentCaPem?: string;
  /**
   * DNS name routers verify wss:// agents' certificates against (upstream server_name),
   * since they dial agents by pod IP (default: none = the URL's host). Not set on ws:// agents.
   */
  agentServerName?: string;
  /** Namespace for agent Secrets (the control plane's own; default: each target's namespace). */
  secretNamespace?: string;
  /** Install-time allow-list this cluster enforces (default: every namespace, target kind and target). */
  allowList?: SessionAllowListOptions;
  /** This control plane runs the queue split controller (`--sqs-splitting`); default false. */
  queueSplitting?: boolean;
  /** Re-check a session that waits for pods or agents this often, ms (default 5 000); pod events wake it sooner. */
  waitingRecheckMs?: number;
  /**
   * The sessions of a namespace as the informer holds them: candidates for "another session
   * still needs this target's agents", each confirmed with a GET before it counts (default:
   * none, every deletion LISTs the namespace).
   */
  cachedSessions?: (namespace: string) => readonly ClusterSession[];
  /**
   * How long a target's ensured agents and secret stand for the next sessions on it, ms
   * (default 5 000; 0 checks every time): ensured-targets.ts.
   */
  ensuredFreshMs?: number;
  /** Where the agent restore counter registers (switchyard_agent_restores_total; default: none). */
  registry?: Registry;
  logger?: Logger;
  /** Clock, for tests (default Date.now). */
  now?: () => number;
}
