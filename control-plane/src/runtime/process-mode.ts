// The modes a control-plane process runs in, and the two roles they combine: a Primary (the
// cluster registry, MultiClusterSessions) and a member (ClusterSessions, agents). Features say
// in which roles they run; the process layer reads the mode from its flags.
export type ControlPlaneMode = "primary" | "member" | "both";

/** The roles a feature may run in. */
export type ProcessRole = "primary" | "member";

/** Whether a process in `mode` plays `role`. */
export function playsRole(mode: ControlPlaneMode, role: ProcessRole): boolean {
  return mode === role || mode === "both";
}
