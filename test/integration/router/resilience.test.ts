// Failure paths with real processes: an upstream dies and returns (re-subscription),
// the session leaves the routing table, a bad table reload, a client moving to a second
// router process, routers composed as Primary → gateway → agents, and bounded memory
// under a slow client or a slow upstream while another session keeps working.
import { afterEach, describe, expect, it, vi } from "vitest";
import * as pb from "../../../proto/gen/session_pb.js";
import { encodeFrame } from "../../../proto/frame-codec.js";
import { ScriptedAgent } from "../../peers/scripted-agent.js";
import { RawSessionClient } from "../../peers/raw-session-client.js";
import { RouterProcess, type RouteSpec } from "./router-process.js";

const F = pb.FrameFamily;
const SECRET = "resilience-secret";
const clusters = ["east", "west", "north"] as const;
type Cluster = (typeof clusters)[number];

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function startAgents(prefix = ""): Promise<Record<Cluster, ScriptedAgent>> {
  const agents = {} as Record<Cluster, ScriptedAgent>;
  for (const c of clusters) {
    agents[c] = new ScriptedAgent({ name: prefix + c, secret: "agent-" + c });
    await agents[c].start();
    cleanup.push(() => agents[c].stop());
  }
  return agents;
}

function route(sessionId: string, agents: Record<Cluster, ScriptedAgent>): RouteSpec {
  return {
    sessionId,
    secret: SECRET,
    upstreams: clusters.map((c) => ({
      cluster: c,
      url: agents[c].url(sessionId),
      secret: "agent-" + c,
      isDefault: c === "east",
    })),
  };
}

async function startRouter(routes: RouteSpec[], args: string[] = []): Promise<RouterProcess> {
  const r = await RouterProcess.start(routes, args);
  cleanup.push(() => r.stop());
  return r;
}

async function connect(
  router: RouterProcess,
  sessionId: string,
  names: readonly string[] = clusters,
): Promise<RawSessionClient> {
  const client = await RawSessionClient.connect(router.sessionUrl(sessionId), SECRET);
  cleanup.push(() => client.close());
  for (const c of names) await client.upstreamStatus(c, pb.UpstreamState.UP);
  return client;
}

const isTraffic = (kind: number) => (f: { family: number; kind: number }) =>
  f.family === F.TRAFFIC && f.kind === kind;

describe("upstream death and return", () => {
  it("reports the loss, closes its connections, keeps serving the others, and re-subscribes on return", async () => {
    const agents = await startAgents();
    const router = await startRouter([route("mc-a", agents)]);
    const client = await connect(router, "mc-a");

    expect((await client.subscribe(21, 8080)).as(pb.SubscriptionResultSchema).ok).toBe(true);
    const announced = client.inbox.next(isTraffic(pb.TrafficKind.NEW_CONNECTION));
    agents.west.emitConnection({ port: 8080, subscriptionId: 21 });
    const westConn = (await announced).connectionId;

    const closedConn = client.inbox.next(
      (f) => isTraffic(pb.TrafficKind.CLOSE)(f) && f.connectionId === westConn,
    );
    const down = client.upstreamStatus("west", pb.UpstreamState.DOWN, 5000, true);
    await agents.west.stop();
    const status = (await down).as(pb.UpstreamStatusSchema);
    expect(status.connectionsClosed).toBe(1);
    expect(status.retryInMs).toBeGreaterThan(0);
    await closedConn;

    // While west is down: pings report it, stateful calls still work, and a new
    // subscription succeeds on the live clusters.
    const pong = (await client.ping()).as(pb.PongSchema);
    expect(pong.clusters.find((c) => c.cluster === "west")?.state).toBe(pb.HealthState.DOWN);
    expect(pong.clusters.filter((c) => c.state === pb.HealthState.OK).map((c) => c.cluster)).toEqual([
      "east",
      "north",
    ]);
    expect(
      (await client.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {})).as(
        pb.EnvResultSchema,
      ).vars.AGENT_NAME,
    ).toBe("east");
    expect((await client.subscribe(22, 9090)).as(pb.SubscriptionResultSchema).ok).toBe(true);
    expect(agents.west.subscriptions.size).toBe(0);

    const subscriptionFramesBefore = client.inbox.count((f) => f.family === F.SUBSCRIPTION);
    const up = client.upstreamStatus("west", pb.UpstreamState.UP, 15_000, true);
    await agents.west.start(); // same port
    await up;
    await vi.waitFor(() => expect([...agents.west.subscriptions.keys()].sort()).toEqual([21, 22]), {
      timeout: 5000,
    });
    // Re-subscription results are the router's, not the client's.
    expect(client.inbox.count((f) => f.family === F.SUBSCRIPTION)).toBe(subscriptionFramesBefore);
    const pong2 = (await client.ping()).as(pb.PongSchema);
    expect(pong2.clusters.every((c) => c.state === pb.HealthState.OK)).toBe(true);
  });

  it("completes a ping when an upstream hangs, marking it timed out", async () => {
    const agents = await startAgents();
    const router = await startRouter([route("mc-hang", agents)], ["--merge-timeout-ms", "300"]);
    const client = await connect(router, "mc-hang");
    agents.north.answerPings = false;
    const pong = (await client.ping(5000)).as(pb.PongSchema);
    expect(pong.clusters.find((c) => c.cluster === "north")?.state).toBe(pb.HealthState.TIMEOUT);
    expect(await router.metric("switchyard_router_events_total", { event: "merge_timeout" })).toBe(1);
  });

  it("detects a silent upstream with WebSocket pings", async () => {
    const agents = await startAgents();
    const router = await startRouter([route("mc-silent", agents)], ["--ws-ping-interval-ms", "200"]);
    const client = await connect(router, "mc-silent");
    agents.north.pauseReading(); // stops reading, so no pong either
    const down = (await client.upstreamStatus("north", pb.UpstreamState.DOWN, 10_000, true)).as(
      pb.UpstreamStatusSchema,
    );
    expect(down.error).toContain("pong");
  });
});

describe("routing table changes", () => {
  it("moves a session to a replaced upstream: the new agent gets its subscriptions, the old one a Close", async () => {
    const agents = await startAgents();
    const router = await startRouter([route("mc-move", agents)]);
    const client = await connect(router, "mc-move");
    expect((await client.subscribe(31, 8080)).as(pb.SubscriptionResultSchema).ok).toBe(true);
    await vi.waitFor(() => expect([...agents.west.subscriptions.keys()]).toEqual([31]));

    // West's agent is replaced (e.g. restarted on another port): same cluster, new URL.
    const replacement = new ScriptedAgent({ name: "west-2", secret: "agent-west" });
    await replacement.start();
    cleanup.push(() => replacement.stop());
    const moved = route("mc-move", agents);
    moved.upstreams = moved.upstreams.map((u) =>
      u.cluster === "west" ? { ...u, url: replacement.url("mc-move") } : u,
    );
    const subscriptionFramesBefore = client.inbox.count((f) => f.family === F.SUBSCRIPTION);
    router.reload([moved]);
    await vi.waitFor(() => expect([...replacement.subscriptions.keys()]).toEqual([31]), { timeout: 5000 });
    // The old agent heard the session end there (so it drops it at once, no hold).
    await agents.west.inbox.waitFor((f) => f.family === F.CONTROL && f.kind === pb.ControlKind.CLOSE);
    // The replay's results are the router's, not the client's; the other clusters kept theirs.
    expect(client.inbox.count((f) => f.family === F.SUBSCRIPTION)).toBe(subscriptionFramesBefore);
    expect([...agents.east.subscriptions.keys()]).toEqual([31]);
  });

  it("closes the client and upstream sockets when the session is removed, and keeps the last good table on a bad reload", async () => {
    const agents = await startAgents();
    const other = await startAgents("b-");
    const router = await startRouter([route("mc-gone", agents), route("mc-stays", other)]);
    const gone = await connect(router, "mc-gone");
    const stays = await connect(router, "mc-stays");

    router.reload("this is: [not a routes file");
    await router.waitForLog((l) => l.msg === "static routes rejected");
    expect((await gone.ping()).kind).toBe(pb.PingKind.PONG);

    router.reload([route("mc-stays", other)]);
    expect((await gone.waitClosed()).code).toBe(4404);
    await vi.waitFor(() => expect(clusters.map((c) => agents[c].socketCount)).toEqual([0, 0, 0]), {
      timeout: 5000,
    });
    expect((await stays.ping()).as(pb.PongSchema).clusters).toHaveLength(3);
  });
});

describe("client reconnect", () => {
  it("resumes the same session through a second router process", async () => {
    const agents = await startAgents();
    const routes = [route("mc-move", agents)];
    const r1 = await startRouter(routes);
    const r2 = await startRouter(routes);
    const c1 = await connect(r1, "mc-move");
    expect((await c1.subscribe(31, 8080)).as(pb.SubscriptionResultSchema).ok).toBe(true);
    await r1.stop();
    await c1.waitClosed();

    const c2 = await connect(r2, "mc-move");
    expect((await c2.subscribe(31, 8080)).as(pb.SubscriptionResultSchema).ok).toBe(true);
    const announced = c2.inbox.next(isTraffic(pb.TrafficKind.NEW_CONNECTION));
    agents.north.emitConnection({ port: 8080, subscriptionId: 31 });
    const id = (await announced).connectionId;
    c2.send(
      encodeFrame({ family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: id }, pb.StreamDataSchema, {
        data: Buffer.from("via r2"),
      }),
    );
    const got = await agents.north.inbox.waitFor((f) => isTraffic(pb.TrafficKind.DATA)(f));
    expect(Buffer.from(got.as(pb.StreamDataSchema).data).toString()).toBe("via r2");
  });
});

describe("composition", () => {
  it("serves a Primary router whose upstreams are gateway routers of workload clusters", async () => {
    const agents = await startAgents();
    // Two gateway routers, each with one child session over "its" agents.
    const gwEast = await startRouter([
      {
        sessionId: "mc-c-east",
        secret: "child-east",
        upstreams: [{ cluster: "pod-a", url: agents.east.url(), secret: "agent-east", isDefault: true }],
      },
    ]);
    const gwWest = await startRouter([
      {
        sessionId: "mc-c-west",
        secret: "child-west",
        upstreams: [
          { cluster: "pod-b", url: agents.west.url(), secret: "agent-west", isDefault: true },
          { cluster: "pod-c", url: agents.north.url(), secret: "agent-north" },
        ],
      },
    ]);
    const primary = await startRouter([
      {
        sessionId: "mc-parent",
        secret: SECRET,
        upstreams: [
          { cluster: "east", url: gwEast.sessionUrl("mc-c-east"), secret: "child-east", isDefault: true },
          { cluster: "west", url: gwWest.sessionUrl("mc-c-west"), secret: "child-west" },
        ],
      },
    ]);
    const client = await connect(primary, "mc-parent", ["east", "west"]);
    expect((await client.ping()).as(pb.PongSchema).clusters.map((c) => c.cluster)).toEqual(["east", "west"]);
    expect((await client.subscribe(41, 8080)).as(pb.SubscriptionResultSchema).ok).toBe(true);
    for (const c of clusters) expect(agents[c].subscriptions.has(41)).toBe(true);
    // Every agent uses connection id 1; the client still sees three distinct ids.
    const ids = new Set<number>();
    for (const c of clusters) {
      const wait = client.inbox.next(isTraffic(pb.TrafficKind.NEW_CONNECTION));
      agents[c].emitConnection({ port: 8080, agentConnId: 1 });
      ids.add((await wait).connectionId);
    }
    expect(ids.size).toBe(3);
    expect(
      (await client.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {})).as(
        pb.EnvResultSchema,
      ).vars.AGENT_NAME,
    ).toBe("east");
  });
});

describe("backpressure", () => {
  const HIGH = 256 * 1024;
  const HARD = 4 * 1024 * 1024;
  const args = ["--high-water-bytes", String(HIGH), "--hard-limit-bytes", String(HARD)];

  it("bounds router memory under a client that stops reading, and another session is not stalled", async () => {
    const agents = await startAgents();
    const other = await startAgents("b-");
    const router = await startRouter([route("mc-slow", agents), route("mc-fast", other)], args);
    const slow = await connect(router, "mc-slow");
    const fast = await connect(router, "mc-fast");
    const announced = slow.inbox.next(isTraffic(pb.TrafficKind.NEW_CONNECTION));
    const agentConn = agents.east.emitConnection({ port: 8080 });
    const id = (await announced).connectionId;

    let received = 0;
    slow.onRaw = (buf) => {
      if (buf[0] === F.TRAFFIC && buf[1] === pb.TrafficKind.DATA && buf.readUInt32BE(8) === id)
        received += buf.length;
    };
    slow.ws.pause();
    const chunk = Buffer.alloc(64 * 1024, 7);
    const frames = 512; // 32 MiB: more than the loopback socket buffers hold
    for (let i = 0; i < frames; i++) agents.east.emitData(agentConn, chunk);

    await vi.waitFor(
      async () =>
        expect(
          await router.metric("switchyard_router_events_total", { event: "backpressure_pause_upstream" }),
        ).toBeGreaterThan(0),
      { timeout: 10_000, interval: 100 },
    );
    // Stalled: the router holds at most about one high-water mark plus a read chunk.
    const buffered = await router.metric("switchyard_router_buffered_bytes", { side: "client" });
    expect(buffered).toBeLessThan(HARD);
    expect(received).toBe(0);
    // The other session is unaffected.
    expect((await fast.ping()).as(pb.PongSchema).clusters).toHaveLength(3);

    slow.ws.resume();
    const total =
      frames *
      encodeFrame({ family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: id }, pb.StreamDataSchema, {
        data: chunk,
      }).length;
    await vi.waitFor(() => expect(received).toBe(total), { timeout: 30_000, interval: 100 });
  });

  it("pauses the client when the Default upstream stops reading, without stalling other sessions", async () => {
    const agents = await startAgents();
    const other = await startAgents("b-");
    const router = await startRouter([route("mc-up-slow", agents), route("mc-up-fast", other)], args);
    const client = await connect(router, "mc-up-slow");
    const fast = await connect(router, "mc-up-fast");
    agents.east.echo = false;
    agents.east.pauseReading();
    const frame = encodeFrame(
      { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.DATA, connectionId: 5 },
      pb.StreamDataSchema,
      { data: Buffer.alloc(64 * 1024, 1) },
    );
    for (let i = 0; i < 512; i++) client.send(frame);

    await vi.waitFor(
      async () =>
        expect(
          await router.metric("switchyard_router_events_total", { event: "backpressure_pause_client" }),
        ).toBeGreaterThan(0),
      { timeout: 10_000, interval: 100 },
    );
    expect(await router.metric("switchyard_router_buffered_bytes", { side: "upstream" })).toBeLessThan(HARD);
    expect((await fast.ping()).as(pb.PongSchema).clusters).toHaveLength(3);

    agents.east.resumeReading();
    await vi.waitFor(() => expect(agents.east.outgoingBytes).toBe(512 * 64 * 1024 + 512 * 4), {
      timeout: 30_000,
      interval: 100,
    });
  });
});
