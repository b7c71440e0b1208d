// The Primary's MultiClusterSession lifecycle against real API servers: a Primary that is
// also a workload cluster, plus east (Default) and west, reached through the real
// ClusterRegistry with mTLS credentials. Members are simulated (member-simulator.ts) by
// marking children Ready or Failed on their own API servers. Routing tables travel over
// real gRPC/TLS to two RouteDiscoveryClients, which also send the live-session reports
// the heartbeat comes from.
import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import {
  CHILDREN_FINALIZER,
  LABELS,
  clusterSessionClient,
  multiClusterSessionClient,
  type ClusterSession,
  type MultiClusterSession,
  type MultiClusterSessionSpec,
} from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { LeaseElector } from "../../../control-plane/src/leader/lease-elector.js";
import { ClusterRegistry } from "../../../control-plane/src/primary/cluster-registry.js";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
} from "../../../control-plane/src/route-discovery/index.js";
import {
  HeartbeatTracker,
  SessionController,
  childSecretsName,
  registryWorkloadClusters,
  type SessionControllerOptions,
} from "../../../control-plane/src/primary/index.js";
import {
  RouteDiscoveryClient,
  type RouteDelta,
  type RouteSink,
  type SessionRoute,
} from "../../../data-plane/router/src/route-discovery-client.js";
import { SessionState } from "../../../proto/gen/route_discovery_pb.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import {
  createCertificateAuthority,
  startClusterSet,
  type CertificateAuthority,
  type ClusterSet,
} from "../../env/index.js";
import {
  NS,
  b64,
  ensureNamespace,
  putConfigMap,
  putCredentialSecret,
} from "../control-plane/remote-fixtures.js";
import { eventually } from "../../support/poll.js";
import { testScratchDir } from "../../support/scratch-dir.js";
import { RawSessionClient, UpgradeRefusedError } from "../../peers/raw-session-client.js";
import { RouterProcess } from "../router/router-process.js";
import { gatewayUrl, startMemberSimulator, type MemberSimulator } from "./member-simulator.js";

const CLUSTERS = ["east", "primary", "west"] as const;
type ClusterName = (typeof CLUSTERS)[number];
const APP_NS = "shop";
/** A second tenant's namespace, allowed like APP_NS but only for deployment/web. */
const TENANT_B = "tenant-b";
const CONFIG_MAP = "switchyard-clusters";
const CLIENT_KEY_HASH = createHash("sha256").update("the CLI's secret").digest("hex");

let set: ClusterSet;
const kcs = {} as Record<ClusterName, KubeConfig>;
let registry: ClusterRegistry;
let cache: RouteSnapshotCache;
let tracker: HeartbeatTracker;
let baseOptions: SessionControllerOptions;
const live = new Set<string>();
const sinks: TableSink[] = [];
const sims: MemberSimulator[] = [];
const stopAll = new AbortController();
const background: Promise<unknown>[] = [];
let controllerStop: AbortController;
let controllerRun: Promise<void>;
let controller: SessionController;
let server: RouteDiscoveryServer;
let discovery: { url: string; ca: CertificateAuthority };

/** The real router process on this suite's RouteDiscovery server (client certificate). Stop it. */
async function startRouterProcess(): Promise<RouterProcess> {
  const dir = testScratchDir("sy-primary-router-");
  const cert = await discovery.ca.issue({ commonName: "router-real", usage: "client" });
  for (const [file, pem] of Object.entries({
    "ca.crt": discovery.ca.certPem,
    "tls.crt": cert.certPem,
    "tls.key": cert.keyPem,
  }))
    writeFileSync(join(dir, file), pem, { mode: 0o600 });
  return RouterProcess.start(null, [
    "--control-plane",
    discovery.url,
    "--control-plane-ca",
    join(dir, "ca.crt"),
    "--client-cert",
    join(dir, "tls.crt"),
    "--client-key",
    join(dir, "tls.key"),
    "--router-id",
    "router-real",
  ]);
}

class TableSink implements RouteSink {
  readonly table = new Map<string, SessionRoute>();
  apply(d: RouteDelta): void {
    expect(d.version).not.toBe("");
    if (d.fullResync) this.table.clear();
    for (const r of d.upserts) this.table.set(r.sessionId, r);
    for (const id of d.removes) this.table.delete(id);
  }
}

function configYaml(managementOnly = false, remotes: Array<"east" | "west"> = ["east", "west"]): string {
  const remote = (c: "east" | "west") => ({
    authType: "mtls",
    server: set.get(c).server,
    caData: b64(set.get(c).caPem),
  });
  return stringify({
    enabled: true,
    clusterName: "primary",
    defaultCluster: "east",
    managementOnly,
    clusters: Object.fromEntries(remotes.map((c) => [c, remote(c)])),
  });
}

async function createDeployment(kc: KubeConfig, name: string, namespace = APP_NS): Promise<void> {
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace,
    body: {
      metadata: { name },
      spec: {
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: { containers: [{ name: "app", image: "registry.example/app:1" }] },
        },
      },
    },
  });
}

beforeAll(async () => {
  set = await startClusterSet({ clusters: [...CLUSTERS], controllerManager: false });
  for (const c of CLUSTERS) kcs[c] = set.get(c).kubeConfig();
  await Promise.all(
    CLUSTERS.map(async (c) => {
      await installCrds(kcs[c]);
      await ensureNamespace(kcs[c], APP_NS);
      await ensureNamespace(kcs[c], "other");
      await ensureNamespace(kcs[c], TENANT_B);
      await createDeployment(kcs[c], "web");
      await createDeployment(kcs[c], "web", TENANT_B);
      await createDeployment(kcs[c], "api", TENANT_B); // there, but not in the allow-list
      if (c !== "west") await createDeployment(kcs[c], "api"); // missing in west
      if (c !== "east") await createDeployment(kcs[c], "worker"); // missing in the Default cluster
    }),
  );
  await ensureNamespace(kcs.primary, NS);
  // What the chart's multiClusterMember=true would grant the Primary on each workload cluster.
  for (const c of ["east", "west"] as const) {
    const rbac = kcs[c].makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRole({
      body: {
        metadata: { name: "switchyard-child-sessions" },
        rules: [
          {
            apiGroups: ["switchyard.dev"],
            resources: ["clustersessions", "clustersessions/status"],
            verbs: ["get", "list", "watch", "create", "patch", "delete"],
          },
        ],
      },
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: "switchyard-child-sessions" },
        roleRef: {
          apiGroup: "rbac.authorization.k8s.io",
          kind: "ClusterRole",
          name: "switchyard-child-sessions",
        },
        subjects: [{ kind: "Group", name: "switchyard-primaries", apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
    const user = await set.get(c).mintUser("switchyard-primary", ["switchyard-primaries"]);
    await putCredentialSecret(kcs.primary, c, { "tls.crt": user.certPem, "tls.key": user.keyPem });
  }
  await putConfigMap(kcs.primary, CONFIG_MAP, configYaml());
  registry = new ClusterRegistry({
    kubeConfig: kcs.primary,
    namespace: NS,
    identity: "registry-0",
    configMapName: CONFIG_MAP,
    checkIntervalMs: 60_000,
    leaseName: "switchyard-registry",
  });
  background.push(registry.start(stopAll.signal));
  await registry.ready();
  for (const c of CLUSTERS) sims.push(startMemberSimulator(c, kcs[c]));

  // RouteDiscovery over real gRPC/TLS, routers authenticated by client certificate.
  const ca = await createCertificateAuthority("switchyard-primary-test");
  const serverCert = await ca.issue({
    commonName: "control-plane",
    usage: "server",
    ipAddresses: ["127.0.0.1"],
  });
  cache = new RouteSnapshotCache();
  tracker = new HeartbeatTracker({ staleAfterMs: 3_000 });
  const streams = new RouteDiscoveryStreamServer({
    cache,
    authenticator: new RouterAuthenticator({ clientCertificate: {} }),
  });
  streams.onLiveSessions((r) => tracker.observe(r));
  server = new RouteDiscoveryServer({
    streams,
    host: "127.0.0.1",
    port: 0,
    tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
  });
  const { url } = await server.listen();
  discovery = { url, ca };
  for (const id of ["router-0", "router-1"]) {
    const cert = await ca.issue({ commonName: id, usage: "client" });
    const sink = new TableSink();
    sinks.push(sink);
    const client = new RouteDiscoveryClient({
      url,
      routerId: id,
      sink,
      liveSessions: () => [...live],
      credentials: { tls: { ca: ca.certPem, cert: cert.certPem, key: cert.keyPem } },
      backoff: { initialMs: 50, maxMs: 500 },
      liveSessionsIntervalMs: 300,
    });
    background.push(client.start(stopAll.signal));
  }

  baseOptions = {
    primaryKubeConfig: kcs.primary,
    clusters: registryWorkloadClusters(registry, kcs.primary),
    heartbeat: tracker,
    routes: cache,
    allowList: { namespaces: [APP_NS, TENANT_B], targets: [`${APP_NS}/*/*`, `${TENANT_B}/deployment/web`] },
    heartbeatIntervalMs: 1_000,
    childRenewIntervalMs: 2_000,
    requestTimeoutMs: 3_000,
    resyncMs: 5_000,
    topologyCheckMs: 500,
  };
  controllerStop = new AbortController();
  controller = new SessionController(baseOptions);
  controllerRun = controller.start(controllerStop.signal);
}, 180_000);

afterAll(async () => {
  controllerStop?.abort();
  stopAll.abort();
  await Promise.allSettled([controllerRun, ...background, ...sims.map((s) => s.stop())]);
  await server?.close();
  await set?.stop();
}, 60_000);

const parents = () => multiClusterSessionClient(kcs.primary);
/** A parent's key in routing tables, live-session reports and session URLs. */
const key = (name: string, namespace = APP_NS) => sessionKey(namespace, name);
const newName = () => `mc-${randomBytes(8).toString("hex")}`;

async function createSession(
  spec: Partial<MultiClusterSessionSpec> = {},
  namespace = APP_NS,
  name = newName(),
): Promise<string> {
  await parents().create({
    metadata: { name, namespace },
    spec: { target: "deployment/web", clientKeyHash: CLIENT_KEY_HASH, ...spec },
  });
  return name;
}

const getParent = (name: string, namespace = APP_NS) => parents().get({ namespace, name });

async function waitPhase(name: string, phase: string, namespace = APP_NS): Promise<MultiClusterSession> {
  return eventually(`session ${name} ${phase}`, async () => {
    const p = await getParent(name, namespace);
    return p?.status?.phase === phase ? p : undefined;
  });
}

/** Children of `parent` on every cluster, found by label (what exists, not what status says). */
async function childrenOf(
  parent: string,
  namespace = APP_NS,
): Promise<Partial<Record<ClusterName, ClusterSession>>> {
  const out: Partial<Record<ClusterName, ClusterSession>> = {};
  for (const c of CLUSTERS) {
    const { items } = await clusterSessionClient(kcs[c]).list({
      namespace,
      labelSelector: `${LABELS.parent}=${parent}`,
    });
    expect(items.length).toBeLessThanOrEqual(1);
    if (items[0]) out[c] = items[0];
  }
  return out;
}

async function childSecrets(parent: string): Promise<Record<string, string> | undefined> {
  try {
    const s = await kcs.primary
      .makeApiClient(CoreV1Api)
      .readNamespacedSecret({ namespace: APP_NS, name: childSecretsName(parent) });
    return Object.fromEntries(
      Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString()]),
    );
  } catch {
    return undefined;
  }
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const condition = (p: MultiClusterSession, type: string) =>
  p.status?.conditions?.find((c) => c.type === type);

async function deleteAndWaitGone(name: string, namespace = APP_NS): Promise<void> {
  await parents().delete({ namespace, name });
  await eventually(`session ${name} gone`, async () => (await getParent(name, namespace)) === undefined, {
    timeoutMs: 45_000,
  });
}

describe("primary-mode session lifecycle", () => {
  it("creates a child on every workload cluster, mirrors them and becomes Ready", async () => {
    const name = await createSession({
      connectParams: {
        databaseBranches: [{ envVar: "DATABASE_URL", kind: "PgBranchDatabase", name: "orders-branch" }],
        sqsSplit: [{ queueId: "orders", messageFilter: { tenant: "^dev-.*" } }],
        outputQueues: { east: { orders: "https://sqs.example/east-orders-tmp" } },
        featureFlags: { steal: true },
      },
    });
    const parent = await waitPhase(name, "Ready");
    expect(parent.metadata.finalizers).toContain(CHILDREN_FINALIZER);
    // Its finalizer and status writes did not each wake the reconciler again. Their watch events
    // reach the controller's informer asynchronously: the Ready read above can come first.
    await eventually(
      "a watch event of the controller's own write skipped",
      () => controller.ownWriteEventsSkipped > 0,
      {
        timeoutMs: 10_000,
        intervalMs: 50,
      },
    );
    expect(condition(parent, "Ready")).toMatchObject({ status: "True", reason: "AllChildrenReady" });
    expect(condition(parent, "Degraded")?.status).toBe("False");
    expect(condition(parent, "Valid")?.status).toBe("True");
    expect(Object.keys(parent.status!.children!).sort()).toEqual([...CLUSTERS]);
    for (const c of CLUSTERS) {
      expect(parent.status!.children![c]).toEqual({
        name: `${name}-${c}`,
        ready: true,
        gateway: gatewayUrl(c),
        ...(c === "east" ? { defaultCluster: true } : {}),
      });
    }

    const secrets = await childSecrets(name);
    expect(Object.keys(secrets ?? {}).sort()).toEqual([...CLUSTERS]);
    // Secrets never appear in the parent (status or spec).
    for (const s of Object.values(secrets!)) expect(JSON.stringify(parent)).not.toContain(s);

    const children = await childrenOf(name);
    expect(Object.keys(children).sort()).toEqual([...CLUSTERS]);
    for (const c of CLUSTERS) {
      const child = children[c]!;
      expect(child.metadata.name).toBe(`${name}-${c}`);
      expect(child.metadata.labels).toMatchObject({
        [LABELS.parent]: name,
        [LABELS.primary]: "primary",
        [LABELS.cluster]: c,
      });
      expect(child.spec.parent).toEqual({
        name,
        cluster: c,
        primaryClusterId: "primary",
        ...(c === "east" ? { defaultCluster: true } : {}),
      });
      expect(child.spec.target).toBe("deployment/web");
      expect(child.spec.clientKeyHash).toBe(sha256(secrets![c]!));
      expect(child.spec.clientKeyHash).not.toBe(CLIENT_KEY_HASH);
      expect(child.spec.ttlSeconds).toBe(60);
      // Everyone gets the flags and the SQS split; only the Default child branches. Output queues
      // come from the Default child's status, never from the parent's own connectParams.
      expect(child.spec.connectParams?.outputQueues).toBeUndefined();
      expect(child.spec.connectParams?.featureFlags).toEqual({ steal: true });
      expect(child.spec.connectParams?.sqsSplit).toEqual([
        { queueId: "orders", messageFilter: { tenant: "^dev-.*" }, mode: "steal" },
      ]);
      if (c === "east") expect(child.spec.connectParams?.databaseBranches).toHaveLength(1);
      else expect(child.spec.connectParams?.databaseBranches).toBeUndefined();
    }
    // The Default child reports its output queue: every other child is told where to send,
    // and the parent shows the Default's splits (what the CLI reads).
    const out = "https://sqs.example/000000000000/sy-o-1234abcd-orders";
    await clusterSessionClient(kcs.east).patchStatus(
      { namespace: APP_NS, name: `${name}-east` },
      {
        queues: [
          {
            queueId: "orders",
            phase: "Splitting",
            envVar: "ORDERS_QUEUE_URL",
            outputQueueUrl: out,
            localValue: out,
          },
        ],
      },
    );
    await eventually("west told the Default's output queue", async () => {
      const west = (await childrenOf(name)).west!;
      return (
        JSON.stringify(west.spec.connectParams?.outputQueues) === JSON.stringify({ east: { orders: out } })
      );
    });
    expect((await childrenOf(name)).east!.spec.connectParams?.outputQueues).toBeUndefined();
    await eventually("the parent mirrors the Default's splits", async () => {
      const p = await getParent(name);
      return p?.status?.queues?.[0]?.localValue === out;
    });
    // The Primary renews each child's TTL.
    await eventually("every child renewed", async () => {
      const now = await childrenOf(name);
      return CLUSTERS.every((c) => now[c]?.status?.renewedAt !== undefined);
    });
    await deleteAndWaitGone(name);
    expect(await childrenOf(name)).toEqual({});
    expect(await childSecrets(name)).toBeUndefined();
  });

  it("pushes a Ready session's table to both routers and removes it when the session ends", async () => {
    const name = await createSession();
    await waitPhase(name, "Ready");
    const secrets = (await childSecrets(name))!;
    for (const sink of sinks) {
      const route = await eventually(`route ${name} on a router`, () => sink.table.get(key(name)));
      expect(route.clientKeyHash).toBe(CLIENT_KEY_HASH);
      expect(route.state).toBe(SessionState.READY);
      expect(
        route.upstreams.map((u) => ({
          cluster: u.cluster,
          url: u.url,
          secret: u.secret,
          isDefault: u.isDefault,
        })),
      ).toEqual(
        CLUSTERS.map((c) => ({
          cluster: c,
          url: gatewayUrl(c),
          secret: secrets[c],
          isDefault: c === "east",
        })),
      );
    }
    await parents().delete({ namespace: APP_NS, name });
    for (const sink of sinks) await eventually(`route ${name} removed`, () => !sink.table.has(key(name)));
    await eventually(`session ${name} gone`, async () => (await getParent(name)) === undefined);
  });

  it("fails the whole session under AllOrNothing when a target is missing in one cluster", async () => {
    const name = await createSession({ target: "deployment/api" });
    const parent = await waitPhase(name, "Failed");
    expect(condition(parent, "Ready")).toMatchObject({ status: "False", reason: "ChildFailed" });
    expect(parent.status!.children!.west).toMatchObject({ ready: false });
    expect(parent.status!.children!.west!.error).toMatch(/TargetNotFound/);
    // West may fail before east's child is up; the failed parent still follows its children.
    const settled = await eventually("east's child ready in the failed parent", async () => {
      const p = await getParent(name);
      return p?.status?.children?.east?.ready === true ? p : undefined;
    });
    expect(settled.status!.phase).toBe("Failed");
    expect(cache.get(key(name))).toBeUndefined();
    await deleteAndWaitGone(name);
    expect(await childrenOf(name)).toEqual({});
  });

  it("runs Degraded without the failed child under BestEffort, but fails when the Default child fails", async () => {
    const name = await createSession({ target: "deployment/api", failurePolicy: "BestEffort" });
    const parent = await waitPhase(name, "Ready");
    expect(condition(parent, "Degraded")).toMatchObject({ status: "True", reason: "ChildrenFailed" });
    expect(condition(parent, "Degraded")!.message).toMatch(/west/);
    expect(parent.status!.children!.west!.error).toMatch(/TargetNotFound/);
    // Ready needs the Default child; the other healthy child may join the route a moment later.
    for (const sink of sinks) {
      const route = await eventually(`route ${name} with east and primary`, () => {
        const r = sink.table.get(key(name));
        return r && r.upstreams.length === 2 ? r : undefined;
      });
      expect(route.upstreams.map((u) => u.cluster)).toEqual(["east", "primary"]);
    }

    const noDefault = await createSession({ target: "deployment/worker", failurePolicy: "BestEffort" });
    const failed = await waitPhase(noDefault, "Failed");
    expect(condition(failed, "Ready")).toMatchObject({ status: "False", reason: "DefaultChildFailed" });
    await Promise.all([deleteAndWaitGone(name), deleteAndWaitGone(noDefault)]);
  });

  it("creates no child on a management-only Primary", async () => {
    await putConfigMap(kcs.primary, CONFIG_MAP, configYaml(true));
    await eventually("registry sees managementOnly", () => registry.config()?.managementOnly === true);
    try {
      const name = await createSession();
      const parent = await waitPhase(name, "Ready");
      expect(Object.keys(parent.status!.children!).sort()).toEqual(["east", "west"]);
      expect(Object.keys(await childrenOf(name)).sort()).toEqual(["east", "west"]);
      expect(Object.keys((await childSecrets(name))!).sort()).toEqual(["east", "west"]);
      await deleteAndWaitGone(name);
    } finally {
      await putConfigMap(kcs.primary, CONFIG_MAP, configYaml(false));
      await eventually("registry sees managementOnly off", () => registry.config()?.managementOnly === false);
    }
  });

  it("refuses a session outside the namespace allow-list and creates nothing", async () => {
    const name = await createSession({}, "other");
    const parent = await waitPhase(name, "Failed", "other");
    expect(condition(parent, "Valid")).toMatchObject({ status: "False", reason: "NamespaceNotAllowed" });
    expect(condition(parent, "Valid")!.message).toMatch(
      /namespace other is not in the operator's session allow-list/,
    );
    expect(parent.status?.children).toBeUndefined();
    expect(await childrenOf(name, "other")).toEqual({});
    expect(cache.get(key(name, "other"))).toBeUndefined();
    await deleteAndWaitGone(name, "other");
  });

  it("refuses a target outside the allow-list's patterns and creates nothing", async () => {
    const name = await createSession({ target: "deployment/api" }, TENANT_B);
    const parent = await waitPhase(name, "Failed", TENANT_B);
    expect(condition(parent, "Valid")).toMatchObject({ status: "False", reason: "TargetNotAllowed" });
    expect(condition(parent, "Valid")!.message).toMatch(
      /^spec\.target: target tenant-b\/deployment\/api matches none of the operator's allowed targets \(shop\/\*\/\*, tenant-b\/deployment\/web\).*--allowed-targets/,
    );
    expect(parent.status?.children).toBeUndefined();
    expect(await childrenOf(name, TENANT_B)).toEqual({});
    expect(cache.get(key(name, TENANT_B))).toBeUndefined();
    await deleteAndWaitGone(name, TENANT_B);
  });

  it("never lets a same-named session of another namespace replace, remove, keep alive or attach to a route", async () => {
    const name = newName();
    const keyA = key(name);
    const keyB = key(name, TENANT_B);
    const secretA = "tenant-a-secret";
    const secretB = "tenant-b-secret";
    // Both live while the checks below run; TTLs are short so that a missing heartbeat shows.
    live.add(keyA);
    await createSession({ ttlSeconds: 5, clientKeyHash: sha256(secretA) }, APP_NS, name);
    await waitPhase(name, "Ready");
    const routeA = await Promise.all(
      sinks.map((sink) => eventually(`${keyA} on a router`, () => sink.table.get(keyA))),
    );
    const expectRouteA = () => {
      for (const [i, sink] of sinks.entries()) expect(sink.table.get(keyA)).toEqual(routeA[i]);
    };
    expect(routeA[0]!.clientKeyHash).toBe(sha256(secretA));

    // Refused by the allow-list: its reconciles and its deletion leave tenant A's route alone.
    await createSession({}, "other", name);
    await waitPhase(name, "Failed", "other");
    await deleteAndWaitGone(name, "other");
    expectRouteA();
    expect(cache.get(key(name, "other"))).toBeUndefined();

    // Allowed in tenant-b: a route of its own, with its own hash and children's secrets.
    live.add(keyB);
    await createSession({ ttlSeconds: 5, clientKeyHash: sha256(secretB) }, TENANT_B, name);
    await waitPhase(name, "Ready", TENANT_B);
    const routeB = await eventually(`${keyB} on a router`, () => sinks[0]!.table.get(keyB));
    expect(routeB.clientKeyHash).toBe(sha256(secretB));
    expect(routeB.upstreams.map((u) => u.secret)).not.toEqual(routeA[0]!.upstreams.map((u) => u.secret));
    expectRouteA();

    // Attach, through a real router fed by the same control plane: each secret opens its own session only.
    const router = await startRouterProcess();
    try {
      await eventually("the real router's table", async () => (await fetch(`${router.base}/readyz`)).ok);
      const upgrade = async (id: string, secret: string) =>
        RawSessionClient.connect(router.sessionUrl(id), secret, { hello: false }).then(
          (c) => (c.close(), 101),
          (e: unknown) => (e instanceof UpgradeRefusedError ? e.status : -1),
        );
      expect(await upgrade(keyA, secretA)).toBe(101);
      expect(await upgrade(keyB, secretB)).toBe(101);
      expect([401, 404]).toContain(await upgrade(keyA, secretB));
      expect([401, 404]).toContain(await upgrade(keyB, secretA));
      expect([401, 404]).toContain(await upgrade(name, secretA));
      expect([401, 404]).toContain(await upgrade(name, secretB));
    } finally {
      await router.stop();
    }

    // Only tenant B's client is live: B stays, A expires — and B's heartbeat never spared A.
    live.delete(keyA);
    const createdB = Date.parse(String((await getParent(name, TENANT_B))!.metadata.creationTimestamp));
    await eventually(`${keyA} expired`, async () => (await getParent(name)) === undefined, {
      timeoutMs: 30_000,
    });
    for (const sink of sinks) await eventually(`${keyA} removed`, () => !sink.table.has(keyA));
    const alive = await eventually(
      "tenant B kept alive past its TTL",
      async () => {
        const p = await getParent(name, TENANT_B);
        expect(p).toBeDefined();
        return Date.parse(p!.status?.connectedTimestamp ?? "") > createdB + 8_000 && p;
      },
      { timeoutMs: 30_000 },
    );
    expect(alive.status?.phase).toBe("Ready");
    for (const sink of sinks) expect(sink.table.get(keyB)?.clientKeyHash).toBe(sha256(secretB));
    live.delete(keyB);
    await deleteAndWaitGone(name, TENANT_B);
    for (const sink of sinks) await eventually(`${keyB} removed`, () => !sink.table.has(keyB));
  });

  it("keeps a session alive while a router reports a client, and deletes it and its children after the TTL", async () => {
    const name = await createSession({ ttlSeconds: 5 });
    const created = Date.parse(String((await waitPhase(name, "Ready")).metadata.creationTimestamp));
    live.add(key(name));
    // Heartbeats keep it alive well past creation + TTL.
    await eventually(
      "heartbeat beyond the TTL",
      async () => {
        const p = await getParent(name);
        expect(p).toBeDefined();
        return Date.parse(p!.status?.connectedTimestamp ?? "") > created + 8_000;
      },
      { timeoutMs: 30_000 },
    );
    expect(Object.keys(await childrenOf(name)).sort()).toEqual([...CLUSTERS]);
    live.delete(key(name));
    await eventually(`expired session ${name} deleted`, async () => (await getParent(name)) === undefined, {
      timeoutMs: 30_000,
    });
    expect(await childrenOf(name)).toEqual({});
    for (const sink of sinks) await eventually(`route ${name} removed`, () => !sink.table.has(key(name)));
    const metrics = await controller.sessionMetrics.registry.metrics();
    expect(metrics).toMatch(/^switchyard_session_expirations_total [1-9]/m);
    expect(metrics).toMatch(/^switchyard_session_heartbeat_writes_total [1-9]/m);
    expect(metrics).toMatch(/^switchyard_session_children_created_total\{cluster="west"\} [1-9]/m);
    expect(metrics).not.toContain(name);
  });

  it("keeps a Ready session routed through a workload cluster's API outage, Degraded, and recovers after", async () => {
    const name = await createSession();
    live.add(key(name)); // a client stays attached throughout: the session outlives its TTL
    await waitPhase(name, "Ready");
    for (const sink of sinks)
      await eventually("route with three upstreams", () => sink.table.get(key(name))?.upstreams.length === 3);
    await set.get("west").stopApiServer();
    try {
      const degraded = await eventually("Degraded with west unreachable", async () => {
        const p = await getParent(name);
        const d = p?.status?.conditions?.find((c) => c.type === "Degraded");
        return d?.status === "True" && d.reason === "ClusterUnreachable" ? p : undefined;
      });
      expect(degraded.status!.phase).toBe("Ready");
      expect(degraded.status!.children!.west).toMatchObject({ ready: true, gateway: expect.any(String) });
      expect(degraded.status!.children!.west!.error).toMatch(/unreachable, routed to its last known gateway/);
      // Several rounds later the route still holds every cluster: the session never left Ready.
      await new Promise((r) => setTimeout(r, 3_000));
      const still = await getParent(name);
      expect(still?.status?.phase).toBe("Ready");
      for (const sink of sinks)
        expect(
          sink.table
            .get(key(name))
            ?.upstreams.map((u) => u.cluster)
            .sort(),
        ).toEqual([...CLUSTERS].sort());
    } finally {
      await set.get("west").startApiServer();
    }
    const healed = await eventually(
      "Degraded cleared once west answers",
      async () => {
        const p = await getParent(name);
        const d = p?.status?.conditions?.find((c) => c.type === "Degraded");
        return d?.status === "False" && p?.status?.children?.west?.error === undefined ? p : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(healed.status!.phase).toBe("Ready");
    expect(healed.status!.children!.west).toMatchObject({ ready: true, gateway: expect.any(String) });
    live.delete(key(name));
    await deleteAndWaitGone(name);
    expect(await childrenOf(name)).toEqual({});
  });

  it("finishes cleanup after an unreachable workload cluster comes back", async () => {
    const name = await createSession();
    await waitPhase(name, "Ready");
    await set.get("west").stopApiServer();
    try {
      await parents().delete({ namespace: APP_NS, name });
      const stuck = await eventually("reachable children deleted, west pending", async () => {
        const p = await getParent(name);
        const c = await Promise.all(
          (["east", "primary"] as const).map(
            async (k) =>
              (
                await clusterSessionClient(kcs[k]).list({
                  namespace: APP_NS,
                  labelSelector: `${LABELS.parent}=${name}`,
                })
              ).items.length,
          ),
        );
        return p?.status?.phase === "Terminating" && c.every((n) => n === 0) && p.status.children?.west?.error
          ? p
          : undefined;
      });
      expect(Object.keys(stuck.status!.children!)).toEqual(["west"]);
      expect(stuck.metadata.finalizers).toContain(CHILDREN_FINALIZER);
    } finally {
      await set.get("west").startApiServer();
    }
    await eventually(`session ${name} gone`, async () => (await getParent(name)) === undefined, {
      timeoutMs: 60_000,
    });
    expect(await childrenOf(name)).toEqual({});
  });

  it("replaces a leftover child with a stale secret hash, and never touches another Primary's child", async () => {
    const name = newName();
    const leftover = (cluster: "east" | "west", primaryClusterId: string) =>
      clusterSessionClient(kcs[cluster]).create({
        metadata: {
          name: `${name}-${cluster}`,
          namespace: APP_NS,
          labels: { [LABELS.parent]: name, [LABELS.primary]: primaryClusterId, [LABELS.cluster]: cluster },
        },
        spec: {
          target: "deployment/web",
          clientKeyHash: sha256("an earlier session's secret"),
          parent: { name, cluster, primaryClusterId },
        },
      });
    await leftover("east", "primary");
    const foreign = await leftover("west", "other-primary");
    // The earlier session's Secret is still there too (its owner gone): never reused.
    await kcs.primary.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: APP_NS,
      body: {
        metadata: {
          name: childSecretsName(name),
          ownerReferences: [
            {
              apiVersion: "switchyard.dev/v1alpha1",
              kind: "MultiClusterSession",
              name,
              uid: "00000000-0000-0000-0000-000000000000",
            },
          ],
        },
        stringData: { east: "an earlier session's secret", west: "an earlier session's secret" },
      },
    });
    await parents().create({
      metadata: { name, namespace: APP_NS },
      spec: { target: "deployment/web", clientKeyHash: CLIENT_KEY_HASH },
    });
    const failed = await waitPhase(name, "Failed");
    expect(failed.status!.children!.west!.error).toMatch(
      /already exists and belongs to Primary other-primary/,
    );
    const secrets = (await childSecrets(name))!;
    expect(secrets.east).not.toBe("an earlier session's secret");
    await eventually("east child replaced", async () => {
      const east = await clusterSessionClient(kcs.east).get({ namespace: APP_NS, name: `${name}-east` });
      return east?.spec.clientKeyHash === sha256(secrets.east!);
    });
    await deleteAndWaitGone(name);
    const west = await clusterSessionClient(kcs.west).get({ namespace: APP_NS, name: `${name}-west` });
    expect(west?.metadata.uid).toBe(foreign.metadata.uid);
    await clusterSessionClient(kcs.west).delete({ namespace: APP_NS, name: `${name}-west` });
  });

  it("follows a workload cluster leaving and rejoining the configuration", async () => {
    const name = await createSession();
    await waitPhase(name, "Ready");
    await putConfigMap(kcs.primary, CONFIG_MAP, configYaml(false, ["east"]));
    try {
      await eventually("registry without west", () => registry.client("west") === undefined);
      const without = await eventually("west dropped from status", async () => {
        const p = await getParent(name);
        return p?.status?.phase === "Ready" && p.status.children?.west === undefined ? p : undefined;
      });
      expect(Object.keys(without.status!.children!).sort()).toEqual(["east", "primary"]);
      for (const sink of sinks)
        await eventually("route without west", () => sink.table.get(key(name))?.upstreams.length === 2);
      // Unreachable for good: the child is left to expire by its own TTL on that member.
      expect((await childrenOf(name)).west).toBeDefined();
    } finally {
      await putConfigMap(kcs.primary, CONFIG_MAP, configYaml());
    }
    await eventually("registry with west", () => registry.client("west") !== undefined);
    const back = await eventually("west adopted again", async () => {
      const p = await getParent(name);
      return p?.status?.phase === "Ready" && p.status.children?.west?.ready ? p : undefined;
    });
    expect(Object.keys(back.status!.children!).sort()).toEqual([...CLUSTERS]);
    expect(Object.keys(await childrenOf(name)).sort()).toEqual([...CLUSTERS]);
    await deleteAndWaitGone(name);
    expect(await childrenOf(name)).toEqual({});
  });

  it("lets the next leader finish a session whose leader died mid-Initializing", async () => {
    controllerStop.abort();
    await controllerRun;
    const electors: Array<{
      stop: AbortController;
      run: Promise<void>;
      elector: LeaseElector;
      controllers: Promise<void>[];
    }> = [];
    const campaign = (identity: string) => {
      const controllers: Promise<void>[] = [];
      const elector = new LeaseElector({
        kubeConfig: kcs.primary,
        namespace: NS,
        name: "switchyard-sessions",
        identity,
        leaseDurationMs: 4_000,
        renewDeadlineMs: 3_000,
        retryPeriodMs: 300,
        releaseOnStop: false, // stopping simulates a crash: the Lease must expire
        onStartedLeading: (leading) => controllers.push(new SessionController(baseOptions).start(leading)),
      });
      const stop = new AbortController();
      const e = { stop, run: elector.start(stop.signal), elector, controllers };
      electors.push(e);
      return e;
    };
    try {
      const a = campaign("replica-a");
      await eventually("replica-a leads", () => a.elector.isLeader());
      const b = campaign("replica-b");
      await set.get("west").stopApiServer();
      let name = "";
      try {
        name = await createSession();
        const mid = await eventually("Initializing with west unreachable", async () => {
          const p = await getParent(name);
          const made = await Promise.all(
            (["east", "primary"] as const).map(
              async (k) =>
                (await clusterSessionClient(kcs[k]).get({ namespace: APP_NS, name: `${name}-${k}` })) !==
                undefined,
            ),
          );
          const westPending = p?.status?.children?.west?.error !== undefined;
          return p?.status?.phase === "Initializing" && westPending && made.every(Boolean) ? p : undefined;
        });
        expect(Object.keys(mid.status!.children!).sort()).toEqual([...CLUSTERS]);
        expect(mid.status!.children!.west!.error).toMatch(/failed to reach child session/);
        a.stop.abort();
        await a.run;
        await Promise.all(a.controllers);
        expect(b.elector.isLeader()).toBe(false);
        // The successor takes over while west is still down, and must not wait for it to start.
        await eventually("replica-b leads", () => b.elector.isLeader(), { timeoutMs: 30_000 });
      } finally {
        await set.get("west").startApiServer();
      }
      const parent = await waitPhase(name, "Ready");
      expect(Object.values(parent.status!.children!).every((c) => c.ready)).toBe(true);
      const secrets = (await childSecrets(name))!;
      const children = await childrenOf(name);
      expect(Object.keys(children).sort()).toEqual([...CLUSTERS]);
      for (const c of CLUSTERS) expect(children[c]!.spec.clientKeyHash).toBe(sha256(secrets[c]!));
      await deleteAndWaitGone(name);
    } finally {
      for (const e of electors) e.stop.abort();
      await Promise.allSettled(electors.flatMap((e) => [e.run, ...e.controllers]));
    }
  });
});
