// A busy peer is not a dead peer, for both of the router's sweeps (the client and each
// upstream link), over real loopback WebSockets with a 250 ms ping interval (a peer may be
// silent for 500 ms): when the router stops reading a peer for backpressure, that peer's
// pongs wait unread and must not count against it; when a peer stops reading the router
// but pings it (what the agent and the CLI do while they cannot read), it is busy, not
// dead. A large transfer under backpressure for several multiples of the timeout then
// arrives whole. A peer that stops reading and sending is still dropped in time.
import { create } from "@bufbuild/protobuf";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { decodePayload, encodeFrame } from "../../../proto/frame-codec.js";
import { SessionRouteSchema, SessionState } from "../../../proto/gen/route_discovery_pb.js";
import * as pb from "../../../proto/gen/session_pb.js";
import { hashSecret } from "../../../proto/session-auth.js";
import { RawSessionClient } from "../../../test/peers/raw-session-client.js";
import { ScriptedAgent } from "../../../test/peers/scripted-agent.js";
import { RouterServer } from "./router-server.js";

const F = pb.FrameFamily;
const SECRET = "liveness-client-secret";
const PING_INTERVAL_MS = 250;
const SILENCE_MS = 2 * PING_INTERVAL_MS;
const HOLD_MS = 6 * SILENCE_MS; // well past the timeout, below the 10× ceiling
const CHUNK = Buffer.alloc(64 * 1024, 7);
const FRAMES = 512; // 32 MiB: far more than the loopback buffers and the high-water marks
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function setup(sessionId: string) {
  const east = new ScriptedAgent({ name: "east", secret: "agent-east" });
  await east.start();
  cleanups.push(() => east.stop());
  const router = new RouterServer({
    host: "127.0.0.1",
    port: 0,
    limits: { wsPingIntervalMs: PING_INTERVAL_MS },
    logger: pino({ level: "silent" }),
  });
  router.table.apply({
    fullResync: true,
    version: "v1",
    removes: [],
    upserts: [
      create(SessionRouteSchema, {
        sessionId,
        clientKeyHash: hashSecret(SECRET),
        state: SessionState.READY,
        upstreams: [{ cluster: "east", url: east.url(sessionId), secret: "agent-east", isDefault: true }],
      }),
    ],
  });
  const { port } = await router.listen();
  cleanups.push(() => router.close());
  const client = await RawSessionClient.connect(`ws://127.0.0.1:${port}/v1/sessions/${sessionId}`, SECRET);
  cleanups.push(() => client.close());
  await client.upstreamStatus("east", pb.UpstreamState.UP);
  const session = router.sessions.get(sessionId)!;
  const link = [...session.upstreamLinks()][0]!;
  // Any DOWN report from here on is a link the router gave up.
  const downs: string[] = [];
  client.onRaw = (buf) => {
    if (buf[0] !== F.CONTROL || buf[1] !== pb.ControlKind.UPSTREAM_STATUS) return;
    const status = decodePayload(buf, pb.UpstreamStatusSchema);
    if (status.state === pb.UpstreamState.DOWN) downs.push(status.error);
  };
  return { east, router, client, session, link, downs };
}

function every(ms: number, fn: () => void): void {
  const t = setInterval(fn, ms);
  cleanups.push(() => clearInterval(t));
}

describe("the router's liveness sweeps under backpressure", () => {
  it("keeps an upstream it stops reading because the client is slow, and the client that pings meanwhile", async () => {
    const { east, router, client, session, link, downs } = await setup("mc-slow-client");
    const announced = client.inbox.next(
      (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.NEW_CONNECTION,
    );
    const conn = east.emitConnection({ port: 8080 });
    const id = (await announced).connectionId;
    let received = 0;
    const count = client.onRaw!;
    client.onRaw = (buf) => {
      count(buf);
      if (buf[0] === F.TRAFFIC && buf[1] === pb.TrafficKind.DATA && buf.readUInt32BE(8) === id)
        received += buf.length;
    };
    client.stopRecording();
    client.ws.pause(); // the client's program is slow: it reads nothing for a while…
    every(SILENCE_MS / 4, () => client.ws.ping()); // …but says it lives, as the CLI does
    for (let i = 0; i < FRAMES; i++) east.emitData(conn, CHUNK);

    await expect.poll(() => link.readingPaused, { timeout: 10_000, interval: 5 }).toBe(true);
    await sleep(HOLD_MS);
    expect(link.readingPaused).toBe(true);
    expect(link.state).toBe("open");
    expect(downs).toEqual([]);
    expect(router.sessions.get("mc-slow-client")).toBe(session);
    expect(client.closed).toBeUndefined();

    client.ws.resume();
    const frameBytes = encodeFrame(
      { family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: id },
      pb.StreamDataSchema,
      { data: CHUNK },
    ).length;
    await expect.poll(() => received, { timeout: 20_000, interval: 20 }).toBe(FRAMES * frameBytes);
    expect(link.state).toBe("open");
    expect(downs).toEqual([]);
    expect((await client.ping()).as(pb.PongSchema).clusters.map((c) => c.state)).toEqual([pb.HealthState.OK]);
  });

  it("keeps a busy upstream that stops reading but pings, and the client it stops reading meanwhile", async () => {
    const { east, router, client, session, link, downs } = await setup("mc-slow-agent");
    east.echo = false;
    east.pauseReading(); // the agent's local socket is full: it reads nothing for a while…
    every(SILENCE_MS / 4, () => east.pingRouter()); // …but says it lives, as the real agent does
    const frame = encodeFrame(
      { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.DATA, connectionId: 5 },
      pb.StreamDataSchema,
      { data: CHUNK },
    );
    for (let i = 0; i < FRAMES; i++) client.send(frame);

    await expect
      .poll(() => router.metrics.eventCount("backpressure_pause_client"), { timeout: 10_000, interval: 5 })
      .toBeGreaterThan(0);
    await sleep(HOLD_MS);
    expect(link.state).toBe("open");
    expect(downs).toEqual([]);
    expect(router.sessions.get("mc-slow-agent")).toBe(session);
    expect(client.closed).toBeUndefined();
    expect(client.ws.bufferedAmount).toBeGreaterThan(0); // the router still does not read it

    east.resumeReading();
    await expect
      .poll(() => east.outgoingBytes, { timeout: 20_000, interval: 20 })
      .toBe(FRAMES * CHUNK.length + FRAMES * 4);
    expect(link.state).toBe("open");
    expect(downs).toEqual([]);
  });

  it("still drops an upstream that stops reading and sending, within the timeout", async () => {
    const { east, link, downs } = await setup("mc-dead-agent");
    const since = Date.now();
    east.pauseReading();
    await expect.poll(() => link.state, { timeout: 5000, interval: 5 }).toBe("down");
    expect(Date.now() - since).toBeLessThan(SILENCE_MS + 1000);
    expect(link.lastError).toContain("pong");
    await expect.poll(() => downs.length).toBe(1);
  });

  it("still drops a client that stops reading and sending, within the timeout", async () => {
    const { router, client } = await setup("mc-dead-client");
    const since = Date.now();
    client.ws.pause();
    await expect
      .poll(() => router.sessions.get("mc-dead-client"), { timeout: 5000, interval: 5 })
      .toBeUndefined();
    expect(Date.now() - since).toBeLessThan(SILENCE_MS + 1000);
  });
});
