// RouteDiscovery end to end: the control plane's server and the router's client, both
// real, over real gRPC/TLS; routers authenticated by ServiceAccount tokens that a real
// kube-apiserver reviews (TokenReview), or by client certificate. The control plane
// reviews tokens as a dedicated user holding only `create tokenreviews`. Connections have a
// maximum age; a router moves to a new one without losing or re-fetching its table.
import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import { CoreV1Api, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
  TokenReviewAuthenticator,
  type LiveSessionsReport,
} from "../../../control-plane/src/route-discovery/index.js";
import {
  RouteDiscoveryClient,
  type RouteDelta,
  type RouteSink,
  type SessionRoute,
} from "../../../data-plane/router/src/route-discovery-client.js";
import type { RouteDiscoveryClientCredentials } from "../../../data-plane/router/src/route-discovery-options.js";
import { SessionRouteSchema, SessionState } from "../../../proto/gen/route_discovery_pb.js";
import {
  createCertificateAuthority,
  startClusterSet,
  type CertificateAuthority,
  type ClusterSet,
  type KeyPairPem,
  type TestCluster,
} from "../../env/index.js";
import { RawDiscoveryStream } from "./raw-discovery-stream.js";

const ns = "switchyard";
let set: ClusterSet;
let primary: TestCluster;
let reviewerKubeconfig: string;
let tlsCa: CertificateAuthority;
let foreignCa: CertificateAuthority;
let serverCert: KeyPairPem;
const tokens: Record<"router" | "other" | "spare", string> = { router: "", other: "", spare: "" };

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary"], controllerManager: false });
  primary = set.get("primary");
  const admin = primary.kubeConfig();
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  for (const name of ["router", "other"] as const) {
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name } } });
    const tr = await core.createNamespacedServiceAccountToken({
      namespace: ns,
      name,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    tokens[name] = tr.status!.token;
  }
  const spare = await core.createNamespacedServiceAccountToken({
    namespace: ns,
    name: "router",
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  tokens.spare = spare.status!.token;
  // The control plane's identity: allowed to review tokens, nothing more.
  await rbac.createClusterRole({
    body: {
      metadata: { name: "switchyard-token-reviewer" },
      rules: [{ apiGroups: ["authentication.k8s.io"], resources: ["tokenreviews"], verbs: ["create"] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: "switchyard-token-reviewer" },
      roleRef: {
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: "switchyard-token-reviewer",
      },
      subjects: [{ kind: "User", name: "switchyard-control-plane", apiGroup: "rbac.authorization.k8s.io" }],
    },
  });
  reviewerKubeconfig = (await primary.mintUser("switchyard-control-plane", [])).kubeconfigPath;

  tlsCa = await createCertificateAuthority("switchyard-route-discovery");
  foreignCa = await createCertificateAuthority("not-ours");
  serverCert = await tlsCa.issue({
    commonName: "control-plane",
    usage: "server",
    ipAddresses: ["127.0.0.1"],
  });
});

afterAll(async () => {
  await set?.stop();
});

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function route(id: string): SessionRoute {
  return create(SessionRouteSchema, {
    sessionId: id,
    clientKeyHash: createHash("sha256").update(`client-${id}`).digest("hex"),
    state: SessionState.READY,
    upstreams: [
      { cluster: "east", url: "wss://gw.east.test:8443", secret: `east-${id}`, isDefault: true },
      { cluster: "west", url: "wss://gw.west.test:8443", secret: `west-${id}` },
    ],
  });
}

/** A routing table the way the router keeps one: full resync replaces, deltas patch. */
class TableSink implements RouteSink {
  readonly table = new Map<string, SessionRoute>();
  readonly deltas: RouteDelta[] = [];
  apply(d: RouteDelta): void {
    // Protocol invariants as the router sees them: a version on every push, and every
    // push moves the router to a version it does not have yet.
    expect(d.version).not.toBe("");
    expect(d.version).not.toBe(this.deltas.at(-1)?.version);
    expect(new Set(d.upserts.map((r) => r.sessionId)).size).toBe(d.upserts.length);
    if (d.fullResync) expect(d.removes).toEqual([]);
    this.deltas.push(d);
    if (d.fullResync) this.table.clear();
    for (const r of d.upserts) this.table.set(r.sessionId, r);
    for (const id of d.removes) this.table.delete(id);
  }
  ids(): string[] {
    return [...this.table.keys()].sort();
  }
}

/** JSON log lines of a pino logger, kept for assertions. */
function capturedLogger(): { logger: Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const logger = pino({ level: "debug" }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { logger, lines };
}

async function startControlPlane(
  cache: RouteSnapshotCache,
  port = 0,
  extra: { maxConnectionAgeMs?: number; logger?: Logger } = {},
) {
  const kc = (await import("@kubernetes/client-node")).KubeConfig;
  const reviewerKc = new kc();
  reviewerKc.loadFromFile(reviewerKubeconfig);
  const streams = new RouteDiscoveryStreamServer({
    cache,
    authenticator: new RouterAuthenticator({
      bearer: new TokenReviewAuthenticator({
        kubeConfig: reviewerKc,
        allowedServiceAccounts: [{ namespace: ns, name: "router" }],
      }),
      clientCertificate: { allowedCommonNames: ["router-mtls"] },
    }),
    ...(extra.logger ? { logger: extra.logger } : {}),
  });
  const server = new RouteDiscoveryServer({
    streams,
    host: "127.0.0.1",
    port,
    ...(extra.maxConnectionAgeMs ? { maxConnectionAgeMs: extra.maxConnectionAgeMs } : {}),
    tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: tlsCa.certPem },
  });
  const { url, port: bound } = await server.listen();
  cleanups.push(() => server.close());
  return { streams, server, url, port: bound };
}

function startRouter(
  url: string,
  credentials: RouteDiscoveryClientCredentials,
  live: () => string[] = () => [],
  logger?: Logger,
) {
  const sink = new TableSink();
  const client = new RouteDiscoveryClient({
    url,
    routerId: "router-0",
    sink,
    liveSessions: live,
    credentials,
    backoff: { initialMs: 50, maxMs: 200 },
    liveSessionsIntervalMs: 60_000,
    ...(logger ? { logger } : {}),
  });
  const ac = new AbortController();
  const done = client.start(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await done;
  });
  return { sink, client };
}

function rawStream(url: string, opts: { token?: string; cert?: KeyPairPem }) {
  const s = new RawDiscoveryStream({
    url,
    ca: tlsCa.certPem,
    ...(opts.token !== undefined ? { token: opts.token } : {}),
    ...(opts.cert ? { cert: opts.cert.certPem, key: opts.cert.keyPem } : {}),
  });
  cleanups.push(() => {
    expect(s.invariantViolations).toEqual([]);
    s.cancel();
  });
  return s;
}

describe("RouteDiscovery with TokenReview against a real API server", () => {
  it("streams the table to a router whose ServiceAccount is allowed, and receives its live sessions", async () => {
    const cache = new RouteSnapshotCache({ ready: true });
    cache.replaceAll([route("mc-a"), route("mc-b")]);
    const cp = await startControlPlane(cache);
    const reports: LiveSessionsReport[] = [];
    cp.streams.onLiveSessions((r) => reports.push(r));
    let live = ["mc-a"];
    const { sink, client } = startRouter(
      cp.url,
      { token: () => tokens.router, tls: { ca: tlsCa.certPem } },
      () => live,
    );

    await expect.poll(() => client.version(), { timeout: 10_000 }).toBe(cache.version());
    expect(sink.deltas[0]).toMatchObject({ fullResync: true });
    expect(sink.ids()).toEqual(["mc-a", "mc-b"]);
    expect(sink.table.get("mc-a")!.upstreams.map((u) => u.secret)).toEqual(["east-mc-a", "west-mc-a"]);
    await expect.poll(() => cp.streams.connectedRouters()[0]?.ackedVersion).toBe(cache.version());
    expect(cp.streams.connectedRouters()[0]!.identity).toBe(`system:serviceaccount:${ns}:router`);

    cache.upsert(route("mc-c"));
    cache.remove("mc-a");
    await expect.poll(() => sink.ids()).toEqual(["mc-b", "mc-c"]);
    const last = sink.deltas.at(-1)!;
    expect(last.fullResync).toBe(false);
    expect(last.upserts.map((r) => r.sessionId)).toEqual(["mc-c"]);
    expect(last.removes).toEqual(["mc-a"]);

    live = ["mc-b", "mc-c"];
    client.liveSessionsChanged();
    await expect.poll(() => reports.at(-1)?.sessionIds).toEqual(["mc-b", "mc-c"]);
    expect(reports[0]).toMatchObject({
      routerId: "router-0",
      identity: `system:serviceaccount:${ns}:router`,
    });
    expect([...reports[0]!.sessionIds]).toEqual(["mc-a"]);
  });

  it.each([
    ["no credentials", undefined, status.UNAUTHENTICATED],
    ["a token the API server does not accept", "not-a-real-token", status.UNAUTHENTICATED],
    ["a valid token of a ServiceAccount not on the allow-list", "other", status.PERMISSION_DENIED],
  ] as const)("refuses a router with %s and sends it nothing", async (_name, token, code) => {
    const cache = new RouteSnapshotCache({ ready: true });
    cache.upsert(route("mc-secret"));
    const cp = await startControlPlane(cache);
    const s = rawStream(
      cp.url,
      token === undefined ? {} : { token: token === "other" ? tokens.other : token },
    );
    s.send({ routerId: "intruder", liveSessions: { sessionIds: ["mc-secret"] } });
    const err = await s.ended;
    expect(err?.code).toBe(code);
    expect(s.responses).toEqual([]);
    expect(cp.streams.connectedRouters()).toEqual([]);
    expect(cp.streams.metrics.counts.liveSessionReports).toBe(0);
    expect(cp.streams.metrics.counts.pushes).toEqual({ full: 0, delta: 0 });
  });

  it("keeps refusing a real client that is not allowed, without ever touching its sink", async () => {
    const cache = new RouteSnapshotCache({ ready: true });
    cache.upsert(route("mc-secret"));
    const cp = await startControlPlane(cache);
    const { sink, client } = startRouter(cp.url, { token: () => tokens.other, tls: { ca: tlsCa.certPem } });
    // The client counts a stream when it opens it, the server a refusal once it has reviewed
    // the token: wait for the server's second refusal, not the client's second open.
    await expect
      .poll(() => cp.streams.metrics.counts.auth.permission_denied, { timeout: 10_000 })
      .toBeGreaterThanOrEqual(2);
    expect(client.status().streamsOpened).toBeGreaterThanOrEqual(2);
    await expect.poll(() => client.status().lastError?.code).toBe("PermissionDenied");
    expect(sink.deltas).toEqual([]);
  });

  it("accepts a router with a client certificate from the router CA and refuses a foreign one", async () => {
    const cache = new RouteSnapshotCache({ ready: true });
    cache.upsert(route("mc-a"));
    const cp = await startControlPlane(cache);
    const good = await tlsCa.issue({ commonName: "router-mtls", usage: "client" });
    const { sink, client } = startRouter(cp.url, {
      tls: { ca: tlsCa.certPem, cert: good.certPem, key: good.keyPem },
    });
    await expect.poll(() => client.version(), { timeout: 10_000 }).toBe(cache.version());
    expect(sink.ids()).toEqual(["mc-a"]);
    expect(cp.streams.connectedRouters()[0]!.identity).toBe("cn:router-mtls");

    const foreign = await foreignCa.issue({ commonName: "router-mtls", usage: "client" });
    const s = rawStream(cp.url, { cert: foreign });
    s.send({ routerId: "impostor" });
    expect((await s.ended)?.code).toBe(status.UNAUTHENTICATED);
    expect(s.responses).toEqual([]);

    const wrongCn = await tlsCa.issue({ commonName: "someone", usage: "client" });
    const s2 = rawStream(cp.url, { cert: wrongCn });
    s2.send({ routerId: "someone" });
    expect((await s2.ended)?.code).toBe(status.PERMISSION_DENIED);
    expect(s2.responses).toEqual([]);
  });

  it("keeps the router's table while the control plane is gone; nothing resent on return, a full resync from a new one", async () => {
    const cache = new RouteSnapshotCache({ ready: true });
    cache.replaceAll([route("mc-a"), route("mc-b")]);
    const cp = await startControlPlane(cache);
    const { sink, client } = startRouter(cp.url, { token: () => tokens.router, tls: { ca: tlsCa.certPem } });
    await expect.poll(() => client.version(), { timeout: 10_000 }).toBe(cache.version());
    const appliedBefore = sink.deltas.length;

    await cp.server.close();
    await expect.poll(() => client.status().lastError?.code).toBe("Unavailable");
    expect(sink.ids()).toEqual(["mc-a", "mc-b"]); // still serving the last good table
    expect(sink.deltas).toHaveLength(appliedBefore);

    // The same control plane (same cache) returns: the router's version is current.
    const back = await startControlPlane(cache, cp.port);
    await expect.poll(() => back.streams.connectedRouters().length, { timeout: 10_000 }).toBe(1);
    expect(back.streams.connectedRouters()[0]!.ackedVersion).toBe(cache.version());
    cache.upsert(route("mc-c"));
    await expect.poll(() => sink.ids()).toEqual(["mc-a", "mc-b", "mc-c"]);
    expect(
      sink.deltas.slice(appliedBefore).map((d) => [d.fullResync, d.upserts.map((r) => r.sessionId)]),
    ).toEqual([[false, ["mc-c"]]]);
    await back.server.close();

    // A different control plane (new leader, own cache) does not know the version: full resync.
    const newLeader = new RouteSnapshotCache({ ready: true });
    newLeader.replaceAll([route("mc-b"), route("mc-z")]);
    await startControlPlane(newLeader, cp.port);
    await expect.poll(() => client.version(), { timeout: 10_000 }).toBe(newLeader.version());
    expect(sink.deltas.at(-1)!.fullResync).toBe(true);
    expect(sink.ids()).toEqual(["mc-b", "mc-z"]);
  });

  it("moves a router to a new connection when its connection reaches the maximum age, table intact, no error", async () => {
    const cache = new RouteSnapshotCache({ ready: true });
    cache.replaceAll([route("mc-a"), route("mc-b")]);
    const cpLog = capturedLogger();
    const routerLog = capturedLogger();
    const cp = await startControlPlane(cache, 0, { maxConnectionAgeMs: 1000, logger: cpLog.logger });
    const { sink, client } = startRouter(
      cp.url,
      { token: () => tokens.router, tls: { ca: tlsCa.certPem } },
      () => ["mc-a"],
      routerLog.logger,
    );
    await expect.poll(() => client.version(), { timeout: 10_000 }).toBe(cache.version());
    // Sample the table all along: it must never lose a session across reconnects.
    const gaps: string[][] = [];
    const sampler = setInterval(() => {
      const ids = sink.ids();
      if (!(ids.includes("mc-a") && ids.includes("mc-b"))) gaps.push(ids);
    }, 5);
    cleanups.push(() => clearInterval(sampler));

    await expect.poll(() => client.status().goawayReconnects, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
    cache.upsert(route("mc-c")); // published on whichever stream is current
    await expect.poll(() => sink.ids(), { timeout: 10_000 }).toEqual(["mc-a", "mc-b", "mc-c"]);
    await expect.poll(() => client.status().goawayReconnects, { timeout: 10_000 }).toBeGreaterThanOrEqual(3);
    clearInterval(sampler);

    expect(gaps).toEqual([]);
    // One full snapshot on the first connect; every later stream resumed from its version.
    expect(sink.deltas.map((d) => d.fullResync)).toEqual([true, false]);
    const seen = client.status();
    expect(seen.lastError).toBeUndefined();
    // Every stream but the current one (or one being opened) ended by GOAWAY.
    expect(seen.streamsOpened - seen.goawayReconnects).toBeGreaterThanOrEqual(0);
    expect(seen.streamsOpened - seen.goawayReconnects).toBeLessThanOrEqual(1);
    // Nothing an operator alarms on: no warning or error on either side, no protocol error.
    expect(routerLog.lines.filter((l) => l.level >= 40)).toEqual([]);
    expect(routerLog.lines.map((l) => l.msg)).toContain(
      "control plane closed the connection; reopening the stream",
    );
    expect(cpLog.lines.filter((l) => l.level >= 40)).toEqual([]);
    expect(cp.streams.metrics.counts.protocolErrors.size).toBe(0);
    expect(await cp.streams.metrics.registry.metrics()).not.toMatch(/protocol_errors_total\{.*\} [1-9]/);
    // The old streams are gone; the router is connected once, at the current version.
    await expect
      .poll(() => cp.streams.connectedRouters().map((r) => r.ackedVersion))
      .toEqual([cache.version()]);
  });

  it("answers UNAVAILABLE, not UNAUTHENTICATED, while the API server cannot review a token", async () => {
    const cp = await startControlPlane(new RouteSnapshotCache({ ready: true }));
    await primary.stopApiServer();
    try {
      const s = rawStream(cp.url, { token: tokens.spare });
      s.send({ routerId: "router-0" });
      expect((await s.ended)?.code).toBe(status.UNAVAILABLE);
      expect(s.responses).toEqual([]);
      expect(cp.streams.metrics.counts.auth.unavailable).toBe(1);
    } finally {
      await primary.startApiServer();
    }
    // The failure was not cached: the same token passes once the API server is back.
    const s = rawStream(cp.url, { token: tokens.spare });
    s.send({ routerId: "router-0" });
    expect((await s.waitFor(1)).fullSnapshot).toBe(true);
  });
});
