// Stolen HTTP requests delivered to a real local HTTP server on loopback: what the local
// process receives (method, path, repeated headers, Host, the body framed by its length,
// no hop-by-hop or Expect headers), what goes back (status, repeated headers with their
// case, whole bodies of chunked answers, HEAD), kept-alive and bounded connections, and a
// 502 naming the reason when the local process does not answer.
import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import * as pb from "../../../../proto/gen/session_pb.js";
import { decodePayload } from "../../../../proto/frame-codec.js";
import { IncomingHttpRequest, type HttpHeaderPair } from "../session/incoming-traffic.js";
import type { SessionClientEvents } from "../session/session-client.js";
import { TrafficDelivery, type TrafficDeliveryOptions } from "./traffic-delivery.js";

const TARGET_PORT = 8080;
const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
  body: string;
  socket: Socket;
}

/** A local app on port 0; `handle` answers (default: 200 "ok"); every request is recorded. */
async function localApp(handle?: (req: IncomingMessage, res: ServerResponse, body: string) => void) {
  const seen: Seen[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, rawHeaders: req.rawHeaders, body, socket: req.socket });
      if (handle) handle(req, res, body);
      else res.end("ok");
    });
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  cleanup.push(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { port: (server.address() as AddressInfo).port, seen, server, sockets };
}

function delivery(localPort: number, options: TrafficDeliveryOptions = {}) {
  const session = new EventEmitter<SessionClientEvents>();
  const d = new TrafficDelivery(session, { ports: new Map([[TARGET_PORT, localPort]]), ...options });
  d.start();
  cleanup.push(() => d.stop());
  let next = 1;
  /** Hands the delivery one stolen request; resolves with the answer it sent back. */
  const steal = (method: string, path: string, headers: HttpHeaderPair[] = [], body = "") =>
    new Promise<pb.HttpResponse>((resolve) => {
      const id = next++;
      const sink = {
        send: (frame: Buffer) => {
          resolve(decodePayload(frame, pb.HttpResponseSchema));
          return true;
        },
        whenWritable: (cb: () => void) => cb(),
      };
      const info = {
        id,
        subscriptionId: 1,
        port: TARGET_PORT,
        remoteAddress: "10.0.0.7",
        remotePort: 40000 + id,
        mode: "steal" as const,
      };
      session.emit(
        "httpRequest",
        new IncomingHttpRequest(id, id, info, method, path, headers, Buffer.from(body), sink),
      );
    });
  return { d, steal };
}

const h = (name: string, value: string): HttpHeaderPair => ({ name, value });
const text = (r: pb.HttpResponse) => Buffer.from(r.body).toString();
const named = (pairs: readonly string[] | readonly HttpHeaderPair[], name: string): string[] => {
  const out: string[] = [];
  if (typeof pairs[0] === "string") {
    const raw = pairs as readonly string[];
    for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  } else
    for (const p of pairs as readonly HttpHeaderPair[]) if (p.name.toLowerCase() === name) out.push(p.value);
  return out;
};

describe("TrafficDelivery: stolen HTTP requests to the local process", () => {
  it("passes method, path, repeated headers and the caller's Host; answers with status, body and repeated headers", async () => {
    const app = await localApp((_req, res) => {
      res.writeHead(201, [
        ["Set-Cookie", "a=1"],
        ["Set-Cookie", "b=2"],
        ["X-Served-By", "local"],
      ]);
      res.end("created");
    });
    const { steal } = delivery(app.port);
    const res = await steal("GET", "/api/orders?id=7", [
      h("Host", "shop.example:8080"),
      h("X-User", "alice"),
      h("X-Multi", "one"),
      h("X-Multi", "two"),
    ]);
    expect(app.seen[0]).toMatchObject({ method: "GET", url: "/api/orders?id=7" });
    const raw = app.seen[0]!.rawHeaders;
    expect(named(raw, "host")).toEqual(["shop.example:8080"]);
    expect(named(raw, "x-multi")).toEqual(["one", "two"]);
    expect(named(raw, "x-user")).toEqual(["alice"]);
    expect(res.status).toBe(201);
    expect(text(res)).toBe("created");
    expect(res.headers.filter((p) => p.name === "Set-Cookie").map((p) => p.value)).toEqual(["a=1", "b=2"]);
    expect(named(res.headers, "x-served-by")).toEqual(["local"]);
    // The agent frames the answer itself.
    expect(named(res.headers, "content-length")).toEqual([]);
    expect(named(res.headers, "connection")).toEqual([]);
  });

  it("adds Host for the local address when the caller sent none", async () => {
    const app = await localApp();
    const { steal } = delivery(app.port);
    expect((await steal("GET", "/")).status).toBe(200);
    expect(named(app.seen[0]!.rawHeaders, "host")).toEqual([`127.0.0.1:${app.port}`]);
  });

  it("sends the body framed by its length, without the caller's framing, hop-by-hop or Expect headers", async () => {
    const app = await localApp((_req, res, body) => res.end(`got ${body.length} bytes`));
    const { steal } = delivery(app.port);
    const body = "x".repeat(70_000);
    const res = await steal(
      "POST",
      "/upload",
      [
        h("Host", "shop.example"),
        h("Transfer-Encoding", "chunked"),
        h("Content-Length", "3"),
        h("Expect", "100-continue"),
        h("Connection", "keep-alive, Upgrade"),
        h("Keep-Alive", "timeout=5"),
        h("Upgrade", "h2c"),
        h("Content-Type", "text/plain"),
      ],
      body,
    );
    expect(text(res)).toBe("got 70000 bytes");
    const raw = app.seen[0]!.rawHeaders;
    expect(app.seen[0]!.body).toBe(body);
    expect(named(raw, "content-length")).toEqual(["70000"]);
    for (const gone of ["transfer-encoding", "expect", "keep-alive", "upgrade"])
      expect(named(raw, gone)).toEqual([]);
    expect(named(raw, "content-type")).toEqual(["text/plain"]);
  });

  it("collects a chunked answer whole and answers HEAD without a body", async () => {
    const app = await localApp((req, res) => {
      res.setHeader("X-Kind", req.method!);
      if (req.method === "HEAD") return res.end();
      res.write("part one, ");
      setTimeout(() => res.end("part two"), 10);
    });
    const { steal } = delivery(app.port);
    const chunked = await steal("GET", "/stream");
    expect(text(chunked)).toBe("part one, part two");
    expect(named(chunked.headers, "transfer-encoding")).toEqual([]);
    const head = await steal("HEAD", "/stream");
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    expect(named(head.headers, "x-kind")).toEqual(["HEAD"]);
  });

  it("keeps connections alive between requests and bounds them per local port", async () => {
    const app = await localApp((_req, res) => setTimeout(() => res.end("slow"), 30));
    const { steal } = delivery(app.port, { http: { connectionsPerPort: 2 } });
    for (let i = 0; i < 5; i++) expect(text(await steal("GET", `/seq/${i}`))).toBe("slow");
    // The pool may open its second connection while the first is finishing an answer.
    expect(new Set(app.seen.map((s) => s.socket)).size).toBeLessThanOrEqual(2);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => steal("GET", `/par/${i}`)));
    expect(answers.map(text)).toEqual(Array(6).fill("slow"));
    expect(new Set(app.seen.map((s) => s.socket)).size).toBe(2);
  });

  it("sends an idempotent request again when the kept-alive connection breaks under it, but not a POST", async () => {
    // The app drops every connection's second request unanswered, as a server closing an
    // idle connection at the moment a request arrives would.
    const served = new WeakMap<Socket, number>();
    const app = await localApp((req, res) => {
      const n = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, n);
      if (n === 2) req.socket.destroy();
      else res.end(`answer ${n}`);
    });
    const { d, steal } = delivery(app.port, { http: { connectionsPerPort: 1 } });
    expect(text(await steal("GET", "/a"))).toBe("answer 1");
    expect(text(await steal("GET", "/b"))).toBe("answer 1");
    expect(app.seen.map((s) => s.url)).toEqual(["/a", "/b", "/b"]);
    const post = await steal("POST", "/c", [], "once");
    expect(post.status).toBe(502);
    expect(app.seen.filter((s) => s.url === "/c")).toHaveLength(1);
    expect(d.stats.failures).toBe(1);
  });

  it("answers 502 naming the port and the reason when nothing listens", async () => {
    const app = await localApp();
    const closedPort = app.port;
    await cleanup.pop()!();
    const errors: string[] = [];
    const { d, steal } = delivery(closedPort, {
      onError: (what, err) => errors.push(`${what}: ${err.message}`),
    });
    const res = await steal("GET", "/down");
    expect(res.status).toBe(502);
    expect(named(res.headers, "content-type")).toEqual(["text/plain"]);
    expect(text(res)).toMatch(
      new RegExp(`^switchyard: the local process did not answer on port ${closedPort}: .*ECONNREFUSED`),
    );
    expect(d.stats).toMatchObject({ httpRequests: 1, failures: 1 });
    expect(errors).toEqual([expect.stringMatching(`^stolen GET /down to local port ${closedPort}: `)]);
  });

  it("answers 502 when the local process takes longer than answerTimeoutMs", async () => {
    const app = await localApp(() => {}); // never answers
    const { steal } = delivery(app.port, { http: { answerTimeoutMs: 200 } });
    const res = await steal("GET", "/hang");
    expect(res.status).toBe(502);
    expect(text(res)).toMatch(/did not answer on port \d+: no answer within 200 ms/);
  });
});
