// A busy peer is not a dead peer, for the session's router connection, against fake
// routers on real loopback WebSockets with a 300 ms liveness timeout: while the session
// holds reading (the program does not read a large streamed request body), the router's
// answers wait unread — the connection and the requests waiting meanwhile outlive several
// timeouts, the client keeps pinging the router, and the body arrives intact. A router
// that stops reading and sending is still dropped within the timeout (the next one takes
// over), and after 10× the timeout when the session never reads again.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocketServer, type WebSocket } from "ws";
import { PAUSED_SILENCE_FACTOR } from "../../../../lib/peer-liveness.js";
import { decodeFrame, encodeFrame, encodeRaw, HEADER_BYTES } from "../../../../proto/frame-codec.js";
import { PROTOCOL_VERSION_MAX } from "../../../../proto/frame-version.js";
import * as pb from "../../../../proto/gen/session_pb.js";
import { encodeStreamData } from "../../../../proto/stream-data-frame.js";
import type { IncomingHttpRequest } from "./incoming-traffic.js";
import { SessionClient } from "./session-client.js";

const F = pb.FrameFamily;
const T = pb.TrafficKind;
const LIVENESS_MS = 300;
const SESSION = "mc-00000000000000a1";
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A router double: answers Hello, subscriptions and pings at once; counts the client's WebSocket pings. */
async function fakeRouter() {
  const state = { socket: undefined as WebSocket | undefined, clientPings: 0 };
  const server: Server = createServer();
  const wss = new WebSocketServer({ noServer: true });
  server.on("upgrade", (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      state.socket = ws;
      ws.on("ping", () => state.clientPings++);
      ws.on("message", (data: Buffer) => {
        const { header } = decodeFrame(data);
        const reply = { requestId: header.requestId, connectionId: header.connectionId };
        if (header.family === F.CONTROL && header.kind === pb.ControlKind.HELLO)
          ws.send(
            encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.HELLO_ACK, ...reply }, pb.HelloAckSchema, {
              version: PROTOCOL_VERSION_MAX,
              peer: "fake-router",
            }),
          );
        else if (header.family === F.SUBSCRIPTION)
          ws.send(
            encodeFrame(
              { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.RESULT, ...reply },
              pb.SubscriptionResultSchema,
              { ok: true },
            ),
          );
        else if (header.family === F.PING)
          ws.send(
            encodeRaw({ family: F.PING, kind: pb.PingKind.PONG, ...reply }, data.subarray(HEADER_BYTES)),
          );
      });
    }),
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  cleanups.push(() => {
    for (const c of wss.clients) c.terminate();
    server.closeAllConnections();
    return new Promise((r) => server.close(() => r(undefined)));
  });
  return {
    state,
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/v1/sessions/${SESSION}`,
    /** The router hangs: it reads nothing more (so it answers no ping) and sends nothing. */
    freeze: () => state.socket!.pause(),
  };
}

function client(urls: string[], requestTimeoutMs = LIVENESS_MS) {
  const c = new SessionClient({
    sessionId: SESSION,
    secret: "s3cret",
    urls,
    pingIntervalMs: 0,
    requestTimeoutMs,
    livenessTimeoutMs: LIVENESS_MS,
    backoff: { initialMs: 10, maxMs: 20, maxAttempts: 3 },
  });
  cleanups.push(() => c.close());
  const events: string[] = [];
  c.on("reconnecting", (e) => events.push(`reconnecting: ${e.error}`));
  c.on("reconnected", (e) => events.push(`reconnected ${e.url}`));
  c.on("lost", (e) => events.push(`lost: ${e.message}`));
  return { c, events };
}

/** Sends a stolen HTTP request whose streamed body is `blocks` blocks of 256 KiB (block i filled with i % 251). */
function sendStolenUpload(ws: WebSocket, subscriptionId: number, blocks: number): void {
  ws.send(
    encodeFrame({ family: F.TRAFFIC, kind: T.NEW_CONNECTION, connectionId: 9 }, pb.NewConnectionSchema, {
      subscriptionId,
      port: 8080,
      mode: pb.TrafficMode.STEAL,
    }),
  );
  ws.send(
    encodeFrame(
      { family: F.TRAFFIC, kind: T.HTTP_REQUEST, connectionId: 9, requestId: 9 },
      pb.HttpRequestSchema,
      {
        method: "POST",
        path: "/upload",
        bodyStreamed: true,
      },
    ),
  );
  for (let i = 0; i < blocks; i++)
    ws.send(encodeStreamData(F.TRAFFIC, T.DATA, 9, Buffer.alloc(256 * 1024, i % 251)));
  ws.send(
    encodeFrame({ family: F.TRAFFIC, kind: T.HTTP_REQUEST_END, connectionId: 9 }, pb.HttpBodyEndSchema, {}),
  );
}

/** Connects, subscribes, and starts a 32 MiB upload the program does not read yet. */
async function heldUpload(urls: string[], router: Awaited<ReturnType<typeof fakeRouter>>) {
  const { c, events } = client(urls);
  await c.connect();
  const sub = await c.subscribe(8080, "steal", { path: "^/" });
  const requests: IncomingHttpRequest[] = [];
  c.on("httpRequest", (r) => requests.push(r));
  const blocks = 128;
  sendStolenUpload(router.state.socket!, sub.id, blocks);
  await expect.poll(() => requests.length, { timeout: 10_000 }).toBe(1);
  const body = requests[0]!.body as Readable;
  // The session stops reading the router once the unread body passes its buffer.
  await expect.poll(() => body.readableLength >= 1024 * 1024, { timeout: 10_000 }).toBe(true);
  await expect.poll(() => router.state.socket!.bufferedAmount > 0, { timeout: 10_000 }).toBe(true);
  return { c, events, body, blocks };
}

describe("the session's router connection", () => {
  it("outlives the liveness and request timeouts many times over while it holds reading; the body arrives intact", async () => {
    const router = await fakeRouter();
    const { c, events, body, blocks } = await heldUpload([router.url], router);
    // A request made while reading is held: its reply waits behind the body.
    let pingSettled = "";
    const ping = c.ping().then(
      (r) => (pingSettled = `pong ${r.clusters.length}`),
      (e: Error) => (pingSettled = `failed: ${e.message}`),
    );
    const pingsBefore = router.state.clientPings;
    await sleep(6 * LIVENESS_MS);
    expect(c.state).toBe("open");
    expect(events).toEqual([]);
    expect(pingSettled).toBe("");
    expect(router.state.clientPings).toBeGreaterThan(pingsBefore); // the router hears we are busy

    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    const got = Buffer.concat(chunks);
    expect(got.length).toBe(blocks * 256 * 1024);
    for (let i = 0; i < blocks; i++) expect(got[i * 256 * 1024 + 17]).toBe(i % 251);
    await ping;
    expect(pingSettled).toBe("pong 0");
    expect(c.state).toBe("open");
    expect(events).toEqual([]);
  });

  it("drops a router that stops reading and sending within the timeout; the next router takes over", async () => {
    const a = await fakeRouter();
    const b = await fakeRouter();
    const { c, events } = client([a.url, b.url], 60_000);
    await c.connect();
    await sleep(2 * LIVENESS_MS);
    expect(c.state).toBe("open"); // an idle but live router answers the pings
    const since = Date.now();
    a.freeze();
    const inFlight = c.ping().then(
      () => "answered",
      (e: Error) => e.message,
    );
    await expect.poll(() => c.url, { timeout: 5000, interval: 10 }).toBe(b.url);
    expect(Date.now() - since).toBeLessThan(LIVENESS_MS + 1000);
    expect(await inFlight).toMatch(
      /^router ws:\/\/.* sent nothing \(no frame, no pong\) for 300 ms; reconnecting$/,
    );
    expect(events).toContain(`reconnected ${b.url}`);
    expect(c.state).toBe("open");
  });

  it("drops a router silent for 10× the timeout while the session never reads again", async () => {
    const a = await fakeRouter();
    const b = await fakeRouter();
    const started = Date.now();
    const { c } = await heldUpload([a.url, b.url], a);
    a.freeze();
    const ceiling = PAUSED_SILENCE_FACTOR * LIVENESS_MS;
    await expect.poll(() => c.url, { timeout: ceiling + 5000, interval: 20 }).toBe(b.url);
    expect(Date.now() - started).toBeGreaterThan(ceiling);
  });
});
