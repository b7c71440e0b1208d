// RouteDiscovery benchmark: one control plane, several router clients, a large table.
// Measures the initial full sync, then change -> applied-on-every-router latency for
// single-session changes (each travels as a delta), and the cache's cost of a delta versus
// a full snapshot. Real gRPC over TLS with mTLS-authenticated routers, all on loopback.
// Usage: npx tsx bench/sessions/route-discovery.ts [sessions=10000] [routers=4] [changes=300]
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
} from "../../control-plane/src/route-discovery/index.js";
import { RouteDiscoveryClient, type RouteDelta } from "../../data-plane/router/src/route-discovery-client.js";
import { SessionRouteSchema, SessionState, type SessionRoute } from "../../proto/gen/route_discovery_pb.js";
import { createCertificateAuthority } from "../../test/env/pki.js";

const sessions = Number(process.argv[2] ?? 10_000);
const routers = Number(process.argv[3] ?? 4);
const changes = Number(process.argv[4] ?? 300);

function route(i: number, rev = 0): SessionRoute {
  const id = `mc-${i.toString(16).padStart(16, "0")}`;
  return create(SessionRouteSchema, {
    sessionId: id,
    clientKeyHash: createHash("sha256").update(id).digest("hex"),
    state: SessionState.READY,
    upstreams: ["east", "west", "north"].map((c, k) => ({
      cluster: c,
      url: `wss://gw.${c}.example:8443/v1/sessions/${id}-${c}`,
      secret: createHash("sha256").update(`${id}${c}${rev}`).digest("base64url"),
      isDefault: k === 0,
    })),
  });
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const ms = (x: number) => Number(x.toFixed(3));

const ca = await createCertificateAuthority("bench");
const serverCert = await ca.issue({ commonName: "cp", usage: "server", ipAddresses: ["127.0.0.1"] });
const routerCert = await ca.issue({ commonName: "router", usage: "client" });

const cache = new RouteSnapshotCache();
cache.replaceAll(Array.from({ length: sessions }, (_, i) => route(i)));
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

// Each router resolves the waiter for a version once it applied it.
const waiters = new Map<string, { left: number; resolve: () => void }>();
const ac = new AbortController();
const t0 = performance.now();
let synced = 0;
let allSynced!: () => void;
const syncedP = new Promise<void>((r) => (allSynced = r));
const clients = Array.from({ length: routers }, (_, r) => {
  const table = new Map<string, SessionRoute>();
  const client = new RouteDiscoveryClient({
    url,
    routerId: `router-${r}`,
    liveSessions: () => [],
    credentials: { tls: { ca: ca.certPem, cert: routerCert.certPem, key: routerCert.keyPem } },
    sink: {
      apply(d: RouteDelta) {
        if (d.fullResync) {
          table.clear();
          if (++synced === routers) allSynced();
        }
        for (const u of d.upserts) table.set(u.sessionId, u);
        for (const id of d.removes) table.delete(id);
        const w = waiters.get(d.version);
        if (w && --w.left === 0) w.resolve();
      },
    },
  });
  void client.start(ac.signal);
  return client;
});
await syncedP;
const fullSyncMs = performance.now() - t0;

const latencies: number[] = [];
for (let c = 0; c < changes; c++) {
  const start = performance.now();
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  // Register before publishing: the push can go out within this tick.
  const next = `${cache.version().split(".")[0]}.${Number(cache.version().split(".")[1]) + 1}`;
  waiters.set(next, { left: routers, resolve });
  const v = cache.upsert(route(c % sessions, c + 1));
  if (v !== next) throw new Error(`unexpected version ${v}`);
  await done;
  waiters.delete(v);
  latencies.push(performance.now() - start);
}

// Cache cost: a one-change delta against a full snapshot of the same table.
const base = cache.version();
cache.upsert(route(0, 999_999));
const reps = 200;
let t = performance.now();
for (let i = 0; i < reps; i++) cache.changesSince(base);
const deltaUs = ((performance.now() - t) / reps) * 1000;
t = performance.now();
for (let i = 0; i < 20; i++) cache.changesSince("");
const fullUs = ((performance.now() - t) / 20) * 1000;

const counts = streams.metrics.counts;
const result = {
  when: new Date().toISOString(),
  node: process.version,
  sessions,
  routers,
  changes,
  fullSyncAllRoutersMs: ms(fullSyncMs),
  changeToAppliedOnAllRoutersMs: {
    p50: ms(pct(latencies, 50)),
    p99: ms(pct(latencies, 99)),
    max: ms(Math.max(...latencies)),
  },
  cacheChangesSinceUs: { oneChangeDelta: ms(deltaUs), fullSnapshot: ms(fullUs) },
  pushes: counts.pushes,
  acks: counts.acks,
  nacks: counts.nacks,
};
console.log(JSON.stringify(result, null, 2));
mkdirSync(join(import.meta.dirname, "..", "results"), { recursive: true });
writeFileSync(
  join(import.meta.dirname, "..", "results", `route-discovery-${Date.now()}.json`),
  JSON.stringify(result, null, 2),
);

ac.abort();
await server.close();
void clients;
process.exit(0);
