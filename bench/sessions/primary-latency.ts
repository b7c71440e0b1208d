// The Primary's share of session start-up, on loopback with three real API servers, the
// real ClusterRegistry (mTLS to east and west), the SessionController in this process and
// two RouteDiscovery clients over gRPC/TLS:
//   create -> every child created      (Primary: finalizer, Secret, intent in status, creates)
//   last child Ready -> parent Ready   (Primary: mirror children into the parent)
//   parent Ready -> table on 2 routers (Primary: route build + RouteDiscovery push)
// Members are an event-driven stand-in that marks each child Ready as soon as it sees it,
// so member and agent time are excluded. Then N sessions at once: total time to all Ready
// and heap per session (cleaner with NODE_OPTIONS=--expose-gc). Figures only: no goal is
// set for these yet. Uses the control-plane suite's fixtures (remote-fixtures.ts).
import { createHash, randomBytes } from "node:crypto";
import { RbacAuthorizationV1Api, type KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import {
  clusterSessionClient,
  clusterSessionCrd,
  multiClusterSessionClient,
  multiClusterSessionCrd,
  type ClusterSession,
  type MultiClusterSession,
} from "../../proto/api/v1alpha1/index.js";
import { ClusterRegistry } from "../../control-plane/src/primary/cluster-registry.js";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
} from "../../control-plane/src/route-discovery/index.js";
import {
  ControllerMetrics,
  customResourceInformer,
  installCrds,
} from "../../control-plane/src/runtime/index.js";
import {
  HeartbeatTracker,
  SessionController,
  registryWorkloadClusters,
} from "../../control-plane/src/primary/index.js";
import { RouteDiscoveryClient, type RouteDelta } from "../../data-plane/router/src/route-discovery-client.js";
import { createCertificateAuthority, startClusterSet } from "../../test/env/index.js";
import {
  NS,
  b64,
  ensureNamespace,
  putConfigMap,
  putCredentialSecret,
} from "../../test/integration/control-plane/remote-fixtures.js";
import { parseSessionKey } from "../../proto/session-endpoint.js";
import { eventually } from "../../test/support/poll.js";
import { pct, round, summary, writeResult } from "../support/stats-support.js";

export interface PrimaryLatencyBenchOptions {
  /** Sessions created one after another (the per-step latencies). */
  sequential: number;
  /** Sessions created at once afterwards (total time, heap per session). */
  concurrent: number;
}

export const defaultPrimaryLatencyBench: PrimaryLatencyBenchOptions = { sequential: 40, concurrent: 200 };

const CLUSTERS = ["east", "primary", "west"] as const;
const APP_NS = "shop";

const fmt = (xs: number[]) =>
  `p50 ${pct(xs, 50).toFixed(1)} ms, p99 ${pct(xs, 99).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms`;

export async function runPrimaryLatencyBench(
  o: PrimaryLatencyBenchOptions = defaultPrimaryLatencyBench,
): Promise<void> {
  const set = await startClusterSet({ clusters: [...CLUSTERS], controllerManager: false });
  const stop = new AbortController();
  try {
    const kcs = Object.fromEntries(CLUSTERS.map((c) => [c, set.get(c).kubeConfig()])) as Record<
      string,
      KubeConfig
    >;
    for (const c of CLUSTERS) {
      await installCrds(kcs[c]!);
      await ensureNamespace(kcs[c]!, APP_NS);
    }
    await ensureNamespace(kcs.primary!, NS);
    for (const c of ["east", "west"]) {
      const rbac = kcs[c]!.makeApiClient(RbacAuthorizationV1Api);
      await rbac.createClusterRoleBinding({
        body: {
          metadata: { name: "primary-admin" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
          subjects: [{ kind: "Group", name: "switchyard-primaries", apiGroup: "rbac.authorization.k8s.io" }],
        },
      });
      const u = await set.get(c).mintUser("switchyard-primary", ["switchyard-primaries"]);
      await putCredentialSecret(kcs.primary!, c, { "tls.crt": u.certPem, "tls.key": u.keyPem });
    }
    const remote = (c: string) => ({
      authType: "mtls",
      server: set.get(c).server,
      caData: b64(set.get(c).caPem),
    });
    await putConfigMap(
      kcs.primary!,
      "switchyard-clusters",
      stringify({
        enabled: true,
        clusterName: "primary",
        defaultCluster: "east",
        managementOnly: false,
        clusters: { east: remote("east"), west: remote("west") },
      }),
    );
    const registry = new ClusterRegistry({
      kubeConfig: kcs.primary!,
      namespace: NS,
      identity: "bench",
      checkIntervalMs: 600_000,
    });
    void registry.start(stop.signal);
    await registry.ready();

    // Event-driven stand-in members, and watches that timestamp what we measure.
    const childCreatedAt = new Map<string, number>();
    const childReadyAt = new Map<string, number>();
    const parentReadyAt = new Map<string, number>();
    for (const c of CLUSTERS) {
      const client = clusterSessionClient(kcs[c]!);
      const inf = customResourceInformer<ClusterSession>(kcs[c]!, clusterSessionCrd, { resyncMs: 0 });
      inf.subscribe((ev, s) => {
        if (ev !== "add" || s.status?.phase) return;
        childCreatedAt.set(s.metadata.name!, performance.now());
        void client
          .patchStatus(
            { namespace: s.metadata.namespace!, name: s.metadata.name! },
            { phase: "Ready", gateway: `wss://gw.${c}.test:8443`, pod: { name: "web-0" } },
          )
          .then(() => childReadyAt.set(s.metadata.name!, performance.now()))
          .catch(() => undefined);
      });
      void inf.start(stop.signal);
      await inf.waitForSync();
    }
    const parentsInf = customResourceInformer<MultiClusterSession>(kcs.primary!, multiClusterSessionCrd, {
      resyncMs: 0,
    });
    parentsInf.subscribe((_ev, p) => {
      if (p.status?.phase === "Ready" && !parentReadyAt.has(p.metadata.name!))
        parentReadyAt.set(p.metadata.name!, performance.now());
    });
    void parentsInf.start(stop.signal);
    await parentsInf.waitForSync();

    const ca = await createCertificateAuthority("bench");
    const sc = await ca.issue({ commonName: "cp", usage: "server", ipAddresses: ["127.0.0.1"] });
    const cache = new RouteSnapshotCache();
    const streams = new RouteDiscoveryStreamServer({
      cache,
      authenticator: new RouterAuthenticator({ clientCertificate: {} }),
    });
    const server = new RouteDiscoveryServer({
      streams,
      host: "127.0.0.1",
      port: 0,
      tls: { certPem: sc.certPem, keyPem: sc.keyPem, clientCaPem: ca.certPem },
    });
    const { url } = await server.listen();
    const onRouter = [new Map<string, number>(), new Map<string, number>()];
    for (const [i, seen] of onRouter.entries()) {
      const cert = await ca.issue({ commonName: `router-${i}`, usage: "client" });
      void new RouteDiscoveryClient({
        url,
        routerId: `router-${i}`,
        sink: {
          apply(d: RouteDelta) {
            const t = performance.now();
            // Routes are keyed <namespace>:<name>; the bench tracks parents by name.
            for (const r of d.upserts) {
              const name = parseSessionKey(r.sessionId)?.name ?? r.sessionId;
              if (!seen.has(name)) seen.set(name, t);
            }
          },
        },
        liveSessions: () => [],
        credentials: { tls: { ca: ca.certPem, cert: cert.certPem, key: cert.keyPem } },
      }).start(stop.signal);
    }

    const controllerMetrics = new ControllerMetrics();
    const controller = new SessionController({
      primaryKubeConfig: kcs.primary!,
      clusters: registryWorkloadClusters(registry, kcs.primary!),
      heartbeat: new HeartbeatTracker(),
      routes: cache,
      concurrency: 16,
      controllerMetrics,
    });
    void controller.start(stop.signal);

    const parents = multiClusterSessionClient(kcs.primary!);
    const create = async (ttlSeconds = 60) => {
      const name = `mc-${randomBytes(8).toString("hex")}`;
      const t0 = performance.now();
      await parents.create({
        metadata: { name, namespace: APP_NS },
        spec: {
          target: "deployment/web",
          clientKeyHash: createHash("sha256").update(name).digest("hex"),
          ttlSeconds,
        },
      });
      return { name, t0 };
    };
    // A fine interval, since the waits are what is measured; no deadline (a measurement, not a test).
    const until = (what: string, cond: () => boolean) =>
      eventually(what, cond, { timeoutMs: Infinity, intervalMs: 2 });
    const children = (name: string) => CLUSTERS.map((c) => `${name}-${c}`);

    // Warm-up: the first session also pays for connections and caches.
    console.log("clusters up; warming up");
    const warm = await create();
    await until("the warm-up session on every router", () => onRouter.every((m) => m.has(warm.name)));
    const created: number[] = [];
    const mirrored: number[] = [];
    const pushed: number[] = [];
    const total: number[] = [];
    for (let i = 0; i < o.sequential; i++) {
      const { name, t0 } = await create();
      await until(
        `session ${name} ready and on every router`,
        () =>
          onRouter.every((m) => m.has(name)) &&
          parentReadyAt.has(name) &&
          children(name).every((c) => childReadyAt.has(c)),
      );
      const lastCreated = Math.max(...children(name).map((c) => childCreatedAt.get(c)!));
      const lastReady = Math.max(...children(name).map((c) => childReadyAt.get(c)!));
      const ready = parentReadyAt.get(name)!;
      created.push(lastCreated - t0);
      mirrored.push(ready - lastReady);
      pushed.push(Math.max(...onRouter.map((m) => m.get(name)!)) - ready);
      total.push(ready - t0);
    }
    console.log(`sequential sessions: ${o.sequential} (3 workload clusters each)`);
    console.log(`  create → every child created:      ${fmt(created)}`);
    console.log(`  last child Ready → parent Ready:    ${fmt(mirrored)}`);
    console.log(`  parent Ready → table on 2 routers:  ${fmt(pushed)}`);
    console.log(`  create → Ready (instant members):  ${fmt(total)}`);

    global.gc?.();
    const heap0 = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    // A long TTL: nothing expires while the batch starts (no client heartbeats here). Created
    // 50 at a time, as many CLIs would, rather than 1 000 requests in one burst.
    const batch: Array<{ name: string; t0: number }> = [];
    for (let i = 0; i < o.concurrent; i += 50)
      batch.push(
        ...(await Promise.all(Array.from({ length: Math.min(50, o.concurrent - i) }, () => create(600)))),
      );
    const createdAllMs = performance.now() - t0;
    const progress = setInterval(() => {
      const done = batch.filter((b) => onRouter.every((m) => m.has(b.name))).length;
      console.log(
        `  ${((performance.now() - t0) / 1000).toFixed(0)} s: ${done}/${o.concurrent} on both routers`,
      );
    }, 10_000);
    await until("every session of the batch on every router", () =>
      batch.every((b) => onRouter.every((m) => m.has(b.name))),
    );
    clearInterval(progress);
    console.log(`  (all ${o.concurrent} parents created after ${(createdAllMs / 1000).toFixed(1)} s)`);
    const elapsed = performance.now() - t0;
    global.gc?.();
    const heap1 = process.memoryUsage().heapUsed;
    console.log(`concurrent sessions: ${o.concurrent}`);
    console.log(`  all Ready and on both routers after ${(elapsed / 1000).toFixed(1)} s`);
    console.log(
      `  heap growth of the whole process (control plane + routers + watches): ` +
        `${((heap1 - heap0) / o.concurrent / 1024).toFixed(1)} KiB/session${global.gc ? "" : " (NODE_OPTIONS=--expose-gc gives a cleaner figure)"}`,
    );
    const m = await controllerMetrics.registry.getMetricsAsJSON();
    for (const metric of m) {
      if (metric.name === "switchyard_reconcile_errors_total")
        for (const v of metric.values)
          console.log(`  reconcile errors ${JSON.stringify(v.labels)}: ${v.value}`);
      if (metric.name === "switchyard_reconcile_duration_seconds")
        for (const v of metric.values)
          if (String((v as { metricName?: string }).metricName).endsWith("_count"))
            console.log(`  reconciles ${JSON.stringify(v.labels)}: ${v.value}`);
    }
    const result = {
      at: new Date().toISOString(),
      options: o,
      sequentialMs: {
        createToChildrenCreated: summary(created),
        lastChildReadyToParentReady: summary(mirrored),
        parentReadyToRouters: summary(pushed),
        createToReady: summary(total),
      },
      concurrent: {
        allOnRoutersSeconds: round(elapsed / 1000),
        heapKiBPerSession: round((heap1 - heap0) / o.concurrent / 1024, 1),
        gcExposed: global.gc !== undefined,
      },
    };
    console.log(`written ${writeResult("primary-latency", result)}`);
    stop.abort();
    await server.close();
  } finally {
    stop.abort();
    await set.stop();
  }
}
