// Member mode as a feature of the control-plane process: the ClusterSession controller with
// the agent provisioner its flags choose (member/agent-options.ts), one leadership term at a
// time. It offers the controller to the process, which feeds it the routers' live-session
// reports and reads its sessions and agents for the SwitchyardOperator.
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { OptionError } from "../../../lib/option-error.js";
import type { SessionAllowListOptions } from "../allow-list/index.js";
import type { RouteSnapshotCache } from "../route-discovery/index.js";
import type { ControllerMetrics, Feature } from "../runtime/index.js";
import { agentFlags, type AgentOptions } from "./agent-options.js";
import type { AgentProvisioner } from "./agent-provisioner.js";
import { MemberController } from "./member-controller.js";
import { ProcessAgentProvisioner } from "./process-agent-provisioner.js";
import { SidecarAgentProvisioner } from "./sidecar-agent-provisioner.js";

export interface MemberNeeds {
  kubeConfig: KubeConfig;
  /** This cluster's name: process agents keep their records per cluster. */
  clusterName: string;
  /** The control plane's namespace: agent Secrets live there. */
  namespace: string;
  /** Base URL of this cluster's routers, each child's gateway. */
  routerEndpoint: string;
  routes: RouteSnapshotCache;
  allowList: SessionAllowListOptions;
  /** False when a Primary in the same process publishes the routing table. */
  markRoutesReady: boolean;
  /** The queue split controller runs here: sessions with splits wait for it. */
  queueSplitting: boolean;
  controllerMetrics: ControllerMetrics;
  logger: Logger;
}

function provisionerFor(o: AgentOptions, needs: MemberNeeds): AgentProvisioner {
  const { kubeConfig, logger } = needs;
  if (o.provisioner === "process") {
    return new ProcessAgentProvisioner({
      kubeconfigPath: o.kubeconfig!,
      ...(o.outboundBind ? { outboundBind: o.outboundBind } : {}),
      ...(o.extraArgs.length > 0 ? { extraArgs: o.extraArgs } : {}),
      ...(o.trafficPortOffset > 0 ? { trafficPortOffset: o.trafficPortOffset } : {}),
      // Per cluster: records are keyed by target, which two clusters on one host share.
      ...(o.stateDir ? { stateDir: o.stateDir } : { stateSubdir: needs.clusterName }),
      logger,
    });
  }
  if (!o.image) throw new OptionError("--agent-image", "the sidecar provisioner needs the agent image");
  return new SidecarAgentProvisioner({
    kubeConfig,
    agentImage: o.image,
    lingerSeconds: o.lingerSeconds,
    ...(o.redirectImage ? { redirectImage: o.redirectImage } : {}),
    ...(o.tlsSecret ? { agentTlsSecret: o.tlsSecret } : {}),
    logger,
  });
}

export const memberFeature: Feature<AgentOptions, MemberNeeds, { member: MemberController }> = {
  name: "member sessions",
  runsIn: ["member"],
  flags: agentFlags,
  start(o, needs) {
    const member = new MemberController({
      kubeConfig: needs.kubeConfig,
      routerEndpoint: needs.routerEndpoint,
      provisioner: provisionerFor(o, needs),
      routes: needs.routes,
      secretNamespace: needs.namespace,
      allowList: needs.allowList,
      ...(o.caPem ? { agentCaPem: o.caPem } : {}),
      ...(o.tlsServerName ? { agentServerName: o.tlsServerName } : {}),
      markRoutesReady: needs.markRoutesReady,
      queueSplitting: needs.queueSplitting,
      logger: needs.logger,
      metrics: needs.controllerMetrics,
    });
    return { member, lead: (leading) => member.start(leading) };
  },
};
