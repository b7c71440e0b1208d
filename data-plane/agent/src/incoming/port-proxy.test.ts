import { createServer, request, Agent, type Server, type IncomingHttpHeaders } from "node:http";
import { connect } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { eventually, type PollOptions } from "../../../../test/support/poll.js";
import { PortSubscriptions } from "./port-subscriptions.js";
import { PortProxy } from "./port-proxy.js";
import type {
  ConnectionControl,
  ConnectionSink,
  IncomingConnectionInfo,
  StolenHttpRequest,
  TrafficSession,
} from "./session-handoff.js";
import type { StolenCaller } from "./stolen-caller.js";

const POLL: PollOptions = { timeoutMs: 3000, intervalMs: 10 };

/** A session that records what reaches it and answers stolen requests itself. */
class RecordingSession implements TrafficSession {
  readonly requests: StolenHttpRequest[] = [];
  readonly connections: Array<{
    info: IncomingConnectionInfo;
    data: Buffer[];
    ended: boolean;
    control: ConnectionControl;
  }> = [];
  accept = true;
  constructor(
    readonly id: string,
    private readonly answerRaw?: (data: Buffer, control: ConnectionControl) => void,
  ) {}
  connection(info: IncomingConnectionInfo, control: ConnectionControl): ConnectionSink {
    const rec = { info, data: [] as Buffer[], ended: false, control };
    this.connections.push(rec);
    return {
      data: (chunk) => {
        rec.data.push(chunk);
        this.answerRaw?.(chunk, control);
        return this.accept;
      },
      end: () => {
        rec.ended = true;
      },
    };
  }
  /** How each stolen request's body arrived. */
  readonly bodies: Array<"whole" | "streamed"> = [];
  request(req: StolenHttpRequest, caller: StolenCaller): void {
    this.requests.push(req);
    const answer = (body: Buffer) =>
      caller.respond(
        200,
        [
          ["X-Served-By", this.id],
          ["Content-Type", "text/plain"],
        ],
        Buffer.from(`session ${this.id} got ${req.head.method} ${req.head.path} body=${body.toString()}`),
      );
    if (caller.wholeBody) {
      this.bodies.push("whole");
      return answer(caller.wholeBody);
    }
    this.bodies.push("streamed");
    const chunks: Buffer[] = [];
    caller.readBody({ data: (c) => chunks.push(c), end: () => answer(Buffer.concat(chunks)) });
  }
  mirrored(): string {
    return this.connections.flatMap((c) => c.data.map((d) => d.toString("latin1"))).join("");
  }
}

let app: Server;
let appPort: number;
let appHits: Array<{ method: string; url: string; body: string; headers: IncomingHttpHeaders }>;
let wss: WebSocketServer;
let proxy: PortProxy;
let proxyPort: number;
let subs: PortSubscriptions;
let sessions: Map<string, TrafficSession>;
const agent = new Agent({ keepAlive: true, maxSockets: 1 });

beforeEach(async () => {
  appHits = [];
  app = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      appHits.push({ method: req.method!, url: req.url!, body, headers: req.headers });
      res.setHeader("X-Served-By", "app");
      res.end(`app got ${req.method} ${req.url} body=${body}`);
    });
  });
  wss = new WebSocketServer({ server: app });
  wss.on("connection", (ws) => ws.on("message", (m) => ws.send(`app echo: ${m.toString()}`)));
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", () => r()));
  appPort = (app.address() as { port: number }).port;
  subs = new PortSubscriptions();
  sessions = new Map();
  proxy = new PortProxy({
    listenPort: 0,
    appPort,
    subscriptions: subs,
    subscriptionPort: 8080,
    sessions: (id) => sessions.get(id),
  });
  proxyPort = await proxy.listen();
});

afterEach(async () => {
  agent.destroy();
  await proxy.close();
  wss.close();
  app.closeAllConnections();
  await new Promise((r) => app.close(r));
});

function send(
  path: string,
  opts: { method?: string; headers?: Record<string, string>; body?: string | string[] } = {},
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: proxyPort,
        path,
        method: opts.method ?? "GET",
        headers: opts.headers,
        agent,
      },
      (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    // An array body is sent in several writes: chunked transfer encoding.
    if (Array.isArray(opts.body)) for (const part of opts.body) req.write(part);
    else if (opts.body) req.write(opts.body);
    req.end();
  });
}

function add<T extends TrafficSession>(s: T): T {
  sessions.set(s.id, s);
  return s;
}

describe("PortProxy", () => {
  it("forwards to the app when nobody subscribed, over one keep-alive connection", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await send(`/n/${i}`);
      expect(r.body).toBe(`app got GET /n/${i} body=`);
    }
    expect(appHits).toHaveLength(3);
    expect(proxy.metrics.connections.raw).toBe(1);
  });

  it("mirrors: the app answers and the session gets a copy", async () => {
    const m = add(new RecordingSession("mirror-1")) as RecordingSession;
    subs.subscribe("mirror-1", 8080, "mirror");
    const r = await send("/orders", { method: "POST", body: "hello" });
    expect(r.headers["x-served-by"]).toBe("app");
    expect(r.body).toBe("app got POST /orders body=hello");
    await eventually("the mirrored copy", () => m.mirrored().includes("hello"), POLL);
    expect(m.mirrored()).toMatch(/^POST \/orders HTTP\/1\.1\r\n/);
    expect(m.connections[0]!.info.mode).toBe("mirror");
  });

  it("a slow mirror loses copies but never slows the app path", async () => {
    const m = add(new RecordingSession("slow")) as RecordingSession;
    m.accept = false;
    subs.subscribe("slow", 8080, "mirror");
    const r = await send("/x", { method: "POST", body: "y".repeat(1000) });
    expect(r.body).toContain("app got POST /x");
    await eventually("dropped mirror bytes", () => proxy.metrics.mirrorDroppedBytes > 0, POLL);
  });

  it("steals a whole connection without a filter", async () => {
    const s = add(
      new RecordingSession("thief", (data, control) => {
        if (data.toString().includes("\r\n\r\n")) {
          control.write(
            Buffer.from("HTTP/1.1 200 OK\r\nContent-Length: 6\r\nX-Served-By: thief\r\n\r\nstolen"),
          );
        }
      }),
    ) as RecordingSession;
    subs.subscribe("thief", 8080, "steal");
    const r = await send("/anything");
    expect(r.body).toBe("stolen");
    expect(r.headers["x-served-by"]).toBe("thief");
    expect(appHits).toHaveLength(0);
    expect(s.connections[0]!.info.mode).toBe("steal");
  });

  it("steals only requests matching the filter, per request on one keep-alive connection", async () => {
    const alice = add(new RecordingSession("alice")) as RecordingSession;
    subs.subscribe("alice", 8080, "steal", { header: { name: "X-User", valueRegex: "^alice$" } });
    const a = await send("/api/cart", { headers: { "x-user": "alice" } });
    const b = await send("/api/cart", { headers: { "x-user": "bob" } });
    const c = await send("/api/cart", {
      method: "PUT",
      headers: { "X-User": "alice" },
      body: ["chunk-1,", "chunk-2"],
    });
    const d = await send("/api/cart", { method: "PUT", body: ["to-", "app"] });
    expect(a.headers["x-served-by"]).toBe("alice");
    expect(b.headers["x-served-by"]).toBe("app");
    expect(c.body).toBe("session alice got PUT /api/cart body=chunk-1,chunk-2");
    expect(d.body).toBe("app got PUT /api/cart body=to-app");
    expect(appHits.map((h) => h.headers["x-user"])).toEqual(["bob", undefined]);
    expect(appHits[1]!.headers["transfer-encoding"]).toBe("chunked");
    expect(alice.requests).toHaveLength(2);
    expect(proxy.metrics.connections.http).toBe(1);
  });

  it("serves several sessions with disjoint filters (personal intercepts)", async () => {
    add(new RecordingSession("alice"));
    add(new RecordingSession("bob"));
    subs.subscribe("alice", 8080, "steal", { header: { name: "x-user", valueRegex: "^alice$" } });
    subs.subscribe("bob", 8080, "steal", {
      allOf: [{ header: { name: "x-user", valueRegex: "^bob$" } }, { pathRegex: "^/api" }],
    });
    expect((await send("/api/a", { headers: { "x-user": "alice" } })).headers["x-served-by"]).toBe("alice");
    expect((await send("/api/b", { headers: { "x-user": "bob" } })).headers["x-served-by"]).toBe("bob");
    expect((await send("/web", { headers: { "x-user": "bob" } })).headers["x-served-by"]).toBe("app");
    expect((await send("/api/c")).headers["x-served-by"]).toBe("app");
  });

  it("hands a matching WebSocket upgrade to the session and a non-matching one to the app", async () => {
    const s = add(new RecordingSession("ws-thief")) as RecordingSession;
    subs.subscribe("ws-thief", 8080, "steal", { header: { name: "x-user", valueRegex: "alice" } });
    // Not matching: a real WebSocket conversation with the app through the proxy.
    const ws = new WebSocket(`ws://127.0.0.1:${proxyPort}/chat`);
    const reply = await new Promise<string>((resolve, reject) => {
      ws.on("open", () => ws.send("hi"));
      ws.on("message", (m) => resolve(m.toString()));
      ws.on("error", reject);
    });
    expect(reply).toBe("app echo: hi");
    ws.close();
    // Matching: the session receives the upgrade request as the start of a raw stream.
    const sock = connect(proxyPort, "127.0.0.1");
    sock.write(
      "GET /chat HTTP/1.1\r\nHost: x\r\nX-User: alice\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    );
    await eventually("the stolen upgrade request", () => s.mirrored().includes("Upgrade: websocket"), POLL);
    expect(s.connections[0]!.info.mode).toBe("steal");
    sock.destroy();
  });

  it("hands a small body with a length whole and streams any other, however large", async () => {
    const s = add(new RecordingSession("alice"));
    subs.subscribe("alice", 8080, "steal", { method: "POST" });
    const small = await send("/small", {
      method: "POST",
      headers: { "content-length": "100" },
      body: "x".repeat(100),
    });
    expect(small.body).toBe(`session alice got POST /small body=${"x".repeat(100)}`);
    const large = "y".repeat(3 * 1024 * 1024);
    const big = await send("/big", {
      method: "POST",
      headers: { "content-length": String(large.length) },
      body: large,
    });
    expect(big).toMatchObject({ status: 200, body: `session alice got POST /big body=${large}` });
    const chunked = await send("/chunked", { method: "POST", body: ["a", "b"] });
    expect(chunked.body).toBe("session alice got POST /chunked body=ab");
    expect(s.bodies).toEqual(["whole", "streamed", "streamed"]);
  });

  it("in HTTP mode, answers 431 at once for a request head over 16 KiB", async () => {
    add(new RecordingSession("alice"));
    subs.subscribe("alice", 8080, "steal", { method: "POST" });
    const sock = connect(proxyPort, "127.0.0.1");
    sock.write(`GET /big HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(20 * 1024)}\r\n\r\n`);
    const answer = await new Promise<string>((resolve) => {
      let got = "";
      sock.on("data", (d: Buffer) => (got += d.toString()));
      sock.on("close", () => resolve(got));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
  });

  it("in HTTP mode, answers 502 with a clear body when the app is down", async () => {
    // (In raw mode the client's connection is reset instead, as a closed port would.)
    add(new RecordingSession("alice"));
    subs.subscribe("alice", 8080, "steal", { header: { name: "x-user", valueRegex: "alice" } });
    app.closeAllConnections();
    await new Promise((r) => app.close(r));
    agent.destroy();
    const r = await send("/x", { headers: { connection: "close" } });
    expect(r.status).toBe(502);
    expect(r.body).toContain("application did not answer");
    app.listen(0); // let afterEach close something
  });
});
