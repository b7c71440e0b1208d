// Protocol tests of the RouteDiscovery server over real gRPC (grpc-js, TLS), with routers
// authenticated by client certificate. Each test drives a protocol-level stream and the
// stream helper checks nonce/version invariants on every response it receives.
import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { status } from "@grpc/grpc-js";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  SessionRouteSchema,
  SessionState,
  type SessionRoute,
} from "../../../proto/gen/route_discovery_pb.js";
import type { DiscoveryResponse__Output as DiscoveryResponse } from "../../../proto/route-discovery-service.js";
import {
  createCertificateAuthority,
  type CertificateAuthority,
  type KeyPairPem,
} from "../../../test/env/pki.js";
import { RawDiscoveryStream } from "../../../test/integration/route-discovery/raw-discovery-stream.js";
import { RouteDiscoveryServer } from "./route-discovery-server.js";
import { RouterAuthenticator } from "./router-authenticator.js";
import { RouteSnapshotCache } from "./snapshot-cache.js";
import type { LiveSessionsReport } from "./discovery-stream.js";
import { RouteDiscoveryStreamServer } from "./stream-server.js";

function route(id: string, cluster = "east"): SessionRoute {
  return create(SessionRouteSchema, {
    sessionId: id,
    clientKeyHash: createHash("sha256").update(`secret-${id}`).digest("hex"),
    state: SessionState.READY,
    upstreams: [{ cluster, url: `wss://gw.${cluster}.test:8443`, secret: `s-${id}`, isDefault: true }],
  });
}

const ids = (res: DiscoveryResponse) => res.upserts.map((u) => u.sessionId).sort();

let ca: CertificateAuthority;
let otherCa: CertificateAuthority;
let serverCert: KeyPairPem;
let routerCert: KeyPairPem;
let strangerCert: KeyPairPem;
let forbiddenCert: KeyPairPem;

beforeAll(async () => {
  ca = await createCertificateAuthority("route-discovery-test");
  otherCa = await createCertificateAuthority("someone-else");
  serverCert = await ca.issue({ commonName: "control-plane", usage: "server", ipAddresses: ["127.0.0.1"] });
  routerCert = await ca.issue({ commonName: "router", usage: "client" });
  forbiddenCert = await ca.issue({ commonName: "not-a-router", usage: "client" });
  strangerCert = await otherCa.issue({ commonName: "router", usage: "client" });
});

interface Harness {
  cache: RouteSnapshotCache;
  streams: RouteDiscoveryStreamServer;
  server: RouteDiscoveryServer;
  url: string;
  open(opts?: { cert?: KeyPairPem | null; token?: string }): RawDiscoveryStream;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function harness(cache = new RouteSnapshotCache({ ready: true })): Promise<Harness> {
  const streams = new RouteDiscoveryStreamServer({
    cache,
    authenticator: new RouterAuthenticator({ clientCertificate: { allowedCommonNames: ["router"] } }),
  });
  const server = new RouteDiscoveryServer({
    streams,
    host: "127.0.0.1",
    tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
  });
  const { url } = await server.listen();
  cleanups.push(() => server.close());
  const open: Harness["open"] = (opts = {}) => {
    const cert = opts.cert === undefined ? routerCert : opts.cert;
    const s = new RawDiscoveryStream({
      url,
      ca: ca.certPem,
      ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}),
      ...(opts.token !== undefined ? { token: opts.token } : {}),
    });
    cleanups.push(() => {
      expect(s.invariantViolations).toEqual([]);
      s.cancel();
    });
    return s;
  };
  return { cache, streams, server, url, open };
}

describe("RouteDiscovery stream server", () => {
  it("sends a full snapshot to a router with no version, then deltas carrying only changes", async () => {
    const h = await harness();
    h.cache.upsert(route("mc-a"));
    h.cache.upsert(route("mc-b"));
    const s = h.open();
    s.send({ routerId: "router-1" });
    const full = await s.waitFor(1);
    expect(full.fullSnapshot).toBe(true);
    expect(ids(full)).toEqual(["mc-a", "mc-b"]);
    expect(full.versionInfo).toBe(h.cache.version());
    s.ack(full);
    await expect.poll(() => h.streams.connectedRouters()[0]?.ackedVersion).toBe(full.versionInfo);

    // Two changes in one tick travel as one delta.

    h.cache.upsert(route("mc-c"));
    h.cache.remove("mc-a");
    const delta = await s.waitFor(2);
    expect(delta.fullSnapshot).toBe(false);
    expect(ids(delta)).toEqual(["mc-c"]);
    expect(delta.removes).toEqual(["mc-a"]);
    expect(delta.upserts[0]!.upstreams[0]!.secret).toBe("s-mc-c");
    s.ack(delta);
    await expect.poll(() => h.streams.connectedRouters()[0]?.ackedVersion).toBe(h.cache.version());
    expect(h.streams.metrics.counts.pushes).toEqual({ full: 1, delta: 1 });
    expect(h.streams.metrics.counts.acks).toBe(2);
  });

  it("keeps one push outstanding and coalesces changes made before the ACK", async () => {
    const h = await harness();
    const s = h.open();
    s.send({ routerId: "router-1" });
    const first = await s.waitFor(1);
    expect(first.upserts).toEqual([]); // an empty table is a version too
    h.cache.upsert(route("mc-a"));
    h.cache.upsert(route("mc-b"));
    s.ack(first);
    const next = await s.waitFor(2);
    expect(next.fullSnapshot).toBe(false);
    expect(ids(next)).toEqual(["mc-a", "mc-b"]);
    expect(h.streams.metrics.counts.pushes).toEqual({ full: 1, delta: 1 });
  });

  it("sends nothing to a router that reconnects with the current version until something changes", async () => {
    const h = await harness();
    h.cache.upsert(route("mc-a"));
    const current = h.cache.version();
    const s = h.open();
    s.send({ routerId: "router-1", versionInfo: current });
    await expect.poll(() => h.streams.connectedRouters().length).toBe(1);
    h.cache.upsert(route("mc-b"));
    // The first thing this stream ever receives is the delta for mc-b, not a snapshot.
    const first = await s.waitFor(1);
    expect(first.fullSnapshot).toBe(false);
    expect(ids(first)).toEqual(["mc-b"]);
    expect(first.removes).toEqual([]);
  });

  it("sends a delta to a router that reconnects with an older version it knows", async () => {
    const h = await harness();
    h.cache.replaceAll([route("mc-a"), route("mc-x"), route("mc-y")]);
    const old = h.cache.version();
    h.cache.upsert(route("mc-b"));
    h.cache.remove("mc-a");
    const s = h.open();
    s.send({ routerId: "router-1", versionInfo: old });
    const first = await s.waitFor(1);
    expect(first.fullSnapshot).toBe(false);
    expect(ids(first)).toEqual(["mc-b"]);
    expect(first.removes).toEqual(["mc-a"]);
  });

  it("sends a full snapshot to a router whose version came from another control plane", async () => {
    const h = await harness();
    h.cache.upsert(route("mc-a"));
    const foreign = new RouteSnapshotCache({ ready: true });
    foreign.upsert(route("mc-z"));
    const s = h.open();
    s.send({ routerId: "router-1", versionInfo: foreign.version() });
    const first = await s.waitFor(1);
    expect(first.fullSnapshot).toBe(true);
    expect(ids(first)).toEqual(["mc-a"]);
  });

  it("on NACK keeps the acked version, records the error, and re-sends the change with the next one", async () => {
    const h = await harness();
    const s = h.open();
    s.send({ routerId: "router-1" });
    const v0 = await s.waitFor(1);
    s.ack(v0);
    h.cache.upsert(route("mc-bad"));
    const rejected = await s.waitFor(2);
    s.send({
      versionInfo: v0.versionInfo,
      responseNonce: rejected.nonce,
      errorDetail: { message: "cannot dial" },
    });
    await expect.poll(() => h.streams.metrics.counts.nacks).toBe(1);
    const view = h.streams.connectedRouters()[0]!;
    expect(view.ackedVersion).toBe(v0.versionInfo);
    expect(view.lastNack).toMatchObject({
      version: rejected.versionInfo,
      nonce: rejected.nonce,
      message: "cannot dial",
    });
    expect(view.pendingNonce).toBeUndefined();

    h.cache.upsert(route("mc-next"));
    const retry = await s.waitFor(3);
    // Computed against what the router last ACKed: the refused change is carried again.
    expect(retry.fullSnapshot).toBe(false);
    expect(ids(retry)).toEqual(["mc-bad", "mc-next"]);
    expect(s.responses).toHaveLength(3);
    const text = await h.streams.metrics.registry.metrics();
    expect(text).toMatch(/switchyard_route_discovery_nacks_total 1/);
  });

  it("ignores and counts a stale nonce, and keeps serving the stream", async () => {
    const h = await harness();
    const s = h.open();
    s.send({ routerId: "router-1" });
    const r1 = await s.waitFor(1);
    s.ack(r1);
    s.ack(r1); // duplicate: nonce 1 is no longer outstanding
    await expect.poll(() => h.streams.metrics.counts.staleNonces).toBe(1);
    expect(h.streams.metrics.counts.acks).toBe(1);
    h.cache.upsert(route("mc-a"));
    const r2 = await s.waitFor(2);
    expect(ids(r2)).toEqual(["mc-a"]);
    s.ack(r2);
    await expect.poll(() => h.streams.metrics.counts.acks).toBe(2);
    expect(await h.streams.metrics.registry.metrics()).toMatch(
      /switchyard_route_discovery_stale_nonces_total 1/,
    );
  });

  it.each([
    ["no router_id", [{}], status.INVALID_ARGUMENT],
    [
      "a nonce never sent",
      [{ routerId: "r" }, { responseNonce: "99", versionInfo: "x" }],
      status.INVALID_ARGUMENT,
    ],
    ["a nonce that is not ours", [{ routerId: "r" }, { responseNonce: "abc" }], status.INVALID_ARGUMENT],
    ["a changed router_id", [{ routerId: "r" }, { routerId: "other" }], status.INVALID_ARGUMENT],
    ["a NACK without nonce", [{ routerId: "r" }, { errorDetail: { message: "x" } }], status.INVALID_ARGUMENT],
  ] as const)("ends the stream with a precise status on %s", async (_name, requests, code) => {
    const h = await harness();
    const s = h.open();
    for (const r of requests) s.send(r);
    const err = await s.ended;
    expect(err?.code).toBe(code);
    await expect.poll(() => h.streams.connectedRouters().length).toBe(0);
  });

  it("rejects an ACK whose version is not the pushed one", async () => {
    const h = await harness();
    const s = h.open();
    s.send({ routerId: "r" });
    const r1 = await s.waitFor(1);
    s.send({ responseNonce: r1.nonce, versionInfo: "made-up" });
    expect((await s.ended)?.code).toBe(status.INVALID_ARGUMENT);
  });

  it.each([
    ["no credentials", "none", status.UNAUTHENTICATED],
    ["a certificate from another CA", "stranger", status.UNAUTHENTICATED],
    ["a certificate whose CN is not allowed", "forbidden", status.PERMISSION_DENIED],
    ["a bearer token when tokens are not configured", "token", status.UNAUTHENTICATED],
  ] as const)("refuses a router with %s and sends it nothing", async (_name, who, code) => {
    const h = await harness();
    h.cache.upsert(route("mc-secret"));
    const cert = { none: null, stranger: strangerCert, forbidden: forbiddenCert, token: undefined }[who];
    const s = h.open({ cert, ...(who === "token" ? { token: "abc" } : {}) });
    s.send({ routerId: "intruder" });
    const err = await s.ended;
    expect(err?.code).toBe(code);
    expect(s.responses).toEqual([]);
    expect(h.streams.connectedRouters()).toEqual([]);
    expect(h.streams.metrics.counts.pushes).toEqual({ full: 0, delta: 0 });
  });

  it("refuses routers with UNAVAILABLE until the cache is ready, so an unsynced replica never wipes their tables", async () => {
    const h = await harness(new RouteSnapshotCache());
    h.cache.upsert(route("mc-a")); // a partial table: the initial sync is still running
    const s = h.open();
    s.send({ routerId: "router-1", versionInfo: "some-version" });
    expect((await s.ended)?.code).toBe(status.UNAVAILABLE);
    expect(s.responses).toEqual([]);
    expect(h.streams.metrics.counts.notReady).toBe(1);

    h.cache.replaceAll([route("mc-a"), route("mc-b")]);
    const s2 = h.open();
    s2.send({ routerId: "router-1", versionInfo: "some-version" });
    const full = await s2.waitFor(1);
    expect(full.fullSnapshot).toBe(true);
    expect(ids(full)).toEqual(["mc-a", "mc-b"]);
  });

  it("delivers live-session reports with the router id, on connect and later", async () => {
    const h = await harness();
    const reports: LiveSessionsReport[] = [];
    h.streams.onLiveSessions((r) => reports.push(r));
    const s = h.open();
    s.send({ routerId: "router-7", liveSessions: { sessionIds: ["mc-a"] } });
    await s.waitFor(1);
    s.send({ liveSessions: { sessionIds: ["mc-a", "mc-b"] } });
    await expect.poll(() => reports.length).toBe(2);
    expect(reports.map((r) => [r.routerId, r.identity, [...r.sessionIds]])).toEqual([
      ["router-7", "cn:router", ["mc-a"]],
      ["router-7", "cn:router", ["mc-a", "mc-b"]],
    ]);
    expect(h.streams.connectedRouters()[0]).toMatchObject({ routerId: "router-7", liveSessions: 2 });
  });

  it("publishes connected routers, snapshot version and push latency at scrape", async () => {
    const h = await harness();
    const s = h.open();
    s.send({ routerId: "router-1" });
    s.ack(await s.waitFor(1));
    h.cache.upsert(route("mc-a"));
    s.ack(await s.waitFor(2));
    await expect.poll(() => h.streams.metrics.counts.acks).toBe(2);
    const text = await h.streams.metrics.registry.metrics();
    expect(text).toMatch(/switchyard_route_discovery_connected_routers 1/);
    expect(text).toContain(`switchyard_route_discovery_snapshot_info{version="${h.cache.version()}"} 1`);
    expect(text).toMatch(/switchyard_route_discovery_push_latency_seconds_count 2/);
    expect(text).toMatch(/switchyard_route_discovery_pushes_total\{type="delta"\} 1/);
  });

  it("ends every stream with UNAVAILABLE when the server closes", async () => {
    const h = await harness();
    const s = h.open();
    s.send({ routerId: "router-1" });
    await s.waitFor(1);
    await h.server.close();
    expect((await s.ended)?.code).toBe(status.UNAVAILABLE);
  });
});
