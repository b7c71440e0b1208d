// Database branching as a feature of the control-plane process, on a Primary and on a
// member: where its controllers run is decided once the configuration is known (a
// Primary's clusters config, loaded by its cluster registry; a member's --default-cluster),
// logged once, and the chosen controller runs one leadership term at a time — the branching
// controller where the Default cluster is, the sync controller on a Primary whose Default
// is another cluster. A placement the flags contradict stops the process at start-up, like
// any invalid option.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Registry } from "prom-client";
import type { ClusterRegistry } from "../primary/cluster-registry.js";
import { registryWorkloadClusters } from "../primary/workload-clusters.js";
import type { ControlPlaneMode, ControllerMetrics, Feature } from "../runtime/index.js";
import { BranchController } from "./branch-controller.js";
import { BranchMetrics } from "./branch-metrics.js";
import { branchingFlags, type BranchingOptions } from "./branching-options.js";
import { BranchSyncController } from "./sync/branch-sync-controller.js";
import { BranchSyncMetrics } from "./sync/branch-sync-metrics.js";
import { placeBranchControllers } from "./controller-placement.js";
import { podProvisioners } from "./pod/pod-provisioners.js";
import { BRANCH_PROVISIONER_HINT, serverProvisioners } from "./server-provisioners.js";

export interface BranchingNeeds {
  kubeConfig: KubeConfig;
  mode: ControlPlaneMode;
  /** A Primary's registry: its configuration names the Default cluster; undefined on a member. */
  clusterRegistry: ClusterRegistry | undefined;
  registry: Registry;
  controllerMetrics: ControllerMetrics;
  logger: Logger;
}

export const branchingFeature: Feature<BranchingOptions, BranchingNeeds> = {
  name: "branch placement",
  runsIn: ["primary", "member"],
  flags: branchingFlags,
  start(o, needs) {
    const { kubeConfig: kc, clusterRegistry, logger } = needs;
    const placement = (clusterRegistry ? clusterRegistry.ready() : Promise.resolve()).then(() => {
      const p = placeBranchControllers({
        mode: needs.mode,
        clusters: clusterRegistry?.config(),
        memberIsDefault: o.defaultCluster,
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
          provisioners: { ...serverProvisioners(o, logger), ...podProvisioners(o, kc, logger) },
          provisionerHint: BRANCH_PROVISIONER_HINT,
          logger,
          metrics: new BranchMetrics(needs.registry),
          controllerMetrics: needs.controllerMetrics,
        });
      }
      if (p.sync && clusterRegistry) {
        sync = new BranchSyncController({
          primaryKubeConfig: kc,
          clusters: registryWorkloadClusters(clusterRegistry, kc),
          metrics: new BranchSyncMetrics(needs.registry),
          controllerMetrics: needs.controllerMetrics,
          logger,
        });
      }
    });
    controllers.catch(() => undefined);
    return {
      // Settles once the placement is known; rejects (stopping the process) when the flags contradict it.
      serve: () => placement.then(() => undefined),
      async lead(leading) {
        await controllers;
        await Promise.all([branching?.start(leading), sync?.start(leading)]);
      },
    };
  },
};
