// Stolen HTTP requests delivered to a real local HTTP server on loopback: what the local
// process receives (method, path, repeated headers, Host, the body framed by its length,
// no hop-by-hop or Expect headers), what goes back (status, repeated headers with their
// case, whole bodies of chunked answers, HEAD), kept-alive and bounded connections, and a
// 502 naming the reason when the local process does not answer.
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import * as pb from "../../../../proto/gen/session_pb.js";
import type { Readable } from "node:stream";
import { decodePayload } from "../../../../proto/frame-codec.js";
import { decodeStreamData } from "../../../../proto/stream-data-frame.js";
import { eventually, type PollOptions } from "../../../../test/support/poll.js";
import { IncomingHttpRequest, StolenRequestBody, type HttpHeaderPair } from "../session/incoming-traffic.js";
import type { SessionClientEvents } from "../session/session-client.js";
import { TrafficDelivery, type TrafficDeliveryOptions } from "./traffic-delivery.js";

const TARGET_PORT = 8080;
const POLL: PollOptions = { timeoutMs: 5000, intervalMs: 10 };
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

/** What went back for one stolen request, assembled from its frames. */
interface Answer {
  status: number;
  headers: pb.HttpHeader[];
  body: Buffer;
  /** The answer came as a head, DATA frames and HTTP_RESPONSE_END. */
  streamed: boolean;
  /** The error of a CLOSE that cut a streamed answer. */
  cut?: string;
}

/** An in-memory session end: records frames, assembles answers, can hold writers back. */
class FakeSink {
  readonly frames: Array<{ kind: number; id: number; raw: Buffer }> = [];
  /** While true, whenWritable waits until `release()`. */
  congested = false;
  #waiting: Array<() => void> = [];
  readonly #answers = new Map<number, { answer: Answer; chunks: Buffer[]; done: (a: Answer) => void }>();

  expect(id: number): Promise<Answer> {
    return new Promise((resolve) => {
      const chunks: Buffer[] = [];
      const answer: Answer = { status: 0, headers: [], body: Buffer.alloc(0), streamed: false };
      const done = (a: Answer) => resolve({ ...a, body: a.streamed ? Buffer.concat(chunks) : a.body });
      this.#answers.set(id, { answer, chunks, done });
    });
  }

  send(frame: Buffer): boolean {
    const kind = frame[1]!;
    const id = frame.readUInt32BE(8);
    this.frames.push({ kind, id, raw: frame });
    const a = this.#answers.get(id);
    if (!a) return true;
    if (kind === pb.TrafficKind.HTTP_RESPONSE) {
      const r = decodePayload(frame, pb.HttpResponseSchema);
      Object.assign(a.answer, { status: r.status, headers: r.headers, streamed: r.bodyStreamed });
      if (!r.bodyStreamed) a.done({ ...a.answer, body: Buffer.from(r.body) });
    } else if (kind === pb.TrafficKind.DATA) a.chunks.push(decodeStreamData(frame));
    else if (kind === pb.TrafficKind.HTTP_RESPONSE_END) a.done(a.answer);
    else if (kind === pb.TrafficKind.CLOSE)
      a.done({ ...a.answer, cut: decodePayload(frame, pb.StreamCloseSchema).error });
    return true;
  }

  whenWritable(cb: () => void): void {
    if (this.congested) this.#waiting.push(cb);
    else cb();
  }

  release(): void {
    this.congested = false;
    for (const cb of this.#waiting.splice(0)) cb();
  }

  /** Holds on reading frames now in force, and ever taken. */
  holding = 0;
  holdsTaken = 0;
  holdInbound(until: (release: () => void) => void): void {
    this.holding++;
    this.holdsTaken++;
    let released = false;
    until(() => {
      if (!released) this.holding--;
      released = true;
    });
  }

  /** Bytes of DATA frames sent for `id`. */
  dataBytes(id: number): number {
    return this.frames
      .filter((f) => f.kind === pb.TrafficKind.DATA && f.id === id)
      .reduce((n, f) => n + decodeStreamData(f.raw).length, 0);
  }
}

function delivery(localPort: number, options: TrafficDeliveryOptions = {}) {
  const session = new EventEmitter<SessionClientEvents>();
  const d = new TrafficDelivery(session, { ports: new Map([[TARGET_PORT, localPort]]), ...options });
  d.start();
  cleanup.push(() => d.stop());
  const sink = new FakeSink();
  let next = 1;
  /** Hands the delivery one stolen request (body whole, or a stream); returns it and its answer. */
  const start = (
    method: string,
    path: string,
    headers: HttpHeaderPair[] = [],
    body: string | Readable = "",
  ) => {
    const id = next++;
    const answer = sink.expect(id);
    const info = {
      id,
      subscriptionId: 1,
      port: TARGET_PORT,
      remoteAddress: "10.0.0.7",
      remotePort: 40000 + id,
      mode: "steal" as const,
    };
    const req = new IncomingHttpRequest(
      id,
      id,
      info,
      method,
      path,
      headers,
      typeof body === "string" ? Buffer.from(body) : body,
      sink,
    );
    session.emit("httpRequest", req);
    return { id, req, answer };
  };
  const steal = (method: string, path: string, headers: HttpHeaderPair[] = [], body = "") =>
    start(method, path, headers, body).answer;
  return { d, steal, start, sink };
}

const h = (name: string, value: string): HttpHeaderPair => ({ name, value });
const text = (r: Answer) => r.body.toString();
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

  it("passes a chunked answer on as it streams and answers HEAD without a body", async () => {
    const app = await localApp((req, res) => {
      res.setHeader("X-Kind", req.method!);
      if (req.method === "HEAD") return res.end();
      res.write("part one, ");
      setTimeout(() => res.end("part two"), 10);
    });
    const { steal } = delivery(app.port);
    const chunked = await steal("GET", "/stream");
    expect(chunked.streamed).toBe(true);
    expect(text(chunked)).toBe("part one, part two");
    expect(named(chunked.headers, "transfer-encoding")).toEqual([]);
    const head = await steal("HEAD", "/stream");
    expect(head.status).toBe(200);
    expect(head).toMatchObject({ streamed: false, body: Buffer.alloc(0) });
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

describe("TrafficDelivery: streamed bodies", () => {
  it("streams a large request body to the local process as it arrives, framed by the caller's length", async () => {
    const app = await localApp((_req, res, body) =>
      res.end(`${body.length} bytes, sha256 ${createHash("sha256").update(body).digest("hex")}`),
    );
    const { start, sink } = delivery(app.port);
    const payload = "z".repeat(5 * 1024 * 1024);
    const body = new StolenRequestBody(sink);
    const { answer } = start("POST", "/upload", [h("Content-Length", String(payload.length))], body);
    for (let at = 0; at < payload.length; at += 256 * 1024)
      body.remoteData(Buffer.from(payload.slice(at, at + 256 * 1024)));
    body.remoteEnd();
    const res = await answer;
    expect(text(res)).toBe(
      `${payload.length} bytes, sha256 ${createHash("sha256").update(payload).digest("hex")}`,
    );
    expect(named(app.seen[0]!.rawHeaders, "content-length")).toEqual([String(payload.length)]);
  });

  it("holds the session's reading while the local process does not read the body", async () => {
    let resumeApp: (() => void) | undefined;
    const app = await localApp();
    app.server.removeAllListeners("request");
    app.server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      req.pause(); // a local process that does not read (yet)
      resumeApp = () => {
        let n = 0;
        req.on("data", (c: Buffer) => (n += c.length));
        req.on("end", () => res.end(`read ${n}`));
        req.resume();
      };
    });
    const { start, sink } = delivery(app.port);
    const body = new StolenRequestBody(sink);
    const total = 16 * 1024 * 1024;
    const { answer } = start("PUT", "/slow-reader", [h("Content-Length", String(total))], body);
    const block = Buffer.alloc(256 * 1024, 1);
    for (let sent = 0; sent < total; sent += block.length) body.remoteData(block);
    body.remoteEnd();
    await eventually(
      "a hold on the session's reading",
      () => sink.holding > 0 && resumeApp !== undefined,
      POLL,
    );
    resumeApp!();
    expect(text(await answer)).toBe(`read ${total}`);
    expect(sink.holding).toBe(0);
  });

  it("releases the session's reading when the local process answers without reading the body, or is down", async () => {
    const app = await localApp();
    app.server.removeAllListeners("request");
    app.server.on("request", (_req: IncomingMessage, res: ServerResponse) => {
      res.writeHead(413, { "content-type": "text/plain", connection: "close" });
      res.end("too large for me");
    });
    const { start, sink } = delivery(app.port);
    const body = new StolenRequestBody(sink);
    const total = 16 * 1024 * 1024;
    const { answer } = start("POST", "/refused", [h("Content-Length", String(total))], body);
    const block = Buffer.alloc(256 * 1024, 1);
    for (let sent = 0; sent < total; sent += block.length) body.remoteData(block);
    expect(sink.holding).toBeGreaterThan(0);
    const res = await answer;
    expect(res.status).toBe(413);
    expect(text(res)).toBe("too large for me");
    expect(sink.holding).toBe(0);

    // Nothing listens: the 502 drops the unread body too.
    const down = await localApp();
    await cleanup.pop()!();
    const { start: startDown, sink: sinkDown } = delivery(down.port);
    const unread = new StolenRequestBody(sinkDown);
    const refused = startDown("POST", "/down", [h("Content-Length", String(total))], unread);
    for (let sent = 0; sent < total; sent += block.length) unread.remoteData(block);
    expect(sinkDown.holding).toBeGreaterThan(0);
    expect((await refused.answer).status).toBe(502);
    expect(sinkDown.holding).toBe(0);
  });

  it("sends a streamed answer's head at once and each event as the local process writes it", async () => {
    let writeEvent!: (e: string) => void;
    let endStream!: () => void;
    const app = await localApp((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      writeEvent = (e) => res.write(`data: ${e}\n\n`);
      endStream = () => res.end();
    });
    const { start, sink } = delivery(app.port);
    const { id, answer } = start("GET", "/events");
    const frames = () => sink.frames.filter((f) => f.id === id).map((f) => f.kind);
    await eventually("the answer's head", () => frames().includes(pb.TrafficKind.HTTP_RESPONSE), POLL);
    const head = decodePayload(sink.frames.find((f) => f.id === id)!.raw, pb.HttpResponseSchema);
    expect(head.bodyStreamed).toBe(true);
    expect(named(head.headers, "content-type")).toEqual(["text/event-stream"]);
    writeEvent("1");
    await eventually("the first event", () => sink.dataBytes(id) === "data: 1\n\n".length, POLL);
    writeEvent("2");
    await eventually("the second event", () => sink.dataBytes(id) === 2 * "data: 1\n\n".length, POLL);
    expect(frames()).not.toContain(pb.TrafficKind.HTTP_RESPONSE_END);
    endStream();
    expect(text(await answer)).toBe("data: 1\n\ndata: 2\n\n");
  });

  it("streams a large answer with its length and pauses the local process while the session is congested", async () => {
    const total = 24 * 1024 * 1024;
    let blocked = false;
    const app = await localApp((_req, res) => {
      res.writeHead(200, { "content-length": String(total) });
      const block = Buffer.alloc(64 * 1024, 2);
      let written = 0;
      const pump = () => {
        while (written < total) {
          written += block.length;
          if (!res.write(block)) {
            blocked = true;
            return void res.once("drain", () => ((blocked = false), pump()));
          }
        }
        res.end();
      };
      pump();
    });
    const { start, sink } = delivery(app.port);
    sink.congested = true;
    const { id, answer } = start("GET", "/download");
    await eventually("the local process to be held back", () => blocked, POLL);
    // Held back: what left is a small part of the answer, not all of it.
    expect(sink.dataBytes(id)).toBeLessThan(total / 2);
    sink.release();
    const res = await answer;
    expect(res.streamed).toBe(true);
    expect(res.body.length).toBe(total);
    expect(named(res.headers, "content-length")).toEqual([String(total)]);
  });

  it("stops the local request when the caller leaves mid-answer", async () => {
    let localClosed = false;
    const app = await localApp((req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("data: hello\n\n");
      res.on("close", () => (localClosed = true));
    });
    const errors: string[] = [];
    const { start, sink } = delivery(app.port, { onError: (what) => errors.push(what) });
    const { id, req } = start("GET", "/events");
    await eventually("the first event", () => sink.dataBytes(id) > 0, POLL);
    req.remoteClose("the caller closed its connection");
    await eventually("the local request to end", () => localClosed, POLL);
    expect(req.signal.aborted).toBe(true);
    // Nobody to answer, nothing counted as a delivery failure.
    await new Promise((r) => setTimeout(r, 50));
    expect(errors).toEqual([]);
    expect(sink.frames.filter((f) => f.id === id && f.kind === pb.TrafficKind.CLOSE)).toEqual([]);
  });

  it("cuts a streamed answer with a CLOSE naming the reason when the local process breaks off", async () => {
    const app = await localApp((req, res) => {
      res.writeHead(200);
      res.write("partial");
      setTimeout(() => req.socket.destroy(), 20);
    });
    const { steal } = delivery(app.port);
    const res = await steal("GET", "/broken");
    expect(res.streamed).toBe(true);
    expect(res.cut).toBeTruthy();
  });
});
