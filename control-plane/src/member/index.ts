// Member mode of the control plane: the ClusterSession reconciler, agent provisioners
// (sidecar and process) and their wiring. See README.md.
export { MemberController } from "./member-controller.js";
export type { MemberControllerOptions } from "./member-controller.js";
export { ClusterSessionReconciler, MEMBER_FINALIZER, ttlDeadline } from "./cluster-session-reconciler.js";
export type { ClusterSessionReconcilerOptions } from "./cluster-session-reconciler.js";
export type {
  AgentEndpoint,
  AgentProvisioner,
  EnsureAgentsInput,
  EnsureAgentsResult,
  ProvisionerMode,
} from "./agent-provisioner.js";
export { SidecarAgentProvisioner } from "./sidecar-agent-provisioner.js";
export type { SidecarAgentProvisionerOptions } from "./sidecar-agent-provisioner.js";
export { ProcessAgentProvisioner, defaultAgentCommand } from "./process-agent-provisioner.js";
export type { AgentCommand, ProcessAgentProvisionerOptions } from "./process-agent-provisioner.js";
export { AgentSecretStore, agentSecretName, AGENT_SECRET_LABEL } from "./agent-secret-store.js";
export {
  AGENT_CONTAINER,
  REDIRECT_CONTAINER,
  ORIGINAL_TEMPLATE_ANNOTATION,
  PATCHED_TEMPLATE_ANNOTATION,
  SECRET_HASH_ANNOTATION,
  injectSidecar,
  stripSidecar,
  portMappings,
} from "./sidecar-pod-template.js";
export type { SidecarSettings, PortMapping } from "./sidecar-pod-template.js";
export { resolveTarget, rankReadyPods, isPodReady } from "./target-resolver.js";
export type { ResolvedTarget, TargetSource } from "./target-resolver.js";
export { AgentLaunchError } from "./member-errors.js";
