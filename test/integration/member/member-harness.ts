import { pino } from "pino";
// Test harness for member mode: a RouteDiscovery server (real gRPC over TLS, routers
// authenticated by client certificate) in front of a snapshot cache, a router-side
// RouteDiscoveryClient that records the table it is pushed, and helpers to start a
// MemberController.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
} from "../../../control-plane/src/route-discovery/index.js";
import { MemberController, type AgentProvisioner } from "../../../control-plane/src/member/index.js";
import type { SessionAllowListOptions } from "../../../control-plane/src/allow-list/index.js";
import {
  RouteDiscoveryClient,
  type RouteDelta,
  type RouteSink,
  type SessionRoute,
} from "../../../data-plane/router/src/route-discovery-client.js";
import { createCertificateAuthority } from "../../env/index.js";

export const ROUTER_ENDPOINT = "wss://gw.east.switchyard.test:8443";

/** A routing table the way a router keeps one. */
export class RecordingSink implements RouteSink {
  readonly table = new Map<string, SessionRoute>();
  applied = 0;
  /** Called after each applied push (for latency measurements). */
  onApply: ((version: string) => void) | undefined;
  apply(d: RouteDelta): void {
    if (d.version === "") throw new Error("push without a version");
    if (d.fullResync) this.table.clear();
    for (const r of d.upserts) this.table.set(r.sessionId, r);
    for (const id of d.removes) this.table.delete(id);
    this.applied++;
    this.onApply?.(d.version);
  }
}

/** RouteDiscovery server + one connected router; stop() tears both down. */
export async function startRouteDiscovery(cache: RouteSnapshotCache) {
  const ca = await createCertificateAuthority("member-tests");
  const serverCert = await ca.issue({
    commonName: "control-plane",
    usage: "server",
    ipAddresses: ["127.0.0.1"],
  });
  const routerCert = await ca.issue({ commonName: "router-east-0", usage: "client" });
  const streams = new RouteDiscoveryStreamServer({
    cache,
    authenticator: new RouterAuthenticator({ clientCertificate: { allowedCommonNames: ["router-east-0"] } }),
  });
  const server = new RouteDiscoveryServer({
    streams,
    host: "127.0.0.1",
    port: 0,
    tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
  });
  const { url } = await server.listen();
  const sink = new RecordingSink();
  const client = new RouteDiscoveryClient({
    url,
    routerId: "router-east-0",
    sink,
    liveSessions: () => [],
    credentials: { tls: { ca: ca.certPem, cert: routerCert.certPem, key: routerCert.keyPem } },
    backoff: { initialMs: 50, maxMs: 200 },
    liveSessionsIntervalMs: 60_000,
  });
  const ac = new AbortController();
  const running = client.start(ac.signal);
  return {
    sink,
    client,
    async stop() {
      ac.abort();
      await running;
      await server.close();
    },
  };
}

export function startMember(
  kc: KubeConfig,
  provisioner: AgentProvisioner,
  opts: { now?: () => number; allowList?: SessionAllowListOptions } = {},
) {
  const routes = new RouteSnapshotCache();
  const member = new MemberController({
    kubeConfig: kc,
    routerEndpoint: ROUTER_ENDPOINT,
    provisioner,
    routes,
    waitingRecheckMs: 500,
    ...(process.env.SWITCHYARD_TEST_MEMBER_LOG
      ? { logger: pino({ level: "debug" }, pino.destination(2)) }
      : {}),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.allowList ? { allowList: opts.allowList } : {}),
  });
  const ac = new AbortController();
  const running = member.start(ac.signal);
  return {
    member,
    routes,
    async stop() {
      ac.abort();
      await running;
    },
  };
}

const tempDirs: string[] = [];

/** A fresh directory under the temp dir; `removeTempDirs()` (in afterAll) removes every one. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

export function removeTempDirs(): void {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}
