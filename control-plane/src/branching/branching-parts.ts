// Database branching as parts of the control-plane process: where the controllers run is
// decided once the configuration is known (a Primary's clusters config, loaded by its
// cluster registry; a member's --default-cluster), logged once, and the chosen controller
// runs in each leadership term. A placement the flags contradict stops the process at
// start-up, like any invalid option.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { ControlPlaneOptions } from "../control-plane-options.js";
import type { ClusterRegistry } from "../primary/cluster-registry.js";
import { registryWorkloadClusters } from "../primary/workload-clusters.js";
import type { ControllerMetrics } from "../runtime/index.js";
import { BranchController } from "./branch-controller.js";
import { BranchMetrics } from "./branch-metrics.js";
import { BranchSyncController } from "./sync/branch-sync-controller.js";
import { BranchSyncMetrics } from "./sync/branch-sync-metrics.js";
import { placeBranchControllers, type ControllerPlacement } from "./controller-placement.js";
import { podProvisioners } from "./pod/pod-provisioners.js";
import { BRANCH_PROVISIONER_HINT, serverProvisioners } from "./server-provisioners.js";

export interface BranchingParts {
  /** Settles with the placement once known; rejects when the flags contradict the configuration. */
  placement: Promise<ControllerPlacement>;
  /** One leadership term of whichever controller runs here (none: resolves at once). */
  leaderWork(leading: AbortSignal): Promise<void>;
}

export function branchingParts(args: {
  options: ControlPlaneOptions;
  kubeConfig: KubeConfig;
  clusterRegistry: ClusterRegistry | undefined;
  registry: Registry;
  controllerMetrics: ControllerMetrics;
  logger: Logger;
}): BranchingParts {
  const { options: o, kubeConfig: kc, clusterRegistry, logger } = args;
  const placement = (clusterRegistry ? clusterRegistry.ready() : Promise.resolve()).then(() => {
    const p = placeBranchControllers({
      mode: o.mode,
      clusters: clusterRegistry?.config(),
      memberIsDefault: o.branching.defaultCluster,
    });
    logger.info({ branching: p.branching, sync: p.sync }, p.why);
    return p;
  });
  placement.catch(() => undefined);
  let branching: BranchController | undefined;
  let sync: BranchSyncController | undefined;
  const controllers = placement.then((p) => {
    if (p.branching) {
      branching = new BranchController({
        kubeConfig: kc,
        // The options give each engine one provisioner at most.
        provisioners: {
          ...serverProvisioners(o.branching, logger),
          ...podProvisioners(o.branching, kc, logger),
        },
        provisionerHint: BRANCH_PROVISIONER_HINT,
        logger,
        metrics: new BranchMetrics(args.registry),
        controllerMetrics: args.controllerMetrics,
      });
    }
    if (p.sync && clusterRegistry) {
      sync = new BranchSyncController({
        primaryKubeConfig: kc,
        clusters: registryWorkloadClusters(clusterRegistry, kc),
        metrics: new BranchSyncMetrics(args.registry),
        controllerMetrics: args.controllerMetrics,
        logger,
      });
    }
  });
  controllers.catch(() => undefined);
  return {
    placement,
    async leaderWork(leading) {
      await controllers;
      await Promise.all([branching?.start(leading), sync?.start(leading)]);
    },
  };
}
