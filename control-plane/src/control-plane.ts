// The control-plane process as a list of parts wired together: the RouteDiscovery gRPC
// server (fed by a snapshot cache), the /metrics /healthz /readyz server, and by mode
//   primary — the cluster registry (config, remote credentials, health, operator status)
//             and the MultiClusterSession lifecycle;
//   member  — the ClusterSession reconciler and its agent provisioner;
//   both    — all of it.
// Leader-only work (status writes, reconcilers) runs on one Lease: the cluster registry's
// in primary/both mode, a member Lease otherwise. Every replica serves RouteDiscovery;
// a replica that is not leading has no table yet and refuses routers with UNAVAILABLE,
// so they retry until they reach the leader.
import { StopDeadline } from "../../lib/stop-deadline.js";
import { KubeConfig } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { Registry } from "prom-client";
import { OptionError } from "../../lib/option-error.js";
import type { TargetKind } from "../../proto/api/v1alpha1/index.js";
import type { SessionAllowListOptions } from "./allow-list/index.js";
import type { ControlPlaneOptions } from "./control-plane-options.js";
import { reuseConnections } from "./clusters/connection-reuse.js";
import { HealthServer } from "./health-server.js";
import { LiveSessionCounts } from "./live-session-counts.js";
import { runOperatorIdentity } from "./operator-identity.js";
import { LeaseElector } from "./leader/lease-elector.js";
import { ClusterRegistryMetrics } from "./metrics/cluster-registry-metrics.js";
import {
  MemberController,
  ProcessAgentProvisioner,
  SidecarAgentProvisioner,
  type AgentProvisioner,
} from "./member/index.js";
import { ClusterRegistry } from "./primary/cluster-registry.js";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
  stopServingRoutesWhenLeadershipEnds,
  TokenReviewAuthenticator,
} from "./route-discovery/index.js";
import { ControllerMetrics, installCrds } from "./runtime/index.js";
import { branchingParts } from "./branching/branching-parts.js";
import { queueSplitParts } from "./queues/queue-split-parts.js";
import { injectionPart } from "./injection/injection-part.js";
import {
  HeartbeatTracker,
  SessionController,
  SessionMetrics,
  registryWorkloadClusters,
} from "./primary/index.js";

export interface RunningControlPlane {
  /** Bound RouteDiscovery port and URL (useful with port 0). */
  grpc: { port: number; url: string };
  /** Bound metrics/health port. */
  metricsPort: number;
  /** Resolves when the process has stopped (after `signal` aborted). */
  done: Promise<void>;
  /** The parts still running, by name: main.ts cuts a stop that hangs short (lib/stop-deadline.ts). */
  stopping: StopDeadline;
}

export function loadKubeConfig(path: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return reuseConnections(kc);
}

function provisionerFor(o: ControlPlaneOptions, kc: KubeConfig, logger: Logger): AgentProvisioner {
  if (o.agentProvisioner === "process") {
    return new ProcessAgentProvisioner({
      kubeconfigPath: o.agentKubeconfig!,
      ...(o.agentOutboundBind ? { outboundBind: o.agentOutboundBind } : {}),
      ...(o.agentExtraArgs.length > 0 ? { extraArgs: o.agentExtraArgs } : {}),
      ...(o.agentTrafficPortOffset > 0 ? { trafficPortOffset: o.agentTrafficPortOffset } : {}),
      // Per cluster: records are keyed by target, which two clusters on one host share.
      ...(o.agentStateDir ? { stateDir: o.agentStateDir } : { stateSubdir: o.clusterName }),
      logger,
    });
  }
  if (!o.agentImage) throw new OptionError("--agent-image", "the sidecar provisioner needs the agent image");
  return new SidecarAgentProvisioner({
    kubeConfig: kc,
    agentImage: o.agentImage,
    lingerSeconds: o.agentLingerSeconds,
    ...(o.redirectImage ? { redirectImage: o.redirectImage } : {}),
    ...(o.agentTlsSecret ? { agentTlsSecret: o.agentTlsSecret } : {}),
    logger,
  });
}

/** Starts every part for `o.mode`; stops them all when `signal` aborts. */
export async function startControlPlane(
  o: ControlPlaneOptions,
  signal: AbortSignal,
  logger: Logger = pino({ level: o.logLevel }),
): Promise<RunningControlPlane> {
  const kc = loadKubeConfig(o.kubeconfig);
  const registry = new Registry();
  if (o.installCrds) await installCrds(kc);

  const routes = new RouteSnapshotCache();
  const authenticator = new RouterAuthenticator({
    ...(o.routerServiceAccounts.length > 0
      ? {
          bearer: new TokenReviewAuthenticator({
            kubeConfig: kc,
            allowedServiceAccounts: o.routerServiceAccounts,
            ...(o.routerTokenAudience ? { audiences: [o.routerTokenAudience] } : {}),
          }),
        }
      : {}),
    ...(o.tls?.clientCaPem ? { clientCertificate: {} } : {}),
  });
  const streams = new RouteDiscoveryStreamServer({ cache: routes, authenticator, logger, registry });
  const grpcServer = new RouteDiscoveryServer({
    streams,
    host: o.grpcListen.host,
    port: o.grpcListen.port,
    maxConnectionAgeMs: o.maxConnectionAgeMs,
    ...(o.tls ? { tls: o.tls } : { plaintext: true }),
  });
  const heartbeat = new HeartbeatTracker();
  streams.onLiveSessions((report) => heartbeat.observe(report));
  const controllerMetrics = new ControllerMetrics(registry);

  const isMember = o.mode === "member" || o.mode === "both";
  const isPrimary = o.mode === "primary" || o.mode === "both";
  // One allow-list, enforced by the Primary on parents and by the member on every ClusterSession.
  const allowList: SessionAllowListOptions = {
    ...(o.allowedNamespaces.length > 0 ? { namespaces: o.allowedNamespaces } : {}),
    ...(o.allowedTargetKinds.length > 0 ? { targetKinds: o.allowedTargetKinds as TargetKind[] } : {}),
    ...(o.allowedTargets.length > 0 ? { targets: o.allowedTargets } : {}),
  };
  const member = isMember
    ? new MemberController({
        kubeConfig: kc,
        routerEndpoint: o.routerEndpoint!,
        provisioner: provisionerFor(o, kc, logger),
        routes,
        secretNamespace: o.namespace,
        allowList,
        ...(o.agentCaPem ? { agentCaPem: o.agentCaPem } : {}),
        ...(o.agentTlsServerName ? { agentServerName: o.agentTlsServerName } : {}),
        // With a Primary in the same process, the session controller publishes the table.
        markRoutesReady: !isPrimary,
        queueSplitting: o.queues.splitting,
        logger,
        metrics: controllerMetrics,
      })
    : undefined;
  // Single-cluster sessions have no Primary to renew them: routers' reports do.
  if (member) {
    streams.onLiveSessions((report) => {
      member
        .observeLiveSessions(report.sessionIds)
        .catch((err: Error) => logger.warn({ err: err.message }, "renewing single-cluster sessions failed"));
    });
  }
  const leaderWork: Array<(leading: AbortSignal) => Promise<void>> = [];
  if (member) leaderWork.push((leading) => member.start(leading));
  const parts: Promise<void>[] = [];
  const stopping = new StopDeadline();
  let clusterRegistry: ClusterRegistry | undefined;
  leaderWork.push((leading) =>
    runOperatorIdentity(
      kc,
      {
        mode: o.mode,
        clusterName: o.clusterName,
        routerEndpoint: o.routerEndpoint,
        defaultNamespace: o.allowedNamespaces[0] ?? "default",
        sqsSplitting: isMember && o.queues.splitting,
        // Advertise MultiClusterPrimary only while the configuration in force enables it.
        ...(isPrimary ? { multiClusterEnabled: () => clusterRegistry?.config()?.enabled } : {}),
        sessions: new LiveSessionCounts({
          kubeConfig: kc,
          parents: isPrimary,
          ...(member ? { children: member.sessions } : {}),
          logger,
        }),
        ...(member ? { agents: () => member.agents() } : {}),
      },
      leading,
      logger,
    ),
  );
  // Readiness: the leader once its table is complete; a standby at once. A standby never
  // completes a table, and a Deployment whose standby is never Ready never finishes a
  // rollout (helm --wait, kubectl rollout status, every upgrade with maxUnavailable 0). A
  // router that reaches a standby through the Service is refused (UNAVAILABLE) and reconnects
  // on a fresh connection until it lands on the leader.
  let leadingNow: AbortSignal | undefined;
  const onStartedLeading = (leading: AbortSignal) => {
    leadingNow = leading;
    logger.info({ identity: o.identity }, "leading");
    stopServingRoutesWhenLeadershipEnds(leading, routes, streams);
    for (const work of leaderWork) {
      work(leading).catch((err: Error) => logger.error({ err: err.message }, "leader work failed"));
    }
  };
  if (isPrimary) {
    clusterRegistry = new ClusterRegistry({
      kubeConfig: kc,
      namespace: o.namespace,
      identity: o.identity,
      configMapName: o.configMap,
      checkIntervalMs: o.healthCheckIntervalMs,
      leaseDurationMs: o.leaseDurationMs,
      renewDeadlineMs: o.renewDeadlineMs,
      retryPeriodMs: o.retryPeriodMs,
      logger,
      metrics: new ClusterRegistryMetrics(registry),
      onStartedLeading,
    });
    const sessions = new SessionController({
      primaryKubeConfig: kc,
      clusters: registryWorkloadClusters(clusterRegistry, kc),
      heartbeat,
      routes,
      ...(o.gatewayCaPem ? { gatewayCaPem: o.gatewayCaPem } : {}),
      allowList,
      logger,
      metrics: new SessionMetrics(registry),
      controllerMetrics,
    });
    leaderWork.push((leading) => sessions.start(leading));
    parts.push(stopping.track("cluster registry", clusterRegistry.start(signal)));
  } else {
    const elector = new LeaseElector({
      kubeConfig: kc,
      namespace: o.namespace,
      name: "switchyard-member",
      identity: o.identity,
      leaseDurationMs: o.leaseDurationMs,
      renewDeadlineMs: o.renewDeadlineMs,
      retryPeriodMs: o.retryPeriodMs,
      logger,
      onStartedLeading,
    });
    parts.push(stopping.track("member Lease", elector.start(signal)));
  }

  // SQS queue splitting: this member's splitters, per leadership term.
  const queueSplits =
    isMember && o.queues.splitting ? queueSplitParts(o, kc, registry, controllerMetrics, logger) : undefined;
  if (queueSplits) leaderWork.push((leading) => queueSplits.start(leading));

  // Database branching: the controllers this cluster runs, decided once the configuration is known.
  const branching = branchingParts({
    options: o,
    kubeConfig: kc,
    clusterRegistry,
    registry,
    controllerMetrics,
    logger,
  });
  leaderWork.push((leading) => branching.leaderWork(leading));
  parts.push(
    stopping.track(
      "branch placement",
      branching.placement.then(() => undefined),
    ),
  );

  // Pods born with the agent: served by every replica (no Lease), stopped with the process.
  if (isMember && o.injectionListen)
    parts.push(
      stopping.track("admission webhook", injectionPart(o, kc, allowList, registry, logger).start(signal)),
    );

  const grpc = await grpcServer.listen();
  const health = new HealthServer({
    registry,
    host: o.metricsListen.host,
    port: o.metricsListen.port,
    ready: () => (leadingNow && !leadingNow.aborted ? routes.ready() : true),
  });
  const metricsPort = await health.listen();
  logger.info({ mode: o.mode, grpc: grpc.url, metricsPort }, "control plane started");
  const stopped = new Promise<void>((resolve) =>
    signal.aborted ? resolve() : signal.addEventListener("abort", () => resolve(), { once: true }),
  );
  // The process exits once its parts are done: splitters first forward what they received.
  if (queueSplits)
    parts.push(
      stopping.track(
        "queue splitters",
        stopped.then(() => queueSplits.idle()),
      ),
    );
  parts.push(
    stopping.track(
      "RouteDiscovery and health servers",
      stopped.then(() => Promise.all([grpcServer.close(), health.close()])).then(() => undefined),
    ),
  );
  const done = Promise.all(parts).then(() => undefined);
  // A failed part (e.g. an invalid configuration at start-up) stops the process.
  return { grpc, metricsPort, done, stopping };
}
