// A busy peer is not a dead peer: the agent stops reading a session while a local socket
// (here an outgoing connection whose far end does not read) is full, and the peer's pings
// wait unread meanwhile. Over real loopback sockets with a 300 ms ping timeout: such a
// session outlives the timeout many times over and every byte arrives; the agent pings
// the peer while it cannot read it; and a peer that really stops sending is still
// dropped — one timeout after the agent reads again, or after 10× the timeout when the
// agent never does.
import { createServer, type AddressInfo, type Socket } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { PAUSED_SILENCE_FACTOR } from "../../../lib/peer-liveness.js";
import * as pb from "../../../proto/gen/session_pb.js";
import { hashSecret } from "../../../proto/session-auth.js";
import { AgentClient } from "../../../test/peers/agent-client.js";
import { AgentServer } from "./agent-server.js";
import { SessionSecrets } from "./session-secrets.js";
import { TargetView } from "./target/target-view.js";

const SECRET = "liveness-secret";
const PING_TIMEOUT_MS = 300;
const TOTAL = 32 * 1024 * 1024;
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A destination that does not read until `resume()`; counts what it got. */
async function slowDestination() {
  const sockets: Socket[] = [];
  const state = { received: 0, reading: false };
  const server = createServer((s) => {
    sockets.push(s);
    if (!state.reading) s.pause();
    s.on("data", (d) => (state.received += d.length));
    s.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return {
    port: (server.address() as AddressInfo).port,
    state,
    resume() {
      state.reading = true;
      for (const s of sockets) s.resume();
    },
  };
}

/** An agent with a short ping timeout, a session uploading TOTAL bytes to a destination that does not read. */
async function blockedUpload(session: string) {
  const agent = new AgentServer({
    host: "127.0.0.1",
    port: 0,
    secrets: new SessionSecrets({ secretHashes: [hashSecret(SECRET)] }),
    view: new TargetView(undefined, undefined),
    ports: [],
    pingTimeoutMs: PING_TIMEOUT_MS,
    sweepIntervalMs: 25,
    logger: pino({ level: "silent" }),
  });
  await agent.listen();
  cleanups.push(() => agent.close());
  const dest = await slowDestination();
  const client = await AgentClient.connect(agent.url(session), SECRET);
  cleanups.push(() => client.close());
  let agentPings = 0;
  client.session.ws.on("ping", () => agentPings++);
  expect((await client.tcpConnect(1, "127.0.0.1", dest.port)).error).toBe("");
  const block = Buffer.alloc(256 * 1024, 5);
  for (let sent = 0; sent < TOTAL; sent += block.length) client.tcpSend(1, block);
  const s = agent.sessions.get(session)!;
  await expect.poll(() => s.flow.readingBlocked, { timeout: 10_000, interval: 5 }).toBe(true);
  return { agent, dest, client, s, pings: () => agentPings };
}

describe("a session the agent stops reading for backpressure", () => {
  it("outlives the ping timeout many times over, pings its peer meanwhile, and every byte arrives", async () => {
    const { agent, dest, client, s, pings } = await blockedUpload("busy");
    // The client keeps pinging as the CLI does; its pings wait behind the upload.
    const pinger = setInterval(() => void client.session.ping(60_000).catch(() => {}), 100);
    cleanups.push(() => clearInterval(pinger));
    await sleep(6 * PING_TIMEOUT_MS);
    expect(s.flow.readingBlocked).toBe(true);
    expect(agent.metrics.counters.pingTimeouts).toBe(0);
    expect(agent.sessions.get("busy")).toBe(s);
    expect(client.session.closed).toBeUndefined();
    expect(pings()).toBeGreaterThan(0); // the router, in its place, hears the agent is busy

    dest.resume();
    await expect.poll(() => dest.state.received, { timeout: 15_000, interval: 20 }).toBe(TOTAL);
    expect((await client.session.ping()).kind).toBe(pb.PingKind.PONG);
    expect(agent.metrics.counters.pingTimeouts).toBe(0);
    expect(agent.sessions.get("busy")).toBe(s);
  });

  it("still drops a peer that stopped sending and reading, one timeout after reading resumes", async () => {
    const { agent, dest, client } = await blockedUpload("gone");
    client.session.ws.pause(); // from now on the peer neither reads nor sends
    await sleep(4 * PING_TIMEOUT_MS);
    expect(agent.sessions.has("gone")).toBe(true);

    dest.resume();
    const resumedAt = Date.now();
    await expect.poll(() => agent.metrics.counters.pingTimeouts, { timeout: 10_000, interval: 10 }).toBe(1);
    // The backlog is read first (each frame counts), then one timeout of silence.
    expect(Date.now() - resumedAt).toBeGreaterThanOrEqual(PING_TIMEOUT_MS);
    expect(Date.now() - resumedAt).toBeLessThan(PING_TIMEOUT_MS + 3000);
    expect(agent.sessions.has("gone")).toBe(false);
  });

  it("drops a silent peer after 10× the timeout when reading never resumes", async () => {
    const started = Date.now();
    const { agent, client } = await blockedUpload("stuck");
    client.session.ws.pause();
    const ceiling = PAUSED_SILENCE_FACTOR * PING_TIMEOUT_MS;
    await expect
      .poll(() => agent.metrics.counters.pingTimeouts, { timeout: ceiling + 5000, interval: 20 })
      .toBe(1);
    expect(Date.now() - started).toBeGreaterThan(ceiling);
    expect(agent.sessions.has("stuck")).toBe(false);
  });
});
