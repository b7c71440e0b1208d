// The multiplexed connection on its own, over a real WebSocket on loopback: channels carry
// frames both ways, per-channel credit stops only the session that does not read, refusals
// and closes reach the other side, and a broken peer ends the connection.
import { once } from "node:events";
import type { AddressInfo, Socket } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import type { MuxOpen } from "../../../proto/gen/mux_pb.js";
import { channelMessage, MUX_INITIAL_WINDOW_BYTES, openMessage } from "../../../proto/mux-protocol.js";
import type { Refusal } from "../../../proto/session-endpoint.js";
import type { MuxChannel } from "./mux-channel.js";
import { MuxConnection } from "./mux-connection.js";

const log = pino({ level: "silent" });
const cleanup: (() => void)[] = [];
afterEach(() => {
  while (cleanup.length) cleanup.pop()!();
});

interface Pair {
  dialer: MuxConnection;
  gateway: () => MuxConnection;
  /** Channels the gateway accepted, by session id. */
  accepted: Map<string, MuxChannel>;
  /** What each accepted channel delivered, by session id (collected from the accept on). */
  received: Map<string, Buffer[]>;
  rawClient: () => WebSocket;
}

/** A gateway that accepts every session except "refused", and a dialer connected to it. */
async function pair(refuse: (open: MuxOpen) => Refusal | undefined = () => undefined): Promise<Pair> {
  const wss = new WebSocketServer({ port: 0, host: "127.0.0.1" });
  await once(wss, "listening");
  const accepted = new Map<string, MuxChannel>();
  const received = new Map<string, Buffer[]>();
  let gateway: MuxConnection | undefined;
  wss.on("connection", (ws, req) => {
    ws.binaryType = "nodebuffer";
    gateway = new MuxConnection(ws, req.socket as Socket, {
      side: "gateway",
      pingIntervalMs: 30_000,
      idleCloseMs: 60_000,
      log,
      accept: (open, channel) => {
        const r = refuse(open);
        if (r) return r;
        // As a session does: listening from the accept on, since frames may follow the OPEN at once.
        const got: Buffer[] = [];
        received.set(open.sessionId, got);
        accepted.set(open.sessionId, channel);
        channel.on("message", (d: Buffer) => got.push(d));
        return undefined;
      },
    });
  });
  const ws = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/mux/s`);
  ws.binaryType = "nodebuffer";
  const dialer = new MuxConnection(ws, undefined, {
    side: "dialer",
    pingIntervalMs: 30_000,
    idleCloseMs: 60_000,
    log,
  });
  cleanup.push(() => {
    dialer.close(1000, "test over");
    gateway?.close(1000, "test over");
    wss.close();
  });
  return { dialer, gateway: () => gateway!, accepted, received, rawClient: () => ws };
}

const frame = (n: number, fill = 1): Buffer => Buffer.alloc(n, fill);
const until = async (cond: () => boolean, what: string, ms = 5000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe("MuxConnection", () => {
  it("carries each session's frames on its own channel, both ways, sent right after the open", async () => {
    const p = await pair();
    const a = p.dialer.open("ns:a", "secret-a");
    const b = p.dialer.open("ns:b", "secret-b");
    // Frames sent before the connection is up wait, then follow their channel's OPEN.
    const opened = Promise.all([once(a, "open"), once(b, "open")]);
    await opened;
    a.send(Buffer.from("to a"));
    b.send(Buffer.from("to b"));
    await until(
      () => p.received.get("ns:a")?.length === 1 && p.received.get("ns:b")?.length === 1,
      "both frames",
    );
    expect(p.received.get("ns:a")![0]!.toString()).toBe("to a");
    expect(p.received.get("ns:b")![0]!.toString()).toBe("to b");
    const back = once(b, "message");
    p.accepted.get("ns:b")!.send(Buffer.from("from b"));
    expect(((await back)[0] as Buffer).toString()).toBe("from b");
    expect(p.dialer.channelCount).toBe(2);
    expect(p.gateway().channelCount).toBe(2);
  });

  it("stops only the session whose receiver does not read; the other keeps flowing, and it resumes in order", async () => {
    const p = await pair();
    const slow = p.dialer.open("ns:slow", "s");
    const fast = p.dialer.open("ns:fast", "f");
    await Promise.all([once(slow, "open"), once(fast, "open")]);
    slow.send(frame(16));
    fast.send(frame(16));
    await until(() => p.accepted.size === 2, "accepted");
    const slowIn = p.accepted.get("ns:slow")!;
    const slowGot = p.received.get("ns:slow")!;
    const fastGot = p.received.get("ns:fast")!;
    await until(() => slowGot.length === 1 && fastGot.length === 1, "first frames");
    slowIn.pause(); // its session's destination is congested

    // Three windows' worth: one crosses, the rest waits at the sender, uncredited.
    const chunk = 64 * 1024;
    const count = (3 * MUX_INITIAL_WINDOW_BYTES) / chunk;
    for (let i = 0; i < count; i++) slow.send(frame(chunk, i % 250));
    await until(
      () => slow.bufferedAmount >= 2 * MUX_INITIAL_WINDOW_BYTES - chunk,
      "the slow sender to hold its excess",
    );
    expect(slowGot.length).toBe(1); // nothing delivered while paused

    // The other session is not held back: 200 round trips while the slow one is stuck.
    for (let i = 0; i < 200; i++) fast.send(frame(32));
    await until(() => fastGot.length === 201, "the fast session's frames");
    expect(fast.bufferedAmount).toBe(0);

    let drained = 0;
    slow.on("drain", () => drained++);
    slowIn.resume();
    await until(() => slowGot.length === 1 + count, "every slow frame after resume");
    expect(slowGot.slice(1).map((d) => d[0])).toEqual(Array.from({ length: count }, (_, i) => i % 250));
    await until(() => slow.bufferedAmount === 0, "the slow sender to drain");
    expect(drained).toBeGreaterThan(0);
  });

  it("refuses a session the gateway does not accept: the dialer's channel errors, its frames are dropped", async () => {
    const p = await pair((o) =>
      o.sessionId === "ns:nope"
        ? { status: 404, code: "SWITCHYARD_SESSION_NOT_FOUND", message: "no session with this id and secret" }
        : undefined,
    );
    const ch = p.dialer.open("ns:nope", "wrong");
    const errors: string[] = [];
    ch.on("error", (e) => errors.push(e.message));
    const closed = new Promise<number>((resolve) => ch.on("close", (code) => resolve(code)));
    await once(ch, "open");
    ch.send(frame(20));
    expect(await closed).toBe(1008);
    expect(errors).toEqual([
      "gateway refused the session: 404 SWITCHYARD_SESSION_NOT_FOUND: no session with this id and secret",
    ]);
    expect(p.accepted.size).toBe(0);
    await until(() => p.gateway().droppedFrames === 1, "the optimistic frame to be dropped");
    // The connection itself lives on for the next session.
    const ok = p.dialer.open("ns:ok", "s");
    await once(ok, "open");
    ok.send(frame(20));
    await until(() => p.accepted.has("ns:ok"), "the next session");
  });

  it("ends a channel on both sides with the code and reason of either side's close", async () => {
    const p = await pair();
    const a = p.dialer.open("ns:a", "s");
    await once(a, "open");
    a.send(frame(20));
    await until(() => p.accepted.has("ns:a"), "accepted");
    const closedHere = once(a, "close");
    p.accepted.get("ns:a")!.close(4404, "session removed");
    const [code, reason] = (await closedHere) as [number, Buffer];
    expect([code, reason.toString()]).toEqual([4404, "session removed"]);
    expect(p.dialer.channelCount).toBe(0);

    const b = p.dialer.open("ns:b", "s");
    await once(b, "open");
    b.send(frame(20));
    await until(() => p.accepted.has("ns:b"), "accepted b");
    const closedThere = once(p.accepted.get("ns:b")!, "close");
    b.close(1000, "session closed");
    expect(((await closedThere) as [number])[0]).toBe(1000);
    await until(() => p.gateway().channelCount === 0, "the gateway to forget it");
  });

  it("answers a channel's ping with a pong, and ends every channel when the connection is lost", async () => {
    const p = await pair();
    const a = p.dialer.open("ns:a", "s");
    const b = p.dialer.open("ns:b", "s");
    await Promise.all([once(a, "open"), once(b, "open")]);
    const pong = once(a, "pong");
    a.ping();
    await pong;
    const closeOf = (c: MuxChannel) =>
      new Promise<[number, Buffer]>((resolve) => {
        c.on("error", () => {});
        c.on("close", (code, reason) => resolve([code, reason]));
      });
    const lost = Promise.all([closeOf(a), closeOf(b)]);
    p.gateway().fail("test: gateway gone");
    const [[codeA, reasonA]] = await lost;
    expect(codeA).toBe(1006);
    expect(reasonA.toString()).toMatch(/^gateway connection lost/);
    expect(p.dialer.closed).toBe(true);
    // A channel asked of a closed connection ends at once.
    const late = p.dialer.open("ns:c", "s");
    late.on("error", () => {});
    await new Promise((resolve) => late.on("close", resolve));
  });

  it("closes the connection (1002) on a peer that breaks the protocol", async () => {
    const cases: [string, (ws: WebSocket) => void][] = [
      ["a text message", (ws) => ws.send("hello")],
      ["a message too short for a prefix", (ws) => ws.send(Buffer.from([0, 0, 1]))],
      ["an unknown control type", (ws) => ws.send(Buffer.from([0, 0, 0, 0, 99, 0]))],
      [
        "channel ids that do not grow",
        (ws) => {
          ws.send(openMessage({ channel: 5, sessionId: "ns:a", secret: "s" }));
          ws.send(openMessage({ channel: 5, sessionId: "ns:b", secret: "s" }));
        },
      ],
    ];
    for (const [what, send] of cases) {
      const p = await pair();
      await once(p.rawClient(), "open");
      await until(() => !!p.gateway(), "the gateway side");
      const closed = once(p.rawClient(), "close");
      send(p.rawClient());
      const [code] = (await closed) as [number];
      expect(code, what).toBe(1002);
      expect(p.gateway().closed, what).toBe(true);
    }
    // Frames of a channel never opened are only counted.
    const p = await pair();
    await once(p.rawClient(), "open");
    p.rawClient().send(channelMessage(77, frame(20)));
    await until(() => p.gateway()?.droppedFrames === 1, "the stray frame to be counted");
    expect(p.gateway().closed).toBe(false);
  });
});
