// SessionClient against an in-process fake router (a real WebSocket server on port 0):
// frames sent right behind the HelloAck are not lost, upgrade refusals map to codes (401
// fatal, 404 retried only just after creation), filtered-steal connections turn into
// HTTP requests or raw connections, remote errors and silence reject requests, a request
// only the Default answers waits (bounded) for the Default upstream to be up, the
// target's mounts come back (or the agent's file error), outgoing TCP streams open (or are
// dropped when refused), a lost router is replaced by the next one with subscriptions
// restored, and a router that never returns ends in one `lost` event.
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import { connect, createServer as createNetServer } from "node:net";
import { Readable } from "node:stream";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer, type WebSocket } from "ws";
import { PROTOCOL_VERSION_MAX } from "../../../../proto/frame-version.js";
import * as pb from "../../../../proto/gen/session_pb.js";
import { encodeStreamData } from "../../../../proto/stream-data-frame.js";
import { decodeFrame, encodeFrame, type DecodedFrame } from "../../../../proto/frame-codec.js";
import type { CliError } from "../cli-errors.js";
import type { IncomingConnection, IncomingHttpRequest } from "./incoming-traffic.js";
import { SessionClient, type UpstreamEvent } from "./session-client.js";

const F = pb.FrameFamily;

class FakeRouter {
  /** Upgrade answer: 0 accepts, else the HTTP status to refuse with. */
  refuse = 0;
  /** Called after each refused upgrade. */
  onRefused: (() => void) | undefined;
  /** Announce the Default upstream up right behind the HelloAck (false: the test does). */
  defaultUpAtHello = true;
  readonly frames: DecodedFrame[] = [];
  socket: WebSocket | undefined;
  onFrame: ((f: DecodedFrame, ws: WebSocket) => void) | undefined;
  private server!: Server;
  private readonly wss = new WebSocketServer({ noServer: true });

  async start(): Promise<string> {
    this.server = createServer();
    this.server.on("upgrade", (req, socket, head) => {
      if (this.refuse) {
        socket.end(
          `HTTP/1.1 ${this.refuse} Refused\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n` +
            JSON.stringify({ code: "SWITCHYARD_TEST", message: "refused by fake" }),
        );
        this.onRefused?.();
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        this.socket = ws;
        ws.on("message", (data: Buffer) => {
          const f = decodeFrame(data);
          this.frames.push(f);
          if (f.header.family === F.CONTROL && f.header.kind === pb.ControlKind.HELLO) {
            ws.send(
              encodeFrame(
                { family: F.CONTROL, kind: pb.ControlKind.HELLO_ACK, requestId: f.header.requestId },
                pb.HelloAckSchema,
                { version: PROTOCOL_VERSION_MAX, peer: "fake-router" },
              ),
            );
            // In the same tick as the ack, as the real router does.
            if (this.defaultUpAtHello) this.upstreamStatus(pb.UpstreamState.UP);
            return;
          }
          this.onFrame?.(f, ws);
        });
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", () => r()));
    return `ws://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1/sessions/mc-0000000000000001`;
  }

  /** Tells the client the Default upstream (east) is up or down. */
  upstreamStatus(state: pb.UpstreamState): void {
    this.socket?.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.UPSTREAM_STATUS }, pb.UpstreamStatusSchema, {
        cluster: "east",
        state,
        isDefault: true,
        ...(state === pb.UpstreamState.DOWN
          ? { error: "404 SWITCHYARD_SESSION_NOT_FOUND", retryInMs: 50 }
          : {}),
      }),
    );
  }

  async stop(): Promise<void> {
    for (const c of this.wss.clients) c.terminate();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function fake(): Promise<{ router: FakeRouter; url: string }> {
  const router = new FakeRouter();
  const url = await router.start();
  cleanup.push(() => router.stop());
  return { router, url };
}

function client(urls: string[], extra: Partial<ConstructorParameters<typeof SessionClient>[0]> = {}) {
  const c = new SessionClient({
    sessionId: "mc-0000000000000001",
    secret: "s3cret",
    urls,
    pingIntervalMs: 0,
    backoff: { initialMs: 10, maxMs: 20, maxAttempts: 3 },
    ...extra,
  });
  cleanup.push(() => c.close());
  return c;
}

describe("SessionClient", () => {
  it("validates its options", () => {
    expect(() => new SessionClient({ sessionId: "x", secret: "s", urls: [] })).toThrow(/urls/);
    expect(() => new SessionClient({ sessionId: "x", secret: "s", urls: ["http://r"] })).toThrow(/ws:\/\//);
    expect(() => new SessionClient({ sessionId: "x", secret: "", urls: ["ws://r"] })).toThrow(/secret/);
  });

  it("keeps frames that arrive in the same tick as the HelloAck", async () => {
    const { url } = await fake();
    const c = client([url]);
    const seen: UpstreamEvent[] = [];
    c.on("upstream", (u) => seen.push(u));
    await c.connect();
    await new Promise((r) => setImmediate(r));
    expect(seen).toEqual([
      { cluster: "east", up: true, isDefault: true, error: "", retryInMs: 0, connectionsClosed: 0 },
    ]);
    expect(c.upstreams.get("east")?.up).toBe(true);
  });

  it("sends frames the router decodes (masked with random keys: router-dial.test.ts)", async () => {
    const { router, url } = await fake();
    const c = client([url]);
    await c.connect();
    const got = new Promise<DecodedFrame>((resolve) => (router.onFrame = (f) => resolve(f)));
    c.setLogLevel("debug");
    const f = await got;
    expect(f.header).toMatchObject({ family: F.CONTROL, kind: pb.ControlKind.LOG_LEVEL });
    expect((f.message as pb.LogLevel).level).toBe("debug");
  });

  it("fails at once on 401 and names the cause", async () => {
    const { router, url } = await fake();
    router.refuse = 401;
    await expect(client([url]).connect()).rejects.toMatchObject({
      code: "SWITCHYARD_CLI_SESSION_UNAUTHORIZED",
    });
  });

  it("retries a 404 just after creation, but not once the grace period is over", async () => {
    const { router, url } = await fake();
    router.refuse = 404;
    const c = client([url], { notFoundGraceMs: 5000 });
    // The first attempt is refused, then the route "arrives".
    router.onRefused = () => {
      router.refuse = 0;
      router.onRefused = undefined;
    };
    const connecting = c.connect();
    await connecting;
    expect(c.state).toBe("open");

    const late = client([url], { notFoundGraceMs: 0 });
    router.refuse = 404;
    await expect(late.connect()).rejects.toMatchObject({ code: "SWITCHYARD_CLI_SESSION_NOT_FOUND" });
  });

  it("holds a Default-only request until the Default upstream is up, then sends it", async () => {
    const { router, url } = await fake();
    router.defaultUpAtHello = false;
    router.onFrame = (f, ws) => {
      if (f.header.family === F.ENV)
        ws.send(
          encodeFrame(
            { family: F.ENV, kind: pb.EnvKind.RESULT, requestId: f.header.requestId },
            pb.EnvResultSchema,
            { vars: { FROM: "east" } },
          ),
        );
    };
    const c = client([url]);
    await c.connect();
    expect(c.defaultUp).toBe(false);
    const env = c.env();
    // The Default's gateway refused its first attempt (its route was still on the way).
    router.upstreamStatus(pb.UpstreamState.DOWN);
    await new Promise((r) => setTimeout(r, 100));
    expect(router.frames.filter((f) => f.header.family === F.ENV)).toHaveLength(0);
    router.upstreamStatus(pb.UpstreamState.UP);
    await expect(env).resolves.toEqual({ FROM: "east" });
    expect(c.defaultUp).toBe(true);
  });

  it("sends a Default-only request anyway once defaultUpWaitMs passed without the Default", async () => {
    const { router, url } = await fake();
    router.defaultUpAtHello = false;
    router.onFrame = (f, ws) => {
      if (f.header.family === F.DNS)
        ws.send(
          encodeFrame(
            { family: F.CONTROL, kind: pb.ControlKind.ERROR, requestId: f.header.requestId },
            pb.ProtocolErrorSchema,
            { code: "SWITCHYARD_UPSTREAM_UNAVAILABLE", message: "upstream east is down", cluster: "east" },
          ),
        );
    };
    const c = client([url], { defaultUpWaitMs: 150 });
    await c.connect();
    const lookup = c.lookup("db");
    await new Promise((r) => setTimeout(r, 50));
    expect(router.frames.filter((f) => f.header.family === F.DNS)).toHaveLength(0);
    await expect(lookup).rejects.toMatchObject({ remoteCode: "SWITCHYARD_UPSTREAM_UNAVAILABLE" });
  });

  it("rejects a request answered with a ProtocolError, and one never answered", async () => {
    const { router, url } = await fake();
    router.onFrame = (f, ws) => {
      if (f.header.family === F.DNS)
        ws.send(
          encodeFrame(
            { family: F.CONTROL, kind: pb.ControlKind.ERROR, requestId: f.header.requestId },
            pb.ProtocolErrorSchema,
            { code: "SWITCHYARD_NO_DEFAULT_UPSTREAM", message: "no default", cluster: "east" },
          ),
        );
    };
    const c = client([url], { requestTimeoutMs: 200 });
    await c.connect();
    await expect(c.lookup("db")).rejects.toMatchObject({
      code: "SWITCHYARD_CLI_REMOTE_ERROR",
      remoteCode: "SWITCHYARD_NO_DEFAULT_UPSTREAM",
      cluster: "east",
    });
    await expect(c.env()).rejects.toMatchObject({ code: "SWITCHYARD_CLI_REQUEST_TIMEOUT" });
  });

  it("turns filtered-steal connections into HTTP requests, or raw connections when bytes come", async () => {
    const { router, url } = await fake();
    router.onFrame = (f, ws) => {
      if (f.header.family === F.SUBSCRIPTION)
        ws.send(
          encodeFrame(
            { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.RESULT, requestId: f.header.requestId },
            pb.SubscriptionResultSchema,
            { ok: true },
          ),
        );
    };
    const c = client([url]);
    await c.connect();
    const sub = await c.subscribe(8080, "steal", { path: "^/api" });
    const gotRequest = new Promise<IncomingHttpRequest>((r) => c.once("httpRequest", r));
    const gotConnection = new Promise<IncomingConnection>((r) => c.once("connection", r));
    const ws = router.socket!;
    const announce = (id: number) =>
      ws.send(
        encodeFrame(
          { family: F.TRAFFIC, kind: pb.TrafficKind.NEW_CONNECTION, connectionId: id },
          pb.NewConnectionSchema,
          { subscriptionId: sub.id, port: 8080, remoteAddress: "10.0.0.5", mode: pb.TrafficMode.STEAL },
        ),
      );
    announce(7);
    ws.send(
      encodeFrame(
        { family: F.TRAFFIC, kind: pb.TrafficKind.HTTP_REQUEST, connectionId: 7, requestId: 7 },
        pb.HttpRequestSchema,
        { method: "GET", path: "/api/x", headers: [{ name: "X-User", value: "alice" }] },
      ),
    );
    announce(8);
    ws.send(
      encodeFrame({ family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: 8 }, pb.StreamDataSchema, {
        data: Buffer.from("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"),
      }),
    );
    const answered = new Promise<DecodedFrame>((resolve) => {
      router.onFrame = (f) => f.header.family === F.TRAFFIC && resolve(f);
    });
    const req = await gotRequest;
    const conn = await gotConnection;
    expect(req.connectionId).toBe(7);
    expect(req.info?.remoteAddress).toBe("10.0.0.5");
    expect(req.header("x-user")).toBe("alice");
    expect(conn.info.id).toBe(8);
    const first = await new Promise<Buffer>((r) => conn.once("data", r));
    expect(first.toString()).toContain("Upgrade: websocket");
    req.respond({ status: 201, body: Buffer.from("ok") });
    const res = await answered;
    expect(res.header).toMatchObject({ kind: pb.TrafficKind.HTTP_RESPONSE, connectionId: 7, requestId: 7 });
    expect((res.message as pb.HttpResponse).status).toBe(201);
  });

  it("streams a stolen request's body and answer as DATA frames, holding reading while the body waits", async () => {
    const { router, url } = await fake();
    router.onFrame = (f, ws) => {
      if (f.header.family === F.SUBSCRIPTION)
        ws.send(
          encodeFrame(
            { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.RESULT, requestId: f.header.requestId },
            pb.SubscriptionResultSchema,
            { ok: true },
          ),
        );
    };
    const c = client([url]);
    await c.connect();
    const sub = await c.subscribe(8080, "steal", { path: "^/" });
    const requests: IncomingHttpRequest[] = [];
    c.on("httpRequest", (r) => requests.push(r));
    const ws = router.socket!;
    const T = pb.TrafficKind;
    const stolen = (id: number) => {
      ws.send(
        encodeFrame({ family: F.TRAFFIC, kind: T.NEW_CONNECTION, connectionId: id }, pb.NewConnectionSchema, {
          subscriptionId: sub.id,
          port: 8080,
          mode: pb.TrafficMode.STEAL,
        }),
      );
      ws.send(
        encodeFrame(
          { family: F.TRAFFIC, kind: T.HTTP_REQUEST, connectionId: id, requestId: id },
          pb.HttpRequestSchema,
          { method: "POST", path: "/up", bodyStreamed: true },
        ),
      );
    };
    const data = (id: number, bytes: Buffer | string) =>
      ws.send(encodeStreamData(F.TRAFFIC, T.DATA, id, Buffer.from(bytes)));
    const bodyEnd = (id: number) =>
      ws.send(
        encodeFrame(
          { family: F.TRAFFIC, kind: T.HTTP_REQUEST_END, connectionId: id },
          pb.HttpBodyEndSchema,
          {},
        ),
      );
    const readAll = async (r: Readable) => {
      const chunks: Buffer[] = [];
      for await (const chunk of r) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    };

    stolen(7);
    data(7, "abc");
    data(7, "def");
    bodyEnd(7);
    await expect.poll(() => requests.length).toBe(1);
    const req = requests[0]!;
    expect(req.body).toBeInstanceOf(Readable);
    expect((await readAll(req.body as Readable)).toString()).toBe("abcdef");
    const out = req.respondStream({
      status: 200,
      headers: [{ name: "content-type", value: "text/event-stream" }],
    });
    out.write("data: 1\n\n");
    out.end("data: 2\n\n");
    await expect
      .poll(() => router.frames.filter((f) => f.header.connectionId === 7).map((f) => f.header.kind))
      .toEqual([T.HTTP_RESPONSE, T.DATA, T.DATA, T.HTTP_RESPONSE_END]);
    const answer = router.frames.filter((f) => f.header.connectionId === 7);
    expect(answer[0]!.message).toMatchObject({ status: 200, bodyStreamed: true });
    expect(Buffer.from((answer[1]!.message as pb.StreamData).data).toString()).toBe("data: 1\n\n");

    // A body nobody reads yet: the client stops reading the router instead of buffering it.
    stolen(9);
    const total = 48 * 1024 * 1024;
    const block = Buffer.alloc(256 * 1024, 9);
    for (let sent = 0; sent < total; sent += block.length) data(9, block);
    bodyEnd(9);
    await expect.poll(() => requests.length).toBe(2);
    const slow = requests[1]!;
    const unread = slow.body as Readable;
    await expect.poll(() => unread.readableLength >= 1024 * 1024, { timeout: 10_000 }).toBe(true);
    await new Promise((r) => setTimeout(r, 200));
    // Reading everything would have buffered the whole body by now.
    expect(unread.readableLength).toBeLessThan(2 * 1024 * 1024);
    expect(ws.bufferedAmount).toBeGreaterThan(0);
    expect((await readAll(slow.body as Readable)).length).toBe(total);
    // The caller leaves before an answer: the exchange's signal aborts.
    ws.send(
      encodeFrame({ family: F.TRAFFIC, kind: T.CLOSE, connectionId: 9 }, pb.StreamCloseSchema, {
        error: "the caller closed its connection",
      }),
    );
    await expect.poll(() => slow.signal.aborted).toBe(true);
    expect(slow.closed).toBe(true);
    expect(slow.respond({ status: 200 })).toBe(false);
  });

  it("reconnects through the next router and re-subscribes under the same id", async () => {
    const acceptSubscriptions = (router: FakeRouter) =>
      (router.onFrame = (f, ws) => {
        if (f.header.family === F.SUBSCRIPTION)
          ws.send(
            encodeFrame(
              { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.RESULT, requestId: f.header.requestId },
              pb.SubscriptionResultSchema,
              { ok: true },
            ),
          );
      });
    const first = await fake();
    const second = await fake();
    acceptSubscriptions(first.router);
    acceptSubscriptions(second.router);
    const c = client([first.url, second.url]);
    await c.connect();
    const sub = await c.subscribe(8080, "mirror");
    const reconnected = new Promise<{ url: string; resubscribed: number; refused: string[] }>((r) =>
      c.once("reconnected", r),
    );
    await first.router.stop();
    expect(await reconnected).toEqual({
      url: second.url,
      resubscribed: 1,
      refused: [],
    });
    expect(c.state).toBe("open");
    const again = second.router.frames.find((f) => f.header.family === F.SUBSCRIPTION);
    expect(again?.header).toMatchObject({ kind: pb.SubscriptionKind.MIRROR, connectionId: sub.id });
  });

  it("opens outgoing TCP streams, and drops one the agent refuses", async () => {
    const { router, url } = await fake();
    router.onFrame = (f, ws) => {
      if (f.header.family !== F.OUTGOING_TCP) return;
      if (f.header.kind === pb.OutgoingKind.CONNECT) {
        const refuse = (f.message as pb.TcpConnect).port === 1;
        ws.send(
          encodeFrame(
            {
              family: F.OUTGOING_TCP,
              kind: pb.OutgoingKind.CONNECT_RESULT,
              requestId: f.header.requestId,
              connectionId: f.header.connectionId,
            },
            pb.ConnectResultSchema,
            { error: refuse ? "connection refused" : "" },
          ),
        );
      } else if (f.header.kind === pb.OutgoingKind.DATA)
        ws.send(
          encodeFrame(
            { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.DATA, connectionId: f.header.connectionId },
            pb.StreamDataSchema,
            { data: Buffer.concat([Buffer.from("echo "), (f.message as pb.StreamData).data]) },
          ),
        );
    };
    const c = client([url]);
    await c.connect();
    await expect(c.connectTcp("db", 1)).rejects.toMatchObject({
      code: "SWITCHYARD_CLI_REMOTE_ERROR",
      remoteCode: "SWITCHYARD_CONNECT_FAILED",
    });
    const s = await c.connectTcp("db", 5432);
    const errors: Error[] = [];
    s.on("error", (e) => errors.push(e));
    const echoed = new Promise<Buffer>((r) => s.once("data", r));
    s.write("hi");
    expect((await echoed).toString()).toBe("echo hi");
    expect(s.id).toBeGreaterThan(0);
    // Closing the client on purpose ends the stream without an error event (a program with
    // no 'error' listener must not crash); a dropped connection does fail it.
    const closed = new Promise<void>((r) => s.once("close", () => r()));
    c.close();
    await closed;
    expect(s.destroyed).toBe(true);
    expect(errors).toEqual([]);
  });

  it("streams a fast local socket in frames of up to 256 KiB, writers held by a full send buffer going on once it flushed", async () => {
    const { router, url } = await fake();
    let received = 0;
    const frameSizes: number[] = [];
    const digest = createHash("sha256");
    router.onFrame = (f, ws) => {
      if (f.header.family !== F.OUTGOING_TCP) return;
      if (f.header.kind === pb.OutgoingKind.CONNECT)
        ws.send(
          encodeFrame(
            {
              family: F.OUTGOING_TCP,
              kind: pb.OutgoingKind.CONNECT_RESULT,
              requestId: f.header.requestId,
              connectionId: f.header.connectionId,
            },
            pb.ConnectResultSchema,
            {},
          ),
        );
      else if (f.header.kind === pb.OutgoingKind.DATA) {
        const data = (f.message as pb.StreamData).data;
        frameSizes.push(data.length);
        digest.update(data);
        received += data.length;
      }
    };
    // A send buffer smaller than one frame: every write waits until the socket flushed.
    const c = client([url], { highWaterBytes: 1024 });
    await c.connect();
    const s = await c.connectTcp("sink", 9);
    s.on("error", () => {});
    // A local program writing as fast as it can, read by the CLI as a proxy reads it.
    const total = 16 * 1024 * 1024;
    const sent = createHash("sha256");
    const local = createNetServer((sock) => sock.pipe(s));
    await new Promise<void>((r) => local.listen(0, "127.0.0.1", () => r()));
    cleanup.push(() => new Promise<void>((r) => local.close(() => r())));
    const writer = connect((local.address() as AddressInfo).port, "127.0.0.1");
    cleanup.push(() => writer.destroy());
    for (let i = 0; i < total / (64 * 1024); i++) {
      const block = Buffer.alloc(64 * 1024, i);
      sent.update(block);
      if (!writer.write(block)) await new Promise((r) => writer.once("drain", r));
    }
    await expect.poll(() => received, { timeout: 20_000 }).toBe(total);
    expect(digest.digest("hex")).toBe(sent.digest("hex"));
    expect(Math.max(...frameSizes)).toBeLessThanOrEqual(256 * 1024);
    // One frame per 64 KiB read would be 256 frames.
    expect(frameSizes.length).toBeLessThan(total / (64 * 1024));
  });

  it("asks the Default agent for the target's mounts, and maps its file error like stat's", async () => {
    const { router, url } = await fake();
    let answer: { paths: string[]; resolvConf: string } | undefined = {
      paths: ["/etc/shop/app.yaml", "/etc/shop"],
      resolvConf: "nameserver 10.96.0.10\n",
    };
    router.onFrame = (f, ws) => {
      if (f.header.family !== F.FILE) return;
      const mounts = f.header.kind === pb.FileKind.MOUNTS;
      ws.send(
        encodeFrame(
          { family: F.FILE, kind: pb.FileKind.RESULT, requestId: f.header.requestId },
          pb.FileResultSchema,
          mounts && answer
            ? { result: { case: "mounts", value: answer } }
            : { error: "ENOTSUP", message: "this agent serves no target pod" },
        ),
      );
    };
    const c = client([url]);
    await c.connect();
    expect(await c.mounts()).toEqual({
      paths: ["/etc/shop/app.yaml", "/etc/shop"],
      resolvConf: "nameserver 10.96.0.10\n",
    });
    expect(
      router.frames.some((f) => f.header.family === F.FILE && f.header.kind === pb.FileKind.MOUNTS),
    ).toBe(true);
    answer = undefined;
    const refused = { code: "SWITCHYARD_CLI_REMOTE_ERROR", remoteCode: "ENOTSUP" };
    await expect(c.mounts()).rejects.toMatchObject({
      ...refused,
      message: "cannot list the target's mounts: ENOTSUP (this agent serves no target pod)",
    });
    await expect(c.stat("/etc/shop")).rejects.toMatchObject(refused);
  });

  it("emits lost once when no router comes back", async () => {
    const { router, url } = await fake();
    const c = client([url]);
    await c.connect();
    const lost: CliError[] = [];
    const reconnecting: number[] = [];
    c.on("reconnecting", (r) => reconnecting.push(r.attempt));
    const gone = new Promise<void>((resolve) =>
      c.on("lost", (e) => {
        lost.push(e);
        resolve();
      }),
    );
    await router.stop();
    await gone;
    expect(reconnecting).toEqual([1, 2, 3]);
    expect(lost).toHaveLength(1);
    expect(lost[0]!.code).toBe("SWITCHYARD_CLI_SESSION_LOST");
    expect(lost[0]!.message).toMatch(/after 3 attempts/);
    expect(c.state).toBe("lost");
  });
});
