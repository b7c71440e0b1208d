// The seam between the ClusterSession reconciler and whatever runs agents: the
// reconciler says "make sure agents serve this target" and "the last session on it
// ended"; a provisioner decides how (a sidecar patched into the workload, or a local
// process). Both calls are idempotent and level-triggered: they look at what exists,
// never at what they did before, so a restarted control plane recovers the same agents.
import type { V1Pod } from "@kubernetes/client-node";
import type { ResolvedTarget } from "./target-resolver.js";

export type ProvisionerMode = "sidecar" | "process";

/** One agent that serves a ready pod of the target. */
export interface AgentEndpoint {
  /** RFC 1123 label naming the agent in the routing table (upstream `cluster`). */
  id: string;
  /** The pod it serves. */
  pod: V1Pod;
  /** ws:// or wss:// base URL of its protocol endpoint (no path). */
  baseUrl: string;
}

export interface EnsureAgentsInput {
  resolved: ResolvedTarget;
  /** Lowercase hex sha256 of the per-agent secret: the only form the agent is given. */
  secretHash: string;
  signal: AbortSignal;
}

export interface EnsureAgentsResult {
  /** Agents serving ready pods now, preferred pod first. */
  agents: AgentEndpoint[];
  /** Set when no agent is serving yet: why (condition reason, CamelCase) and what is awaited. */
  waiting?: { reason: string; message: string };
  /** Set when what `agents` holds changes by itself later (a grace ends): look again after this many ms. */
  recheckAfterMs?: number;
}

/** A target as release and idle name it. */
export interface AgentTarget {
  namespace: string;
  id: string;
  kind: string;
  name: string;
}

/** What became of a target's agents when the last session on it ended. */
export type IdleOutcome =
  /** Restored (template back, agents stopped): the agent secret may go. */
  | { kind: "released" }
  /** Kept idle until `until` (epoch ms) or until removed ("never"); recorded in the cluster. */
  | { kind: "lingering"; until: number | "never" }
  /** The workload's pods are born with the agent (it opted in): nothing to restore, the secret stays. */
  | { kind: "born" };

export interface AgentProvisioner {
  readonly mode: ProvisionerMode;
  ensure(input: EnsureAgentsInput): Promise<EnsureAgentsResult>;
  /** Undo everything done for the target (restore, stop); resolves when done. Safe to repeat. */
  release(target: AgentTarget, signal: AbortSignal): Promise<void>;
  /**
   * Optional: the last session on the target ended. The provisioner keeps the agents idle
   * (recording until when in the cluster, so any control plane restores them later) or
   * releases them now. Without it, the reconciler releases at once.
   */
  idle?(target: AgentTarget, signal: AbortSignal): Promise<IdleOutcome>;
  /** Optional: what of the target's agents is ours: a patched template, pods born with it, or none. */
  carries?(target: AgentTarget): Promise<"template" | "born" | "none">;
  /** Optional: mark the target so that the last session on it ending releases at once; false when nothing is ours. */
  requestRemoval?(target: AgentTarget): Promise<boolean>;
  /**
   * Optional: report agents that stopped serving on their own (crashed, killed) by
   * calling `onGone(targetId)`, until `signal` aborts, so the sessions on that target are
   * reconciled at once (and the agent replaced) instead of at the next resync. Provisioners
   * whose agents something else restarts (a kubelet, for sidecars) need not implement it.
   */
  watch?(onGone: (targetId: string) => void, signal: AbortSignal): void;
}

/** An RFC 1123 label for a pod: its name when it fits, else a stable hash-based id. */
export function agentIdForPod(podName: string, hash: (s: string) => string): string {
  if (/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(podName)) return podName;
  return `agent-${hash(podName).slice(0, 16)}`;
}
