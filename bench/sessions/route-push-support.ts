// Push cost versus table size, for the sessions benchmark (issue 5): one RouteSnapshotCache
// holding N sessions, a real RouteDiscoveryServer (gRPC over mTLS on loopback) and real
// RouteDiscoveryClients. For each N it measures one single-session change (time until
// applied on every router, and the protobuf size of what was pushed) and a full resync
// (a fresh router connecting with no version). The setup mirrors route-discovery.ts,
// which is a script and cannot be imported.
import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
} from "../../control-plane/src/route-discovery/index.js";
import { RouteDiscoveryClient, type RouteDelta } from "../../data-plane/router/src/route-discovery-client.js";
import { SessionRouteSchema, SessionState, type SessionRoute } from "../../proto/gen/route_discovery_pb.js";
import { RouteDiscoveryService } from "../../proto/route-discovery-service.js";
import { createCertificateAuthority } from "../../test/env/pki.js";
import { pct, round } from "../support/stats-support.js";

export interface PushCostRow {
  sessions: number;
  oneChange: { p50Ms: number; p99Ms: number; bytes: number };
  fullResync: { p50Ms: number; bytes: number };
  pushes: { full: number; delta: number };
}

function route(i: number, rev = 0): SessionRoute {
  const id = `mc-${i.toString(16).padStart(16, "0")}`;
  return create(SessionRouteSchema, {
    sessionId: id,
    clientKeyHash: createHash("sha256").update(id).digest("hex"),
    state: SessionState.READY,
    upstreams: ["east", "west"].map((c, k) => ({
      cluster: c,
      url: `wss://gw.${c}.example:8443/v1/sessions/${id}-${c}`,
      secret: createHash("sha256").update(`${id}${c}${rev}`).digest("base64url"),
      isDefault: k === 0,
    })),
  });
}

/** Wire size of the DiscoveryResponse carrying this delta (grpc-js's serializer; before gRPC framing/TLS). */
function bytesOf(d: RouteDelta): number {
  return RouteDiscoveryService.StreamRoutes.responseSerialize({
    versionInfo: d.version,
    nonce: "1",
    fullSnapshot: d.fullResync,
    upserts: d.upserts,
    removes: d.removes,
  }).length;
}

export async function measurePushCost(sizes: number[], routers = 2, changes = 50, resyncs = 5) {
  const ca = await createCertificateAuthority("bench");
  const serverCert = await ca.issue({ commonName: "cp", usage: "server", ipAddresses: ["127.0.0.1"] });
  const routerCert = await ca.issue({ commonName: "router", usage: "client" });
  const rows: PushCostRow[] = [];
  for (const n of sizes) {
    const cache = new RouteSnapshotCache();
    cache.replaceAll(Array.from({ length: n }, (_, i) => route(i)));
    const streams = new RouteDiscoveryStreamServer({
      cache,
      authenticator: new RouterAuthenticator({ clientCertificate: {} }),
    });
    const server = new RouteDiscoveryServer({
      streams,
      host: "127.0.0.1",
      tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
    });
    const { url } = await server.listen();
    const ac = new AbortController();
    // version -> routers still to apply it; `bytes` records the size of what arrived.
    const waiters = new Map<string, { left: number; bytes: number; resolve: () => void }>();
    const connect = (id: string, onFull?: (bytes: number) => void) => {
      const client = new RouteDiscoveryClient({
        url,
        routerId: id,
        liveSessions: () => [],
        credentials: { tls: { ca: ca.certPem, cert: routerCert.certPem, key: routerCert.keyPem } },
        sink: {
          apply(d: RouteDelta) {
            if (d.fullResync) onFull?.(bytesOf(d));
            const w = waiters.get(d.version);
            if (w && !d.fullResync) {
              w.bytes = bytesOf(d);
              if (--w.left === 0) w.resolve();
            }
          },
        },
      });
      const clientAc = new AbortController();
      ac.signal.addEventListener("abort", () => clientAc.abort(), { once: true });
      void client.start(clientAc.signal);
      return clientAc;
    };
    // Fresh routers: each connects with no version, so the server sends the whole table.
    const resyncMs: number[] = [];
    let fullBytes = 0;
    for (let r = 0; r < resyncs + routers; r++) {
      const t0 = performance.now();
      let done!: () => void;
      const synced = new Promise<void>((res) => (done = res));
      const clientAc = connect(`router-${r}`, (b) => {
        fullBytes = b;
        done();
      });
      await synced;
      resyncMs.push(performance.now() - t0);
      // Keep the last `routers` connected for the change measurement.
      if (r < resyncs) clientAc.abort();
    }
    const changeMs: number[] = [];
    let deltaBytes = 0;
    for (let c = 0; c < changes; c++) {
      const [epoch, seq] = cache.version().split(".");
      const next = `${epoch}.${Number(seq) + 1}`;
      let resolve!: () => void;
      const applied = new Promise<void>((res) => (resolve = res));
      const w = { left: routers, bytes: 0, resolve };
      waiters.set(next, w);
      const t0 = performance.now();
      const v = cache.upsert(route(c % n, c + 1));
      if (v !== next) throw new Error(`unexpected cache version ${v}, expected ${next}`);
      await applied;
      changeMs.push(performance.now() - t0);
      waiters.delete(v);
      deltaBytes = w.bytes;
    }
    const counts = streams.metrics.counts;
    rows.push({
      sessions: n,
      oneChange: { p50Ms: round(pct(changeMs, 50)), p99Ms: round(pct(changeMs, 99)), bytes: deltaBytes },
      // Skip the first connect (TLS/session warm-up of the process).
      fullResync: { p50Ms: round(pct(resyncMs.slice(1), 50)), bytes: fullBytes },
      pushes: { full: counts.pushes.full, delta: counts.pushes.delta },
    });
    ac.abort();
    await server.close();
  }
  return rows;
}
