// The router's RouteDiscovery client against a scripted gRPC server (real HTTP/2 + TLS):
// hello, ACK/NACK, version resent on reconnect, sink untouched while disconnected, token
// re-read per connect, live-session reports periodic and on change.
import { createSecureServer, type Http2SecureServer, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  DiscoveryResponseSchema,
  RouteDiscovery,
  SessionState,
  type DiscoveryRequest,
  type DiscoveryResponse,
} from "../../../proto/gen/route_discovery_pb.js";
import {
  createCertificateAuthority,
  type CertificateAuthority,
  type KeyPairPem,
} from "../../../test/env/pki.js";
import { Backoff } from "../../../lib/backoff.js";
import { INVALID_OPTION } from "../../../lib/option-error.js";
import {
  RECONNECT_BACKOFF,
  RouteDiscoveryClient,
  type RouteDelta,
  type RouteDiscoveryClientOptions,
} from "./route-discovery-client.js";

interface ScriptedStream {
  authorization: string | null;
  requests: DiscoveryRequest[];
  push(res: MessageInitShape<typeof DiscoveryResponseSchema>): void;
  end(err?: ConnectError): void;
}

class ScriptedServer {
  readonly streams: ScriptedStream[] = [];
  url = "";
  private server: Http2SecureServer | undefined;
  private readonly sessions = new Set<ServerHttp2Session>();

  async listen(cert: KeyPairPem): Promise<void> {
    const handler = connectNodeAdapter({
      routes: (router) =>
        router.service(RouteDiscovery, {
          streamRoutes: (requests, ctx) => this.handle(requests, ctx.requestHeader.get("authorization")),
        }),
    });
    const server = createSecureServer({ cert: cert.certPem, key: cert.keyPem }, handler);
    server.on("session", (s) => {
      this.sessions.add(s);
      s.once("close", () => this.sessions.delete(s));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    this.server = server;
    this.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    for (const s of this.streams) s.end(new ConnectError("going away", Code.Unavailable));
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise((r) => setTimeout(r, 10));
    for (const s of this.sessions) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  }

  private async *handle(requests: AsyncIterable<DiscoveryRequest>, authorization: string | null) {
    const out: DiscoveryResponse[] = [];
    let wake: (() => void) | undefined;
    let ended: { err?: ConnectError } | undefined;
    const stream: ScriptedStream = {
      authorization,
      requests: [],
      push: (res) => {
        out.push(create(DiscoveryResponseSchema, res));
        wake?.();
      },
      end: (err) => {
        ended = { err };
        wake?.();
      },
    };
    this.streams.push(stream);
    void (async () => {
      try {
        for await (const r of requests) stream.requests.push(r);
      } catch {
        /* client went away */
      }
    })();
    for (;;) {
      const next = out.shift();
      if (next) {
        yield next;
        continue;
      }
      if (ended) {
        if (ended.err) throw ended.err;
        return;
      }
      await new Promise<void>((r) => (wake = r));
    }
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

async function setup(overrides: Partial<RouteDiscoveryClientOptions> = {}) {
  const server = new ScriptedServer();
  await server.listen(serverCert);
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
    expect(s.requests[1]!.errorDetail).toBeUndefined();
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
    t.server.streams[0]!.end(new ConnectError("leader changed", Code.Unavailable));
    await expect.poll(() => t.server.streams[1]?.requests.length).toBe(1);
    const again = t.server.streams[1]!;
    expect(again.authorization).toBe("Bearer token-2");
    expect(again.requests[0]).toMatchObject({ routerId: "router-0", versionInfo: "v1" });
    expect(t.applied).toHaveLength(1); // nothing was cleared or re-applied while away
    expect(t.client.status().lastError).toMatchObject({ code: "Unavailable", message: "leader changed" });
  });

  it("reports live sessions on change (coalesced) and periodically", async () => {
    const t = await setup({ liveSessionsIntervalMs: 40 });
    await expect.poll(() => t.server.streams[0]?.requests.length ?? 0).toBeGreaterThanOrEqual(1);
    const s = t.server.streams[0]!;
    t.setLive(["mc-a", "mc-b"]);
    t.client.liveSessionsChanged();
    t.client.liveSessionsChanged();
    await expect.poll(() => s.requests.some((r) => r.liveSessions?.sessionIds.length === 2)).toBe(true);
    const reports = () =>
      s.requests.filter((r) => r.liveSessions !== undefined && r.responseNonce === "").length;
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
