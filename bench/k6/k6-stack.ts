// What the k6 scenarios run against, on loopback, each peer in its own process as in a
// cluster: scripted agents (test/peers, one process per cluster), a real router process
// fed by a real RouteDiscovery server (gRPC over mTLS, in this process, as the control
// plane's), and a trivial WebSocket relay (bench/router/ws-relay.ts: one hop with no logic, the
// baseline of the routed message rate). Routes are pushed, never read from a file, so a
// session created during the run takes the path a real one takes after the control plane
// decided it: snapshot cache → push → router ACK.
// `POST /sessions?clusters=N` on the stack's control endpoint creates such a session over
// the first N agents and answers once the router has acknowledged the version carrying it
// (what the control plane waits for before a session is routable): the k6 session-set-up
// scenario measures from that request to the first merged reply.
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
} from "../../control-plane/src/route-discovery/index.js";
import { SessionRouteSchema, SessionState, type SessionRoute } from "../../proto/gen/route_discovery_pb.js";
import { hashSecret } from "../../proto/session-auth.js";
import { createCertificateAuthority } from "../../test/env/pki.js";
import { eventually } from "../../test/support/poll.js";
import { spawnTs, stopProc, type Proc } from "../router/router-bench.js";

export const AGENT_SECRET = "k6-agent";
export const CLIENT_SECRET = "k6-client";

export interface K6Stack {
  /** Agent names, in order (`c1` … `cN`). */
  agents: string[];
  /** ws:// URL of a session on the router. */
  routerUrl(sessionId: string): string;
  /** ws:// URL of a session straight on an agent (no router). */
  agentUrl(agent: string, sessionId: string): string;
  /** ws:// URL of the relay (forwards to agent c1, session `k6-relay`). */
  relayUrl: string;
  /** http:// base of the control endpoint (`POST /sessions?clusters=N`). */
  controlUrl: string;
  /** Pushes a session over these agents (client secret CLIENT_SECRET); resolves once the router acked it. */
  addSession(sessionId: string, agents: string[], clientSecret?: string): Promise<void>;
  /** Sessions created through the control endpoint. */
  readonly created: number;
  stop(): Promise<void>;
}

/** Versions are `<epoch>.<seq>` from one cache: the router has `v` once it acked `v` or later. */
function covers(acked: string, v: string): boolean {
  const [ae, as] = acked.split(".");
  const [ve, vs] = v.split(".");
  return ae === ve && Number(as) >= Number(vs);
}

export async function startK6Stack(agentCount: number): Promise<K6Stack> {
  const procs: Proc[] = [];
  const closers: Array<() => Promise<void>> = [];
  const stop = async () => {
    for (const p of procs.reverse()) await stopProc(p);
    for (const c of closers.reverse()) await c();
  };
  try {
    const agents = Array.from({ length: agentCount }, (_, i) => `c${i + 1}`);
    const ports: Record<string, number> = {};
    // One process per agent, as each cluster's agent runs on its own machine.
    const started = await Promise.all(
      agents.map((name) =>
        spawnTs(
          "test/peers/scripted-agents-main.ts",
          ["--agents", name, "--secret", AGENT_SECRET],
          (l) => "agents" in l,
        ),
      ),
    );
    for (const p of started) {
      procs.push(p);
      Object.assign(ports, p.ready.agents as Record<string, number>);
    }
    const agentUrl = (agent: string, sessionId: string) =>
      `ws://127.0.0.1:${ports[agent]}/v1/sessions/${sessionId}`;

    // The control plane's half: a snapshot cache and the RouteDiscovery server (mTLS).
    const ca = await createCertificateAuthority("k6-bench");
    const serverCert = await ca.issue({
      commonName: "control-plane",
      usage: "server",
      ipAddresses: ["127.0.0.1"],
    });
    const routerCert = await ca.issue({ commonName: "k6-router", usage: "client" });
    const dir = mkdtempSync(join(tmpdir(), "switchyard-k6-"));
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text, { mode: 0o600 });
      return join(dir, name);
    };
    const cache = new RouteSnapshotCache();
    const streams = new RouteDiscoveryStreamServer({
      cache,
      authenticator: new RouterAuthenticator({ clientCertificate: {} }),
    });
    const discovery = new RouteDiscoveryServer({
      streams,
      host: "127.0.0.1",
      tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
    });
    const { url: discoveryUrl } = await discovery.listen();
    closers.push(() => discovery.close());
    const initial = cache.replaceAll([]);

    const router = await spawnTs(
      "data-plane/router/src/main.ts",
      [
        "--listen",
        "127.0.0.1:0",
        // Not the default fixed admin port: another router on this machine may hold it.
        "--admin-listen",
        "127.0.0.1:0",
        "--control-plane",
        discoveryUrl,
        "--control-plane-ca",
        file("ca.pem", ca.certPem),
        "--client-cert",
        file("router.pem", routerCert.certPem),
        "--client-key",
        file("router-key.pem", routerCert.keyPem),
        "--router-id",
        "k6-router",
        "--log-level",
        "info", // "router listening" is how it says it is ready
      ],
      (l) => l.msg === "router listening",
    );
    procs.push(router);
    const routerPort = router.ready.port as number;
    const acked = (v: string) => {
      const rs = streams.connectedRouters();
      return rs.length > 0 && rs.every((r) => covers(r.ackedVersion, v));
    };
    await eventually("the router to take the first routing table", () => acked(initial), {
      timeoutMs: 30_000,
    });

    const route = (sessionId: string, names: string[], clientSecret: string): SessionRoute =>
      create(SessionRouteSchema, {
        sessionId,
        clientKeyHash: hashSecret(clientSecret),
        state: SessionState.READY,
        upstreams: names.map((n, i) => ({
          cluster: n,
          url: agentUrl(n, sessionId),
          secret: AGENT_SECRET,
          isDefault: i === 0,
        })),
      });
    const addSession = async (sessionId: string, names: string[], clientSecret = CLIENT_SECRET) => {
      const v = cache.upsert(route(sessionId, names, clientSecret));
      // Back-to-back polls of an in-process view: the wait is part of what is measured.
      await eventually(`the router to ack ${sessionId}`, () => acked(v), {
        timeoutMs: 10_000,
        intervalMs: 1,
      });
    };

    const relay = await spawnTs(
      "bench/router/ws-relay.ts",
      ["--upstream", agentUrl(agents[0]!, "k6-relay"), "--secret", AGENT_SECRET],
      (l) => "port" in l,
    );
    procs.push(relay);

    let created = 0;
    const control: Server = createServer((req, res) => {
      const u = new URL(req.url ?? "/", "http://control");
      const n = Number(u.searchParams.get("clusters") ?? "2");
      if (req.method !== "POST" || u.pathname !== "/sessions" || !(n >= 1 && n <= agents.length)) {
        res.writeHead(400).end(`POST /sessions?clusters=1..${agents.length}\n`);
        return;
      }
      const id = `k6-setup-${++created}-${randomBytes(4).toString("hex")}`;
      const secret = randomBytes(16).toString("base64url");
      addSession(id, agents.slice(0, n), secret).then(
        () => {
          res.writeHead(201, { "content-type": "application/json" });
          res.end(JSON.stringify({ id, secret, url: `ws://127.0.0.1:${routerPort}/v1/sessions/${id}` }));
        },
        (err: Error) => res.writeHead(503).end(`${err.message}\n`),
      );
    });
    await new Promise<void>((r) => control.listen(0, "127.0.0.1", () => r()));
    closers.push(() => new Promise<void>((r) => control.close(() => r())));

    return {
      agents,
      routerUrl: (s) => `ws://127.0.0.1:${routerPort}/v1/sessions/${s}`,
      agentUrl,
      relayUrl: `ws://127.0.0.1:${relay.ready.port as number}/v1/sessions/k6-relay`,
      controlUrl: `http://127.0.0.1:${(control.address() as AddressInfo).port}`,
      addSession,
      get created() {
        return created;
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
