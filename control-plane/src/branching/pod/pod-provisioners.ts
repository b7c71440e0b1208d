// The `pod` provisioners this control plane was given (branching-options.ts): one per engine
// whose provisioner is `pod`, making branch pods in this cluster (the Default cluster, whose
// kubeconfig the branching controller has).
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { BranchKind } from "../../../../proto/api/v1alpha1/index.js";
import type { BranchProvisioner } from "../branch-provisioner.js";
import type { BranchingOptions } from "../branching-options.js";
import { MysqlPodBranches, PgPodBranches } from "./pod-branches.js";

export function podProvisioners(
  o: BranchingOptions,
  kubeConfig: KubeConfig,
  logger: Logger,
): Partial<Record<BranchKind, BranchProvisioner>> {
  const out: Partial<Record<BranchKind, BranchProvisioner>> = {};
  if (o.postgresPod) {
    out.PgBranchDatabase = new PgPodBranches({
      kubeConfig,
      image: o.postgresPod.image,
      imageOption: "--branch-pod-image-postgres",
      logger,
    });
  }
  if (o.mysqlPod) {
    out.MysqlBranchDatabase = new MysqlPodBranches({
      kubeConfig,
      image: o.mysqlPod.image,
      imageOption: "--branch-pod-image-mysql",
      logger,
    });
  }
  return out;
}
