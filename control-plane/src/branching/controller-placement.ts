// Which database-branch controllers this control plane runs, decided once at start-up
// (DESIGN §7). Branch CRs are created on the Primary, but databases are made in the
// Default cluster: the branching controllers run where the Default is, and when the
// Primary is not the Default a sync controller on the Primary copies branch CRs there
// and their status back. Exactly one cluster of an installation runs the branching
// controllers, and sync runs only where branching does not.
import { OptionError } from "../../../lib/option-error.js";
import type { MultiClusterConfig } from "../config/cluster-config.js";
import type { ControlPlaneMode } from "../runtime/index.js";

/** The flag a member is told it is the Default cluster with (a member has no clusters config). */
export const DEFAULT_CLUSTER_FLAG = "--default-cluster";

export interface PlacementInput {
  mode: ControlPlaneMode;
  /**
   * The Primary's clusters config (primary and both modes); undefined when none is
   * configured (a single-cluster install). Ignored in member mode.
   */
  clusters: Pick<MultiClusterConfig, "enabled" | "clusterName" | "defaultCluster"> | undefined;
  /**
   * Member mode: this cluster is the Default of its Primary. A member cannot read the
   * Primary's configuration, so the installation says so explicitly (the chart renders
   * `--default-cluster` on the Default's control plane only). In primary and both modes
   * the clusters config decides and this may only agree with it.
   */
  memberIsDefault: boolean;
}

export interface ControllerPlacement {
  /** Run the PgBranchDatabase/MysqlBranchDatabase controllers (provision databases) here. */
  branching: boolean;
  /** Run the branch sync controller (Primary ↔ Default copy of branch CRs) here. */
  sync: boolean;
  /** One line for the start-up log. */
  why: string;
}

/** Decides the placement; throws OptionError when `--default-cluster` contradicts the clusters config. */
export function placeBranchControllers(input: PlacementInput): ControllerPlacement {
  const { mode, clusters, memberIsDefault } = input;
  if (mode === "member") {
    return memberIsDefault
      ? {
          branching: true,
          sync: false,
          why: `branch controllers on: this member is the Default cluster (${DEFAULT_CLUSTER_FLAG})`,
        }
      : {
          branching: false,
          sync: false,
          why: `branch controllers off: this member is not the Default cluster (no ${DEFAULT_CLUSTER_FLAG})`,
        };
  }
  if (clusters === undefined || !clusters.enabled) {
    return {
      branching: true,
      sync: false,
      why:
        clusters === undefined
          ? "branch controllers on: single-cluster install (no multi-cluster configuration)"
          : "branch controllers on: single-cluster install (multi-cluster enabled: false)",
    };
  }
  const { clusterName, defaultCluster } = clusters;
  if (defaultCluster === clusterName) {
    return {
      branching: true,
      sync: false,
      why: `branch controllers on, no sync: this Primary (${clusterName}) is the Default cluster`,
    };
  }
  if (memberIsDefault) {
    throw new OptionError(
      DEFAULT_CLUSTER_FLAG,
      `this Primary (${clusterName}) is not the Default: its clusters config names ${defaultCluster}. ` +
        `Drop the flag here, or set defaultCluster: ${clusterName} in the clusters config`,
    );
  }
  return {
    branching: false,
    sync: true,
    why:
      `branch sync on: the Default cluster is ${defaultCluster}, not this Primary (${clusterName}); ` +
      `its control plane runs the branch controllers (${DEFAULT_CLUSTER_FLAG})`,
  };
}
