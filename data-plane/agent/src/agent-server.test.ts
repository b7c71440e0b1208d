// The agent's protocol end to end over real loopback sockets (no Kubernetes API here;
// env and files against a real API server are in test/integration/agent): auth, Hello,
// DNS, outgoing TCP/UDP from the --outbound-bind address, mirror/steal/filtered steal
// with a local app, session lifetime (close, WebSocket loss, ping timeout) and
// backpressure toward a slow protocol peer.
import { createHash } from "node:crypto";
import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { Agent, createServer, request } from "node:http";
import {
  createServer as createTcpServer,
  type AddressInfo,
  type Server as TcpServer,
  type Socket,
} from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { testScratchDir } from "../../../test/support/scratch-dir.js";
import WebSocket, { WebSocketServer } from "ws";
import {
  decodePayload,
  encodeFrame,
  encodeRaw,
  FLAG_ERROR,
  HEADER_BYTES,
} from "../../../proto/frame-codec.js";
import { PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN } from "../../../proto/frame-version.js";
import * as pb from "../../../proto/gen/session_pb.js";
import { UpgradeRefusedError } from "../../../test/peers/raw-session-client.js";
import { AgentServer, type AgentServerOptions } from "./agent-server.js";
import { hashSecret as sha256Hex } from "../../../proto/session-auth.js";
import { SessionSecrets } from "./session-secrets.js";
import { decodeStreamData } from "../../../proto/stream-data-frame.js";
import { TargetView } from "./target/target-view.js";
import { AgentClient } from "../../../test/peers/agent-client.js";

const SECRET = "agent-secret-1";
const F = pb.FrameFamily;
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The "cluster app": answers `app <METHOD> <path> body=<body>`, echoes WebSocket messages. */
async function startApp(): Promise<{ port: number; requests: string[] }> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      requests.push(`${req.method} ${req.url}`);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`app ${req.method} ${req.url} body=${Buffer.concat(chunks).toString()}`);
    });
  });
  const wss = new WebSocketServer({ server });
  wss.on("connection", (ws) => ws.on("message", (m) => ws.send(`app-echo:${m.toString()}`)));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  cleanups.push(() => {
    for (const c of wss.clients) c.terminate();
    server.closeAllConnections();
    return new Promise((r) => server.close(() => r(undefined)));
  });
  return { port: (server.address() as AddressInfo).port, requests };
}

async function startAgent(
  appPort: number,
  extra: Partial<AgentServerOptions> = {},
): Promise<{ agent: AgentServer; traffic: number }> {
  const agent = new AgentServer({
    host: "127.0.0.1",
    port: 0,
    secrets: new SessionSecrets({ secretHashes: [sha256Hex(SECRET)] }),
    view: new TargetView(undefined, undefined),
    ports: [{ appPort, listenPort: 0 }],
    logger: pino({ level: "silent" }),
    ...extra,
  });
  await agent.listen();
  cleanups.push(() => agent.close());
  return { agent, traffic: agent.trafficPorts.get(appPort)! };
}

async function connectClient(agent: AgentServer, session = "s1"): Promise<AgentClient> {
  const c = await AgentClient.connect(agent.url(session), SECRET);
  cleanups.push(() => c.close());
  return c;
}

function httpCall(
  port: number,
  opts: {
    path?: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string | string[];
    agent?: Agent;
  } = {},
): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: opts.path ?? "/",
        method: opts.method ?? "GET",
        headers: opts.headers ?? {},
        agent: opts.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            headers: res.headers,
          }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    if (Array.isArray(opts.body)) {
      // Several writes without a length: Node sends a chunked body.
      for (const part of opts.body) req.write(part);
      req.end();
    } else req.end(opts.body);
  });
}

const wsAccept = (key: string) =>
  createHash("sha1")
    .update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
    .digest("base64");

describe("authentication and hello", () => {
  it("refuses a wrong or missing secret with 401 before the upgrade, and unknown paths with 404", async () => {
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    const wrong = await AgentClient.connect(agent.url("s1"), "not-the-secret").catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(UpgradeRefusedError);
    expect((wrong as UpgradeRefusedError).status).toBe(401);
    expect((wrong as UpgradeRefusedError).body.code).toBe("SWITCHYARD_UNAUTHENTICATED");
    const missing = await AgentClient.connect(agent.url("s1"), SECRET, { authorization: null }).catch(
      (e: unknown) => e,
    );
    expect((missing as UpgradeRefusedError).status).toBe(401);
    const badPath = await AgentClient.connect(
      agent.url("s1").replace("/v1/sessions/", "/v2/x/"),
      SECRET,
    ).catch((e: unknown) => e);
    expect((badPath as UpgradeRefusedError).status).toBe(404);
    expect(agent.metrics.counters.errorCount("auth_failed")).toBe(2);
    expect(agent.sessions.size).toBe(0);
  });

  it("serves wss:// with a certificate the peer verifies against its CA", async () => {
    const { createCertificateAuthority } = await import("../../../test/env/pki.js");
    const ca = await createCertificateAuthority("agent-test-ca");
    const tls = await ca.issue({ commonName: "agent", ipAddresses: ["127.0.0.1"], usage: "server" });
    const app = await startApp();
    const { agent } = await startAgent(app.port, { tls });
    expect(agent.url("s1")).toMatch(/^wss:\/\//);
    const ws = new WebSocket(agent.url("s1"), {
      ca: ca.certPem,
      headers: { authorization: `Bearer ${SECRET}` },
    });
    cleanups.push(() => ws.terminate());
    ws.binaryType = "nodebuffer";
    const ack = new Promise<Buffer>((r) => ws.once("message", (d: Buffer) => r(d)));
    await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
    ws.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.HELLO, requestId: 1 }, pb.HelloSchema, {
        minVersion: PROTOCOL_VERSION_MAX,
        maxVersion: PROTOCOL_VERSION_MAX,
      }),
    );
    expect(decodePayload(await ack, pb.HelloAckSchema).version).toBe(PROTOCOL_VERSION_MAX);
    const untrusted = new WebSocket(agent.url("s2"), { headers: { authorization: `Bearer ${SECRET}` } });
    cleanups.push(() => untrusted.terminate());
    await expect(
      new Promise((r, j) => (untrusted.once("open", r), untrusted.once("error", j))),
    ).rejects.toThrow(/self-signed|unable to verify|certificate/);
  });

  it("accepts per-session secrets from a secrets file only for their session", async () => {
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const dir = testScratchDir("agent-secrets-");
    const file = join(dir, "secrets.yaml");
    writeFileSync(file, `sessions:\n  sess-a:\n    secretSha256: ${sha256Hex("secret-a")}\n`);
    const app = await startApp();
    const secrets = new SessionSecrets({ secretsFile: file });
    await secrets.load();
    const { agent } = await startAgent(app.port, { secrets });
    const ok = await AgentClient.connect(agent.url("sess-a"), "secret-a");
    cleanups.push(() => ok.close());
    expect((await ok.ping()).sentAtMicros).toBeGreaterThan(0n);
    const other = await AgentClient.connect(agent.url("sess-b"), "secret-a").catch((e: unknown) => e);
    expect((other as UpgradeRefusedError).status).toBe(401);
  });

  it("answers a frame before Hello and an unsupported version with precise errors", async () => {
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    const raw = await AgentClient.connect(agent.url("s1"), SECRET, { hello: false });
    cleanups.push(() => raw.close());
    const early = await raw.session.ping().catch((e: unknown) => e);
    expect(early).toMatchObject({ kind: pb.ControlKind.ERROR });
    expect(
      (early as { as: (s: typeof pb.ProtocolErrorSchema) => pb.ProtocolError }).as(pb.ProtocolErrorSchema)
        .code,
    ).toBe("SWITCHYARD_HELLO_REQUIRED");
    const refused = await AgentClient.connect(agent.url("s2"), SECRET, {
      versions: { min: 7, max: 9 },
    }).catch((e: unknown) => e);
    expect(String(refused)).toContain(
      `protocol versions ${PROTOCOL_VERSION_MIN}-${PROTOCOL_VERSION_MAX}, the peer 7-9`,
    );
  });

  it("rejects malformed frames without dropping the session", async () => {
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    const c = await connectClient(agent);
    const bad = Buffer.alloc(HEADER_BYTES + 2);
    bad[0] = F.DNS;
    bad[1] = pb.DnsKind.GETADDRINFO;
    bad.writeUInt32BE(77, 4);
    bad.writeUInt32BE(5, 12); // declares 5 bytes, 2 follow
    c.session.send(bad);
    const err = await c.inbox.waitFor((f) => f.kind === pb.ControlKind.ERROR && f.requestId === 77);
    expect(err.as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_FRAME_TRUNCATED");
    // A payload that is not the family's message, on an asynchronous family.
    c.session.send(
      encodeRaw({ family: F.FILE, kind: pb.FileKind.OPEN, requestId: 78 }, Buffer.from([0x0a, 0x7f])),
    );
    const badPayload = await c.inbox.waitFor((f) => f.kind === pb.ControlKind.ERROR && f.requestId === 78);
    expect(badPayload.as(pb.ProtocolErrorSchema)).toMatchObject({
      code: "SWITCHYARD_FRAME_BAD_PAYLOAD",
      frameFamily: F.FILE,
    });
    // Above the payload limit: a precise error, the session stays.
    c.session.send(
      encodeRaw(
        { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.DATA, requestId: 79, connectionId: 1 },
        Buffer.alloc(1024 * 1024 + 1),
      ),
    );
    const big = await c.inbox.waitFor((f) => f.kind === pb.ControlKind.ERROR && f.requestId === 79);
    expect(big.as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_FRAME_OVERSIZED");
    expect((await c.dns("localhost")).error).toBe("");
    // Files without a target pod: a clear "not available", never a wrong answer.
    const noPod = await c.open("/etc/config/app.yaml");
    expect(noPod).toMatchObject({ error: "ENOTSUP", message: expect.stringMatching(/serves no target pod/) });
  });
});

describe("DNS and outgoing connections", () => {
  it("resolves localhost with all its addresses and reports lookup failures as codes", async () => {
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    const c = await connectClient(agent);
    const r = await c.dns("localhost");
    expect(r.error).toBe("");
    expect(r.addresses.map((a) => a.address)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^(127\.0\.0\.1|::1)$/)]),
    );
    const v4 = await c.dns("localhost", 4);
    expect(v4.addresses.every((a) => a.ipFamily === 4)).toBe(true);
    expect((await c.reverse("not-an-ip")).error).toBe("EINVAL");
    expect((await c.dns("no-such-host.invalid")).error).toMatch(/^(ENOTFOUND|EAI_AGAIN|EAI_FAIL)$/);
  });

  it("connects outgoing TCP from --outbound-bind, streams both ways and half-closes", async () => {
    const seen: Array<{ remote: string }> = [];
    const server: TcpServer = createTcpServer({ allowHalfOpen: true }, (s: Socket) => {
      seen.push({ remote: s.remoteAddress ?? "" });
      s.on("data", (d) => s.write(Buffer.concat([Buffer.from("echo:"), d])));
      s.on("end", () => s.end("bye"));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    cleanups.push(() => new Promise((r) => server.close(() => r(undefined))));
    const port = (server.address() as AddressInfo).port;
    const app = await startApp();
    const { agent } = await startAgent(app.port, { outgoing: { bindAddress: "127.0.0.2" } });
    const c = await connectClient(agent);
    const res = await c.tcpConnect(9, "127.0.0.1", port);
    expect(res.error).toBe("");
    expect(res.localAddress).toBe("127.0.0.2");
    c.tcpSend(9, "hello");
    c.tcpClose(9);
    await c.tcpClosed(9);
    expect(c.tcpReceived(9).toString()).toBe("echo:hellobye");
    expect(seen).toEqual([{ remote: "127.0.0.2" }]);
    const refused = await c.tcpConnect(10, "127.0.0.1", 1);
    expect(refused.error).toMatch(/^ECONNREFUSED/);
  });

  it("sends and receives UDP datagrams from the outbound address", async () => {
    const server: UdpSocket = createSocket("udp4");
    const sources: string[] = [];
    server.on("message", (msg, rinfo) => {
      sources.push(rinfo.address);
      server.send(Buffer.concat([Buffer.from("pong:"), msg]), rinfo.port, rinfo.address);
    });
    await new Promise<void>((r) => server.bind(0, "127.0.0.1", () => r()));
    cleanups.push(() => server.close());
    const port = server.address().port;
    const app = await startApp();
    const { agent } = await startAgent(app.port, { outgoing: { bindAddress: "127.0.0.2" } });
    const c = await connectClient(agent);
    const bound = await c.udpBind(3, "127.0.0.1", port);
    expect(bound).toMatchObject({ error: "", localAddress: "127.0.0.2" });
    c.udpSend(3, "ping-1");
    const d = await c.nextDatagram(3);
    expect(Buffer.from(d.data).toString()).toBe("pong:ping-1");
    expect(d).toMatchObject({ address: "127.0.0.1", port });
    expect(sources).toEqual(["127.0.0.2"]);
  });
});

describe("incoming traffic", () => {
  it("steals a port without a filter: the whole keep-alive connection reaches the session", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port);
    const c = await connectClient(agent);
    expect(await c.subscribe(41, app.port, "steal")).toMatchObject({ ok: true, flags: 0 });
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => keepAlive.destroy());
    const first = httpCall(traffic, { path: "/one", agent: keepAlive });
    const conn = await c.nextConnection();
    expect(conn.info).toMatchObject({
      subscriptionId: 41,
      port: app.port,
      mode: pb.TrafficMode.STEAL,
      remoteAddress: "127.0.0.1",
    });
    await conn.untilText("GET /one");
    conn.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nlocal");
    expect((await first).body).toBe("local");
    const second = httpCall(traffic, { path: "/two", agent: keepAlive });
    await conn.untilText("GET /two");
    expect(c.announced).toHaveLength(1); // same connection
    conn.write("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nlocal2");
    expect((await second).body).toBe("local2");
    expect(app.requests).toEqual([]);
  });

  it("a probe relay port reaches the app while a session steals the port", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port, {
      probePorts: [{ appPort: app.port, listenPort: 0 }],
    });
    const relay = agent.probeRelayPorts[0]!;
    const c = await connectClient(agent);
    expect((await c.subscribe(42, app.port, "steal")).ok).toBe(true);
    // The kubelet's probe: answered by the app, never announced to the session.
    expect((await httpCall(relay, { path: "/healthz" })).body).toBe("app GET /healthz body=");
    expect(app.requests).toEqual(["GET /healthz"]);
    // The port itself is still stolen.
    const stolen = httpCall(traffic, { path: "/user" });
    const conn = await c.nextConnection();
    await conn.untilText("GET /user");
    conn.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nlocal");
    expect((await stolen).body).toBe("local");
    expect(c.announced).toHaveLength(1);
  });

  it("mirrors: the app still answers and the session gets a copy", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port);
    const c = await connectClient(agent);
    expect((await c.subscribe(5, app.port, "mirror")).ok).toBe(true);
    const res = await httpCall(traffic, { path: "/mirrored", method: "POST", body: "payload" });
    expect(res.body).toBe("app POST /mirrored body=payload");
    const conn = c.announced[0] ?? (await c.nextConnection());
    expect(conn.info.mode).toBe(pb.TrafficMode.MIRROR);
    await conn.untilText("payload");
    expect(conn.received.toString()).toContain("POST /mirrored HTTP/1.1");
    await conn.untilClosed();
  });

  it("filtered steal: matching requests (chunked bodies, keep-alive) go to the session, the rest to the app", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port);
    const c = await connectClient(agent);
    c.httpHandler = (req) => ({
      status: 201,
      headers: { "x-served-by": "local" },
      body: `local ${req.method} ${req.path} body=${Buffer.from(req.body).toString()}`,
    });
    const filter = {
      filter: {
        case: "allOf" as const,
        value: {
          filters: [
            { filter: { case: "header" as const, value: { name: "X-User", valueRegex: "^alice$" } } },
            { filter: { case: "pathRegex" as const, value: "^/api" } },
          ],
        },
      },
    };
    expect((await c.subscribe(7, app.port, "steal", filter)).ok).toBe(true);
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => keepAlive.destroy());
    const stolen = await httpCall(traffic, {
      path: "/api/x",
      method: "POST",
      headers: { "x-user": "alice" },
      body: ["part1-", "part2"],
      agent: keepAlive,
    });
    expect(stolen).toMatchObject({ status: 201, body: "local POST /api/x body=part1-part2" });
    expect(stolen.headers["x-served-by"]).toBe("local");
    const toApp = await httpCall(traffic, { path: "/api/x", headers: { "x-user": "bob" }, agent: keepAlive });
    expect(toApp.body).toBe("app GET /api/x body=");
    const again = await httpCall(traffic, {
      path: "/api/y",
      headers: { "x-user": "alice" },
      agent: keepAlive,
    });
    expect(again.body).toBe("local GET /api/y body=");
    const req = c.inbox.all
      .find((f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.HTTP_REQUEST)!
      .as(pb.HttpRequestSchema);
    expect(req.headers).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: "Transfer-Encoding", value: "chunked" })]),
    );
    expect(app.requests).toEqual(["GET /api/x"]);
    // Every stolen request's connection id was released again.
    await c.inbox.waitFor(
      (f) =>
        f.family === F.TRAFFIC && f.kind === pb.TrafficKind.CLOSE && f.connectionId === c.announced[1]!.id,
    );
  });

  it("filtered steal of a WebSocket upgrade becomes a raw stolen stream; other upgrades reach the app", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port);
    const c = await connectClient(agent);
    expect(
      (await c.subscribe(8, app.port, "steal", { filter: { case: "pathRegex", value: "^/local-ws" } })).ok,
    ).toBe(true);
    const ws = new WebSocket(`ws://127.0.0.1:${traffic}/local-ws`);
    cleanups.push(() => ws.terminate());
    const conn = await c.nextConnection();
    await conn.untilText("\r\n\r\n");
    const key = /sec-websocket-key: (\S+)/i.exec(conn.received.toString())![1]!;
    const hello = Buffer.from("from-local");
    conn.write(
      Buffer.concat([
        Buffer.from(
          `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${wsAccept(key)}\r\n\r\n`,
        ),
        Buffer.from([0x81, hello.length]),
        hello,
      ]),
    );
    const msg = await new Promise<string>((resolve, reject) => {
      ws.once("message", (m) => resolve(m.toString()));
      ws.once("error", reject);
    });
    expect(msg).toBe("from-local");
    const appWs = new WebSocket(`ws://127.0.0.1:${traffic}/other`);
    cleanups.push(() => appWs.terminate());
    await new Promise((r, j) => (appWs.once("open", r), appWs.once("error", j)));
    appWs.send("hi");
    const echoed = await new Promise<string>((r) => appWs.once("message", (m) => r(m.toString())));
    expect(echoed).toBe("app-echo:hi");
  });

  it("two sessions steal one port with disjoint filters; an overlapping unfiltered steal is refused", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port);
    const alice = await connectClient(agent, "alice");
    const bob = await connectClient(agent, "bob");
    alice.httpHandler = () => ({ status: 200, body: "alice-local" });
    bob.httpHandler = () => ({ status: 200, body: "bob-local" });
    const by = (user: string) => ({
      filter: { case: "header" as const, value: { name: "x-user", valueRegex: `^${user}$` } },
    });
    expect((await alice.subscribe(1, app.port, "steal", by("alice"))).ok).toBe(true);
    expect((await bob.subscribe(1, app.port, "steal", by("bob"))).ok).toBe(true);
    expect((await httpCall(traffic, { headers: { "x-user": "alice" } })).body).toBe("alice-local");
    expect((await httpCall(traffic, { headers: { "x-user": "bob" } })).body).toBe("bob-local");
    expect((await httpCall(traffic, { path: "/p" })).body).toBe("app GET /p body=");
    const carol = await connectClient(agent, "carol");
    const refused = await carol.subscribe(2, app.port, "steal");
    expect(refused.ok).toBe(false);
    expect(refused.flags & FLAG_ERROR).toBe(FLAG_ERROR);
    expect(refused.error).toMatch(
      /^SWITCHYARD_SUBSCRIPTION_CONFLICT: port \d+ is stolen with HTTP filters by 2 other session/,
    );
    const wrongPort = await carol.subscribe(3, 1, "mirror");
    expect(wrongPort.error).toMatch(/^SWITCHYARD_PORT_NOT_SERVED/);
    const badRegex = await carol.subscribe(4, app.port, "steal", {
      filter: { case: "pathRegex", value: "([" },
    });
    expect(badRegex.error).toMatch(/^SWITCHYARD_HTTP_FILTER_INVALID/);
  });
});

describe("session lifetime", () => {
  it("Close drops the session's subscriptions: the app answers again", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port);
    const c = await connectClient(agent);
    c.httpHandler = () => ({ status: 200, body: "local" });
    await c.subscribe(1, app.port, "steal", { filter: { case: "method", value: "GET" } });
    expect((await httpCall(traffic)).body).toBe("local");
    c.closeSession("bye");
    await expect.poll(() => agent.sessions.size).toBe(0);
    expect((await httpCall(traffic)).body).toBe("app GET / body=");
    // The socket stays for the peer to close; the closed session serves nothing more.
    expect(c.session.closed).toBeUndefined();
    await expect(c.dns("localhost")).rejects.toMatchObject({ code: "SWITCHYARD_SESSION_CLOSED" });
  });

  it("a lost WebSocket drops its session, stolen connections and outgoing sockets", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port, { resumeGraceMs: 0 });
    const c = await connectClient(agent);
    await c.subscribe(1, app.port, "steal");
    const pending = httpCall(traffic).catch((e: unknown) => e);
    await c.nextConnection();
    c.close(); // terminate, no Close frame
    expect(await pending).toBeInstanceOf(Error); // the stolen client connection was closed
    await expect.poll(() => agent.sessions.size).toBe(0);
    expect((await httpCall(traffic)).body).toBe("app GET / body=");
  });

  it("holds a lost session's steal: a new connection waits and reaches the session once it re-subscribes", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port, { resumeGraceMs: 30_000 });
    const c = await connectClient(agent, "roaming");
    await c.subscribe(1, app.port, "steal");
    c.close(); // lost, not closed: e.g. the router in between died
    await expect.poll(() => agent.sessions.size).toBe(0);
    expect(agent.subscriptions.forPort(app.port).map((x) => x.held)).toEqual([true]);
    const pending = httpCall(traffic, { path: "/during-the-gap" });
    await expect.poll(() => agent.proxies[0]!.waitingCount).toBe(1);
    // Back through another router: the same session, a new connection, the subscription renewed.
    const back = await connectClient(agent, "roaming");
    const next = back.nextConnection(); // announced while the subscription is renewed
    await back.subscribe(2, app.port, "steal");
    const conn = await next;
    expect(conn.info.subscriptionId).toBe(2);
    await conn.untilText("GET /during-the-gap");
    conn.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nlocal");
    expect((await pending).body).toBe("local");
    expect(app.requests).toEqual([]);
    expect(await agent.metrics.registry.metrics()).toMatch(/^switchyard_agent_held_traffic_total 1$/m);
  });

  it("knows its sessions before it accepts after a restart: a keep-alive connection waits for the session", async () => {
    const app = await startApp();
    const stateFile = join(testScratchDir("agent-journal-"), "state", "subscriptions.json");
    const first = await startAgent(app.port, { resumeGraceMs: 30_000, stateFile });
    const c = await connectClient(first.agent, "roaming");
    await c.subscribe(1, app.port, "steal");
    expect((statSync(stateFile).mode & 0o777).toString(8)).toBe("600");
    // The first agent dies without a word (no close(), as under SIGKILL); the next one starts
    // from the same state and must not hand the session's traffic to the app meanwhile.
    const { agent, traffic } = await startAgent(app.port, { resumeGraceMs: 30_000, stateFile });
    expect(agent.subscriptions.forPort(app.port).map((x) => [x.sessionId, x.mode, x.held])).toEqual([
      ["roaming", "steal", true],
    ]);
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanups.push(() => keepAlive.destroy());
    const pending = httpCall(traffic, { path: "/right-after-restart", agent: keepAlive });
    await expect.poll(() => agent.proxies[0]!.waitingCount).toBe(1);
    const back = await connectClient(agent, "roaming");
    const next = back.nextConnection();
    await back.subscribe(2, app.port, "steal");
    const conn = await next;
    await conn.untilText("GET /right-after-restart");
    conn.write("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nlocal");
    expect((await pending).body).toBe("local");
    expect(app.requests).toEqual([]);
  });

  it("sends the traffic of a restored session that never returns to the app once the grace lapses", async () => {
    const app = await startApp();
    const stateFile = join(testScratchDir("agent-journal-"), "subscriptions.json");
    const first = await startAgent(app.port, { resumeGraceMs: 30_000, stateFile });
    await (await connectClient(first.agent, "gone")).subscribe(1, app.port, "steal");
    const { agent, traffic } = await startAgent(app.port, { resumeGraceMs: 300, stateFile });
    expect(agent.subscriptions.forPort(app.port).map((x) => x.held)).toEqual([true]);
    expect((await httpCall(traffic, { path: "/later" })).body).toBe("app GET /later body=");
    expect(agent.subscriptions.forPort(app.port)).toEqual([]);
    expect(JSON.parse(readFileSync(stateFile, "utf8"))).toEqual({ version: 1, subscriptions: [] });
  });

  it("holds a lost session's filtered steal per request; other requests keep reaching the app", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port, { resumeGraceMs: 30_000 });
    const c = await connectClient(agent, "alice");
    await c.subscribe(1, app.port, "steal", { filter: { case: "method", value: "POST" } });
    c.close();
    await expect.poll(() => agent.sessions.size).toBe(0);
    const held = httpCall(traffic, { method: "POST", path: "/mine", body: "x" });
    await expect.poll(() => agent.proxies[0]!.waitingCount).toBe(1);
    expect((await httpCall(traffic, { path: "/other" })).body).toBe("app GET /other body=");
    const back = await connectClient(agent, "alice");
    back.httpHandler = (r) => ({ status: 200, body: `local ${r.method} ${r.path}` });
    await back.subscribe(2, app.port, "steal", { filter: { case: "method", value: "POST" } });
    expect((await held).body).toBe("local POST /mine");
  });

  it("sends held traffic on to the app when the session does not return within the grace", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port, { resumeGraceMs: 1500 });
    const c = await connectClient(agent, "gone");
    await c.subscribe(1, app.port, "steal");
    c.close();
    await expect.poll(() => agent.sessions.size).toBe(0);
    const r = await httpCall(traffic, { path: "/late" });
    expect(r.body).toBe("app GET /late body=");
    expect(agent.proxies[0]!.metrics.held).toBe(1); // it waited for the session first
    expect(agent.subscriptions.forPort(app.port)).toEqual([]);
  });

  it("drops a session without protocol pings after the ping timeout; a pinging one stays", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port, { pingTimeoutMs: 400, sweepIntervalMs: 50 });
    const silent = await connectClient(agent, "silent");
    const pinging = await connectClient(agent, "pinging");
    await silent.subscribe(1, app.port, "steal");
    const timer = setInterval(() => void pinging.ping().catch(() => {}), 100);
    cleanups.push(() => clearInterval(timer));
    const closed = await silent.session.waitClosed(5000);
    expect(closed.code).toBe(4408);
    expect(silent.inbox.all.some((f) => f.family === F.CONTROL && f.kind === pb.ControlKind.CLOSE)).toBe(
      true,
    );
    expect(pinging.session.closed).toBeUndefined();
    expect([...agent.sessions.keys()]).toEqual(["pinging"]);
    expect(agent.metrics.counters.pingTimeouts).toBe(1);
    expect((await httpCall(traffic)).body).toBe("app GET / body=");
  });

  it("a newer connection for the same session replaces the older one", async () => {
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    const first = await connectClient(agent, "same");
    await first.subscribe(1, app.port, "steal");
    const second = await connectClient(agent, "same");
    expect((await first.session.waitClosed()).code).toBe(4409);
    expect((await second.subscribe(2, app.port, "steal")).ok).toBe(true);
  });
});

describe("backpressure", () => {
  it("a slow protocol peer pauses the outgoing source instead of buffering without bound", async () => {
    const total = 64 * 1024 * 1024;
    const block = Buffer.alloc(64 * 1024, 7);
    let written = 0;
    let blocked = false;
    const server = createTcpServer((s) => {
      const pump = () => {
        while (written < total) {
          written += block.length;
          if (!s.write(block)) {
            blocked = true;
            s.once("drain", () => {
              blocked = false;
              pump();
            });
            return;
          }
        }
        s.end();
      };
      pump();
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    cleanups.push(() => {
      server.close();
    });
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    // A raw peer that stops reading right after the connect result.
    const ws = new WebSocket(agent.url("slow"), {
      headers: { authorization: `Bearer ${SECRET}` },
      perMessageDeflate: false,
    });
    cleanups.push(() => ws.terminate());
    let received = 0;
    let connected: () => void;
    const connectedP = new Promise<void>((r) => (connected = r));
    let closedP: () => void;
    const closed = new Promise<void>((r) => (closedP = r));
    ws.on("message", (d: Buffer) => {
      if (d[0] === F.CONTROL && d[1] === pb.ControlKind.HELLO_ACK) {
        ws.send(
          encodeFrame(
            { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.CONNECT, connectionId: 1, requestId: 2 },
            pb.TcpConnectSchema,
            { host: "127.0.0.1", port: (server.address() as AddressInfo).port },
          ),
        );
      } else if (d[0] === F.OUTGOING_TCP && d[1] === pb.OutgoingKind.CONNECT_RESULT) {
        ws.pause();
        connected();
      } else if (d[0] === F.OUTGOING_TCP && d[1] === pb.OutgoingKind.DATA) {
        received += decodeStreamData(d).length;
      } else if (d[0] === F.OUTGOING_TCP && d[1] === pb.OutgoingKind.CLOSE) closedP();
    });
    await new Promise((r) => ws.once("open", r));
    ws.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.HELLO, requestId: 1 }, pb.HelloSchema, {
        minVersion: PROTOCOL_VERSION_MAX,
        maxVersion: PROTOCOL_VERSION_MAX,
      }),
    );
    await connectedP!;
    // The agent pauses its TCP source, so the server's writes end up blocked.
    await expect
      .poll(() => agent.metrics.counters.backpressurePauses > 0 && blocked, { timeout: 10_000, interval: 20 })
      .toBe(true);
    const session = agent.sessions.get("slow")!;
    const stalledAt = written;
    expect(stalledAt).toBeLessThan(total);
    // Bounded: the high-water mark (1 MiB) plus at most one socket read split into frames.
    expect(session.flow.maxBufferedBytes).toBeLessThan(1024 * 1024 + 512 * 1024);
    ws.resume();
    await closed;
    expect(received).toBe(total);
    expect(session.flow.maxBufferedBytes).toBeLessThan(1024 * 1024 + 512 * 1024);
  });
});

describe("mirror toward a slow peer", () => {
  it("cuts the mirror copy instead of slowing the app or buffering", async () => {
    const app = await startApp();
    const { agent, traffic } = await startAgent(app.port);
    const ws = new WebSocket(agent.url("slow-mirror"), {
      headers: { authorization: `Bearer ${SECRET}` },
      perMessageDeflate: false,
    });
    cleanups.push(() => ws.terminate());
    const frames: Buffer[] = [];
    let subscribed: () => void;
    const subscribedP = new Promise<void>((r) => (subscribed = r));
    ws.on("message", (d: Buffer) => {
      frames.push(d);
      if (d[0] === F.CONTROL && d[1] === pb.ControlKind.HELLO_ACK) {
        ws.send(
          encodeFrame(
            { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.MIRROR, requestId: 2, connectionId: 9 },
            pb.SubscribeSchema,
            { port: app.port },
          ),
        );
      } else if (d[0] === F.SUBSCRIPTION) {
        ws.pause(); // from now on the peer reads nothing
        subscribed();
      }
    });
    await new Promise((r) => ws.once("open", r));
    ws.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.HELLO, requestId: 1 }, pb.HelloSchema, {
        minVersion: PROTOCOL_VERSION_MAX,
        maxVersion: PROTOCOL_VERSION_MAX,
      }),
    );
    await subscribedP!;
    const body = "x".repeat(24 * 1024 * 1024);
    const res = await httpCall(traffic, { method: "POST", path: "/upload", body });
    expect(res.body.length).toBe(`app POST /upload body=`.length + body.length); // the app got everything
    const session = agent.sessions.get("slow-mirror")!;
    expect(session.flow.maxBufferedBytes).toBeLessThan(1024 * 1024 + 512 * 1024);
    expect(agent.proxies[0]!.metrics.mirrorDroppedBytes).toBeGreaterThan(0);
    ws.resume();
    await expect
      .poll(() =>
        frames.some(
          (f) =>
            f[0] === F.TRAFFIC &&
            f[1] === pb.TrafficKind.CLOSE &&
            decodePayload(f, pb.StreamCloseSchema).error.includes("mirror copy cut"),
        ),
      )
      .toBe(true);
  });
});

describe("backpressure toward a slow destination", () => {
  it("stops reading the session while an outgoing socket cannot take more data", async () => {
    const total = 32 * 1024 * 1024;
    let got = 0;
    const sockets: Socket[] = [];
    let allReceived: () => void;
    const done = new Promise<void>((r) => (allReceived = r));
    const server = createTcpServer((s) => {
      sockets.push(s);
      s.pause(); // a destination that does not read (yet)
      s.on("data", (d) => {
        got += d.length;
        if (got === total) allReceived();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    cleanups.push(() => {
      for (const s of sockets) s.destroy();
      server.close();
    });
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    const c = await connectClient(agent, "uploader");
    expect((await c.tcpConnect(1, "127.0.0.1", (server.address() as AddressInfo).port)).error).toBe("");
    const block = Buffer.alloc(256 * 1024, 1);
    for (let sent = 0; sent < total; sent += block.length) c.tcpSend(1, block);
    const session = agent.sessions.get("uploader")!;
    // The agent stops reading the session once the destination's socket is full; the
    // rest of the upload waits in the client's own queue.
    await expect.poll(() => session.flow.readingBlocked, { timeout: 10_000, interval: 10 }).toBe(true);
    expect(session.tcp.maxWriteQueueBytes).toBeGreaterThan(0);
    expect(session.tcp.maxWriteQueueBytes).toBeLessThan(2 * 1024 * 1024);
    expect(c.session.ws.bufferedAmount).toBeGreaterThan(0);
    for (const s of sockets) s.resume();
    await done;
    expect(got).toBe(total);
    expect(session.tcp.maxWriteQueueBytes).toBeLessThan(2 * 1024 * 1024);
  });
});

describe("outgoing bulk toward a destination that reads late", () => {
  it("keeps reading the session until 1 MiB waits for the destination, not one frame", async () => {
    const total = 32 * 1024 * 1024;
    let got = 0;
    const sockets: Socket[] = [];
    let allReceived: () => void;
    const done = new Promise<void>((r) => (allReceived = r));
    const server = createTcpServer((s) => {
      sockets.push(s);
      // Busy at first: the kernel's buffers fill and writes stop completing at once.
      s.pause();
      setTimeout(() => s.resume(), 300);
      s.on("data", (d) => {
        got += d.length;
        if (got === total) allReceived();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    cleanups.push(() => {
      for (const s of sockets) s.destroy();
      server.close();
    });
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    const c = await connectClient(agent, "bulk");
    expect((await c.tcpConnect(1, "127.0.0.1", (server.address() as AddressInfo).port)).error).toBe("");
    const block = Buffer.alloc(256 * 1024, 1);
    for (let sent = 0; sent < total; sent += block.length) c.tcpSend(1, block);
    await done;
    expect(got).toBe(total);
    const session = agent.sessions.get("bulk")!;
    // With Node's 16 KiB mark, the first frame left waiting (256 KiB) stopped the session.
    expect(session.tcp.maxWriteQueueBytes).toBeGreaterThan(256 * 1024);
    expect(session.tcp.maxWriteQueueBytes).toBeLessThanOrEqual(1024 * 1024 + 256 * 1024);
  });
});

describe("metrics", () => {
  it("publishes sessions, subscriptions by mode and errors on /metrics", async () => {
    const app = await startApp();
    const { agent } = await startAgent(app.port);
    const c = await connectClient(agent);
    await c.subscribe(1, app.port, "mirror");
    await c.subscribe(2, 1, "steal");
    const text = await agent.metrics.registry.metrics();
    expect(text).toMatch(/^switchyard_agent_sessions 1$/m);
    expect(text).toMatch(/^switchyard_agent_subscriptions\{mode="mirror"\} 1$/m);
    expect(text).toMatch(/^switchyard_agent_errors_total\{code="SWITCHYARD_PORT_NOT_SERVED"\} 1$/m);
    expect(text).not.toContain("s1");
    expect(text).not.toContain(SECRET);
  });
});
