// The router's RouteDiscovery client against a scripted gRPC server (grpc-js over TLS):
// hello, ACK/NACK, version resent on reconnect, sink untouched while disconnected, token
// re-read per connect, a dial that never completes abandoned after connectTimeoutMs, live-session
// reports periodic and on change, and a seamless
// reconnect when the server ends the connection for its age (GOAWAY).
import { Server, ServerCredentials, status, type ChannelOptions, type StatusObject } from "@grpc/grpc-js";
import { createServer as createNetServer, type AddressInfo, type Socket } from "node:net";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { SessionState } from "../../../proto/gen/route_discovery_pb.js";
import {
  RouteDiscoveryService,
  type DiscoveryRequest__Output,
  type DiscoveryResponse,
  type RouteDiscoveryHandlers,
} from "../../../proto/route-discovery-service.js";
import {
  createCertificateAuthority,
  type CertificateAuthority,
  type KeyPairPem,
} from "../../../test/env/pki.js";
import { Backoff } from "../../../lib/backoff.js";
import { INVALID_OPTION } from "../../../lib/option-error.js";
import { RouteDiscoveryClient, type RouteDelta } from "./route-discovery-client.js";
import { RECONNECT_BACKOFF, type RouteDiscoveryClientOptions } from "./route-discovery-options.js";

interface ScriptedStream {
  authorization: string | undefined;
  requests: DiscoveryRequest__Output[];
  push(res: DiscoveryResponse): void;
  end(err?: Partial<StatusObject>): void;
  /** Settles when the stream is over, either way. */
  closed: Promise<void>;
}

/** A RouteDiscovery server that does what the test says, on real gRPC over TLS. */
class ScriptedServer {
  readonly streams: ScriptedStream[] = [];
  url = "";
  private server: Server | undefined;

  async listen(cert: KeyPairPem, options: ChannelOptions = {}): Promise<void> {
    const server = new Server(options);
    const handlers: RouteDiscoveryHandlers = {
      StreamRoutes: (call) => {
        let over!: () => void;
        const closed = new Promise<void>((r) => (over = r));
        const auth = call.metadata.get("authorization")[0];
        const stream: ScriptedStream = {
          authorization: typeof auth === "string" ? auth : undefined,
          requests: [],
          push: (res) => call.write(res),
          end: (err) => (err ? call.emit("error", err) : call.end()),
          closed,
        };
        call.on("data", (r: DiscoveryRequest__Output) => stream.requests.push(r));
        call.on("cancelled", over);
        call.on("finish", over);
        this.streams.push(stream);
      },
    };
    server.addService(RouteDiscoveryService, handlers);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        "127.0.0.1:0",
        ServerCredentials.createSsl(
          null,
          [{ cert_chain: Buffer.from(cert.certPem), private_key: Buffer.from(cert.keyPem) }],
          false,
        ),
        (err, p) => (err ? reject(err) : resolve(p)),
      ),
    );
    this.server = server;
    this.url = `https://127.0.0.1:${port}`;
  }

  async close(): Promise<void> {
    for (const s of this.streams) s.end({ code: status.UNAVAILABLE, details: "going away" });
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise((r) => setTimeout(r, 10));
    server.forceShutdown();
  }
}

let ca: CertificateAuthority;
let serverCert: KeyPairPem;
beforeAll(async () => {
  ca = await createCertificateAuthority("client-test");
  serverCert = await ca.issue({ commonName: "cp", usage: "server", ipAddresses: ["127.0.0.1"] });
});

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const readyRoute = {
  sessionId: "mc-a",
  clientKeyHash: "0".repeat(64),
  state: SessionState.READY,
  upstreams: [{ cluster: "east", url: "wss://east:1", secret: "s", isDefault: true }],
};

async function setup(
  overrides: Partial<RouteDiscoveryClientOptions> = {},
  serverOptions: ChannelOptions = {},
) {
  const server = new ScriptedServer();
  await server.listen(serverCert, serverOptions);
  cleanups.push(() => server.close());
  const applied: RouteDelta[] = [];
  let reject: string | undefined;
  let live = ["mc-a"];
  let token = "token-1";
  const client = new RouteDiscoveryClient({
    url: server.url,
    routerId: "router-0",
    sink: {
      apply(d) {
        if (reject) throw new Error(reject);
        applied.push(d);
      },
    },
    liveSessions: () => live,
    credentials: { token: () => token, tls: { ca: ca.certPem } },
    backoff: { initialMs: 20, maxMs: 50 },
    liveSessionsIntervalMs: 60_000,
    ...overrides,
  });
  const ac = new AbortController();
  const done = client.start(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await done;
  });
  return {
    server,
    client,
    applied,
    setReject: (m: string | undefined) => (reject = m),
    setLive: (l: string[]) => (live = l),
    setToken: (t: string) => (token = t),
  };
}

describe("RouteDiscoveryClient", () => {
  it("says hello with its id, no version and live sessions, then ACKs an applied push", async () => {
    const t = await setup();
    await expect.poll(() => t.server.streams[0]?.requests.length).toBe(1);
    const s = t.server.streams[0]!;
    expect(s.authorization).toBe("Bearer token-1");
    expect(s.requests[0]).toMatchObject({ routerId: "router-0", versionInfo: "", responseNonce: "" });
    expect(s.requests[0]!.liveSessions?.sessionIds).toEqual(["mc-a"]);

    s.push({ versionInfo: "v1", nonce: "1", fullSnapshot: true, upserts: [readyRoute] });
    await expect.poll(() => s.requests.length).toBe(2);
    expect(s.requests[1]).toMatchObject({ versionInfo: "v1", responseNonce: "1" });
    expect(s.requests[1]!.errorDetail).toBeNull();
    expect(t.applied).toHaveLength(1);
    expect(t.applied[0]).toMatchObject({ fullResync: true, version: "v1", removes: [] });
    expect(t.applied[0]!.upserts[0]!.sessionId).toBe("mc-a");
    expect(t.client.version()).toBe("v1");
  });

  it("NACKs when the sink throws and keeps its version", async () => {
    const t = await setup();
    await expect.poll(() => t.server.streams[0]?.requests.length).toBe(1);
    const s = t.server.streams[0]!;
    s.push({ versionInfo: "v1", nonce: "1", fullSnapshot: true });
    await expect.poll(() => s.requests.length).toBe(2);
    t.setReject("upstream URL unreachable");
    s.push({ versionInfo: "v2", nonce: "2", removes: ["mc-a"] });
    await expect.poll(() => s.requests.length).toBe(3);
    expect(s.requests[2]).toMatchObject({ versionInfo: "v1", responseNonce: "2" });
    expect(s.requests[2]!.errorDetail?.message).toBe("upstream URL unreachable");
    expect(t.client.version()).toBe("v1");
    expect(t.client.status()).toMatchObject({ pushesApplied: 1, pushesRejected: 1 });
  });

  it("NACKs a push without version without calling the sink", async () => {
    const t = await setup();
    await expect.poll(() => t.server.streams[0]?.requests.length).toBe(1);
    const s = t.server.streams[0]!;
    s.push({ versionInfo: "", nonce: "1" });
    await expect.poll(() => s.requests.length).toBe(2);
    expect(s.requests[1]!.errorDetail?.message).toMatch(/no version_info/);
    expect(t.applied).toEqual([]);
  });

  it("reconnects after the stream fails, resends its version, re-reads the token, keeps the sink", async () => {
    const t = await setup();
    await expect.poll(() => t.server.streams[0]?.requests.length).toBe(1);
    t.server.streams[0]!.push({
      versionInfo: "v1",
      nonce: "1",
      fullSnapshot: true,
      upserts: [readyRoute],
    });
    await expect.poll(() => t.server.streams[0]!.requests.length).toBe(2);
    t.setToken("token-2");
    t.server.streams[0]!.end({ code: status.UNAVAILABLE, details: "leader changed" });
    await expect.poll(() => t.server.streams[1]?.requests.length).toBe(1);
    const again = t.server.streams[1]!;
    expect(again.authorization).toBe("Bearer token-2");
    expect(again.requests[0]).toMatchObject({ routerId: "router-0", versionInfo: "v1" });
    expect(t.applied).toHaveLength(1); // nothing was cleared or re-applied while away
    expect(t.client.status().lastError).toMatchObject({ code: "Unavailable", message: "leader changed" });
  });

  it("abandons a connection that is not established in time and dials again", async () => {
    // A peer that takes the TCP connection and never answers the TLS handshake, as a Service
    // endpoint whose pod is gone leaves a dial hanging.
    const dialled: Socket[] = [];
    const silent = createNetServer((sock) => {
      dialled.push(sock);
      sock.on("error", () => {});
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    cleanups.push(
      () =>
        new Promise<void>((r) => {
          for (const d of dialled) d.destroy();
          silent.close(() => r());
        }),
    );
    const client = new RouteDiscoveryClient({
      url: `https://127.0.0.1:${(silent.address() as AddressInfo).port}`,
      routerId: "router-0",
      sink: { apply() {} },
      liveSessions: () => [],
      credentials: { token: () => "t", tls: { ca: ca.certPem } },
      backoff: { initialMs: 20, maxMs: 50 },
      connectTimeoutMs: 300,
    });
    const ac = new AbortController();
    const done = client.start(ac.signal);
    cleanups.push(async () => {
      ac.abort();
      await done;
    });
    await expect
      .poll(() => client.status().lastError?.message, { timeout: 5_000 })
      .toMatch(/^no connection to 127\.0\.0\.1:\d+ within 300 ms \(.*\); dialling again$/);
    expect(client.status().lastError?.code).toBe("Unavailable");
    // Each attempt is a new connection. (grpc-js does not cancel a TLS handshake in progress
    // when its channel closes: a peer that never answers keeps that socket; a dial to a pod
    // that is gone ends when the kernel gives up on its SYNs.)
    await expect.poll(() => dialled.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
  });

  it("reopens the stream at once when the server ends the connection for its age, keeping its table", async () => {
    // A 5 s backoff: were the GOAWAY treated as a failure, the next stream would come late.
    const t = await setup(
      { backoff: { initialMs: 5_000, maxMs: 5_000, jitter: 0 } },
      { "grpc.max_connection_age_ms": 400, "grpc.max_connection_age_grace_ms": 30_000 },
    );
    await expect.poll(() => t.server.streams[0]?.requests.length).toBe(1);
    const first = t.server.streams[0]!;
    first.push({ versionInfo: "v1", nonce: "1", fullSnapshot: true, upserts: [readyRoute] });
    await expect.poll(() => first.requests.length).toBe(2);

    // GOAWAY after ~400 ms; the client moves before the 30 s grace would cut the stream.
    await expect
      .poll(() => t.server.streams[1]?.requests.length ?? JSON.stringify(t.client.status()), {
        timeout: 3_000,
      })
      .toBe(1);
    await first.closed;
    expect(t.server.streams[1]!.requests[0]).toMatchObject({ routerId: "router-0", versionInfo: "v1" });
    expect(t.applied).toHaveLength(1); // served throughout, nothing cleared or re-applied
    expect(t.client.status()).toMatchObject({ lastError: undefined, streaming: true });
    expect(t.client.status().goawayReconnects).toBeGreaterThanOrEqual(1);

    // The new stream carries on: the next push applies and is ACKed there.
    const second = t.server.streams[1]!;
    second.push({ versionInfo: "v2", nonce: "1", removes: ["mc-a"] });
    await expect.poll(() => second.requests.length).toBe(2);
    expect(second.requests[1]).toMatchObject({ versionInfo: "v2", responseNonce: "1" });
    expect(t.client.version()).toBe("v2");
  });

  it("reports live sessions on change (coalesced) and periodically", async () => {
    const t = await setup({ liveSessionsIntervalMs: 40 });
    await expect.poll(() => t.server.streams[0]?.requests.length ?? 0).toBeGreaterThanOrEqual(1);
    const s = t.server.streams[0]!;
    t.setLive(["mc-a", "mc-b"]);
    t.client.liveSessionsChanged();
    t.client.liveSessionsChanged();
    await expect.poll(() => s.requests.some((r) => r.liveSessions?.sessionIds.length === 2)).toBe(true);
    const reports = () => s.requests.filter((r) => r.liveSessions !== null && r.responseNonce === "").length;
    const before = reports();
    await expect.poll(reports).toBeGreaterThan(before + 1); // the periodic ones keep coming
    expect(s.requests.slice(1).every((r) => r.responseNonce === "" && r.routerId === "")).toBe(true);
  });

  it("validates its options", () => {
    const base: RouteDiscoveryClientOptions = {
      url: "https://cp:1",
      routerId: "r",
      sink: { apply() {} },
      liveSessions: () => [],
      credentials: { token: () => "t", tls: { ca: "x" } },
    };
    expect(() => new RouteDiscoveryClient({ ...base, url: "http://cp:1" })).toThrow(
      expect.objectContaining({ code: INVALID_OPTION, option: "url" }),
    );
    expect(() => new RouteDiscoveryClient({ ...base, credentials: { token: () => "t" } })).toThrow(/tls.ca/);
    expect(() => new RouteDiscoveryClient({ ...base, credentials: { tls: { ca: "x" } } })).toThrow(
      /credentials/,
    );
    expect(() => new RouteDiscoveryClient({ ...base, routerId: "" })).toThrow(/routerId/);
    expect(() => new RouteDiscoveryClient({ ...base, liveSessionsIntervalMs: 0 })).toThrow(
      /liveSessionsIntervalMs/,
    );
    expect(
      () => new RouteDiscoveryClient({ ...base, url: "http://cp:1", credentials: { plaintext: true } }),
    ).not.toThrow();
  });
});

describe("reconnect backoff", () => {
  it("starts at 250 ms, doubles up to 10 s, jitters by ±20 %, and resets", () => {
    const b = new Backoff({ ...RECONNECT_BACKOFF, jitter: 0 });
    expect(Array.from({ length: 8 }, () => b.next())).toEqual([
      250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
    b.reset();
    expect(b.next()).toBe(250);
    const lo = new Backoff(RECONNECT_BACKOFF, () => 0).next();
    const hi = new Backoff(RECONNECT_BACKOFF, () => 1).next();
    expect([lo, hi]).toEqual([200, 300]);
  });

  it("rejects a backoff option naming the field", () => {
    expect(
      () =>
        new RouteDiscoveryClient({
          url: "https://cp:1",
          routerId: "r",
          sink: { apply() {} },
          liveSessions: () => [],
          credentials: { token: () => "t", tls: { ca: "x" } },
          backoff: { initialMs: 10, maxMs: 5 },
        }),
    ).toThrow(expect.objectContaining({ code: INVALID_OPTION, option: "backoff.maxMs" }));
  });
});
