// The control-plane process: the RouteDiscovery gRPC server (fed by a snapshot cache), the
// /metrics /healthz /readyz server, and the features its mode and flags turn on, each built
// through the runtime's seam (runtime/feature.ts) from its own options:
//   primary — the cluster registry (config, remote credentials, health, operator status)
//             and the MultiClusterSession lifecycle (primary/sessions-feature.ts);
//   member  — the ClusterSession controller and its agent provisioner (member/member-feature.ts),
//             queue splitting (queues/), the admission webhook (injection/);
//   both    — all of it; database branching (branching/) on either.
// Leader-only work runs in the terms of one Lease (runtime/leadership-terms.ts): the cluster
// registry's in primary/both mode, a member Lease otherwise. Every replica serves
// RouteDiscovery; a replica that is not leading has no table yet and refuses routers with
// UNAVAILABLE, so they retry until they reach the leader.
import { StopDeadline } from "../../lib/stop-deadline.js";
import { untilAborted } from "../../lib/abortable-sleep.js";
import { KubeConfig } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { Registry } from "prom-client";
import type { TargetKind } from "../../proto/api/v1alpha1/index.js";
import type { SessionAllowListOptions } from "./allow-list/index.js";
import { branchingFeature } from "./branching/branching-feature.js";
import { reuseConnections } from "./clusters/connection-reuse.js";
import type { ControlPlaneOptions } from "./control-plane-options.js";
import { HealthServer } from "./health-server.js";
import { injectionFeature } from "./injection/injection-feature.js";
import { LeaseElector } from "./leader/lease-elector.js";
import { LiveSessionCounts } from "./live-session-counts.js";
import { memberFeature } from "./member/member-feature.js";
import { runOperatorIdentity } from "./operator-identity.js";
import { HeartbeatTracker } from "./primary/index.js";
import { sessionsFeature } from "./primary/sessions-feature.js";
import { queueSplitFeature } from "./queues/queue-split-feature.js";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
  stopServingRoutesWhenLeadershipEnds,
  TokenReviewAuthenticator,
} from "./route-discovery/index.js";
import {
  ControllerMetrics,
  featureRuns,
  installCrds,
  LeadershipTerms,
  playsRole,
  runFeatures,
  type RunningFeature,
} from "./runtime/index.js";

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
  const common = { kubeConfig: kc, registry, controllerMetrics, logger };

  const isPrimary = playsRole(o.mode, "primary");
  // One allow-list, enforced by the Primary on parents and by the member on every ClusterSession.
  const allowList: SessionAllowListOptions = {
    ...(o.allowedNamespaces.length > 0 ? { namespaces: o.allowedNamespaces } : {}),
    ...(o.allowedTargetKinds.length > 0 ? { targetKinds: o.allowedTargetKinds as TargetKind[] } : {}),
    ...(o.allowedTargets.length > 0 ? { targets: o.allowedTargets } : {}),
  };
  const terms = new LeadershipTerms(logger);
  const lease = {
    leaseDurationMs: o.leaseDurationMs,
    renewDeadlineMs: o.renewDeadlineMs,
    retryPeriodMs: o.retryPeriodMs,
  };
  const started: Array<readonly [string, RunningFeature]> = [];

  // Routes are served by the leader only. Readiness: the leader once its table is complete; a
  // standby at once. A standby never completes a table, and a Deployment whose standby is
  // never Ready never finishes a rollout (helm --wait, kubectl rollout status, every upgrade
  // with maxUnavailable 0). A router that reaches a standby through the Service is refused
  // (UNAVAILABLE) and reconnects on a fresh connection until it lands on the leader.
  let leadingNow: AbortSignal | undefined;
  started.push([
    "routing tables",
    {
      lead: (leading) => {
        leadingNow = leading;
        logger.info({ identity: o.identity }, "leading");
        stopServingRoutesWhenLeadershipEnds(leading, routes, streams);
        return untilAborted(leading);
      },
    },
  ]);

  // The features this process runs, by its mode and flags; each declares its own.
  const primary = featureRuns(sessionsFeature, o.mode, o.primary)
    ? sessionsFeature.start(o.primary, {
        ...common,
        namespace: o.namespace,
        identity: o.identity,
        lease,
        onStartedLeading: terms.startTerm,
        heartbeat,
        routes,
        allowList,
      })
    : undefined;
  if (primary) started.push([sessionsFeature.name, primary]);
  const queueSplitting = featureRuns(queueSplitFeature, o.mode, o.queues);
  const member = featureRuns(memberFeature, o.mode, o.agents)
    ? memberFeature.start(o.agents, {
        ...common,
        clusterName: o.clusterName,
        namespace: o.namespace,
        routerEndpoint: o.routerEndpoint!,
        routes,
        allowList,
        // With a Primary in the same process, the session controller publishes the table.
        markRoutesReady: !isPrimary,
        queueSplitting,
      })
    : undefined;
  if (member) {
    started.push([memberFeature.name, member]);
    // Single-cluster sessions have no Primary to renew them: routers' reports do.
    streams.onLiveSessions((report) => {
      member.member
        .observeLiveSessions(report.sessionIds)
        .catch((err: Error) => logger.warn({ err: err.message }, "renewing single-cluster sessions failed"));
    });
  }
  if (queueSplitting)
    started.push([
      queueSplitFeature.name,
      queueSplitFeature.start(o.queues, { ...common, clusterName: o.clusterName }),
    ]);
  const clusterRegistry = primary?.clusterRegistry;
  if (featureRuns(branchingFeature, o.mode, o.branching))
    started.push([
      branchingFeature.name,
      branchingFeature.start(o.branching, { ...common, mode: o.mode, clusterRegistry }),
    ]);
  if (featureRuns(injectionFeature, o.mode, o.injection))
    started.push([
      injectionFeature.name,
      injectionFeature.start(o.injection, {
        ...common,
        tls: o.tls,
        agent: o.agents,
        allowList,
        namespace: o.namespace,
      }),
    ]);
  started.push([
    "operator identity",
    {
      lead: (leading) =>
        runOperatorIdentity(
          kc,
          {
            mode: o.mode,
            clusterName: o.clusterName,
            routerEndpoint: o.routerEndpoint,
            defaultNamespace: o.allowedNamespaces[0] ?? "default",
            sqsSplitting: queueSplitting,
            // Advertise MultiClusterPrimary only while the configuration in force enables it.
            ...(clusterRegistry ? { multiClusterEnabled: () => clusterRegistry.config()?.enabled } : {}),
            sessions: new LiveSessionCounts({
              kubeConfig: kc,
              parents: isPrimary,
              ...(member ? { children: member.member.sessions } : {}),
              logger,
            }),
            ...(member ? { agents: () => member.member.agents() } : {}),
          },
          leading,
          logger,
        ),
    },
  ]);
  // Leadership: a Primary's registry holds its Lease; a member alone holds one of its own.
  if (!primary) {
    const elector = new LeaseElector({
      kubeConfig: kc,
      namespace: o.namespace,
      name: "switchyard-member",
      identity: o.identity,
      ...lease,
      logger,
      onStartedLeading: terms.startTerm,
    });
    started.push(["member Lease", { serve: (s) => elector.start(s) }]);
  }
  const stopping = new StopDeadline();
  const parts = runFeatures(started, { signal, terms, stopping });

  const grpc = await grpcServer.listen();
  const health = new HealthServer({
    registry,
    host: o.metricsListen.host,
    port: o.metricsListen.port,
    ready: () => (leadingNow && !leadingNow.aborted ? routes.ready() : true),
  });
  const metricsPort = await health.listen();
  logger.info({ mode: o.mode, grpc: grpc.url, metricsPort }, "control plane started");
  parts.push(
    stopping.track(
      "RouteDiscovery and health servers",
      untilAborted(signal)
        .then(() => Promise.all([grpcServer.close(), health.close()]))
        .then(() => undefined),
    ),
  );
  const done = Promise.all(parts).then(() => undefined);
  // A failed part (e.g. an invalid configuration at start-up) stops the process.
  return { grpc, metricsPort, done, stopping };
}
