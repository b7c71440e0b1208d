// The routing core in-process (DESIGN §5): a RouterServer on loopback, three scripted
// agents as its upstreams (east is the Default) and a raw session client. Every rule is
// checked from both ends: what each agent received, and what the client got back.
import { create } from "@bufbuild/protobuf";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { encodeFrame, FLAG_ERROR } from "../../../proto/frame-codec.js";
import { SessionRouteSchema, SessionState } from "../../../proto/gen/route_discovery_pb.js";
import * as pb from "../../../proto/gen/session_pb.js";
import { hashSecret } from "../../../proto/session-auth.js";
import type { ReceivedFrame } from "../../../test/peers/frame-inbox.js";
import { RawSessionClient } from "../../../test/peers/raw-session-client.js";
import { ScriptedAgent } from "../../../test/peers/scripted-agent.js";
import { RouterServer } from "./router-server.js";

const F = pb.FrameFamily;
const SESSION = "mc-routing";
const SECRET = "client-secret-routing";
const clusters = ["east", "west", "north"] as const;
type Cluster = (typeof clusters)[number];

let agents: Record<Cluster, ScriptedAgent>;
let router: RouterServer;
let client: RawSessionClient;
let routerPort: number;

beforeEach(async () => {
  agents = {
    east: new ScriptedAgent({ name: "east", secret: "agent-east" }),
    west: new ScriptedAgent({ name: "west", secret: "agent-west" }),
    north: new ScriptedAgent({ name: "north", secret: "agent-north" }),
  };
  for (const c of clusters) await agents[c].start();
  router = new RouterServer({
    host: "127.0.0.1",
    port: 0,
    logger: pino({ level: "silent" }),
    limits: { mergeTimeoutMs: 300, backoff: { initialMs: 20, maxMs: 50 } },
  });
  router.table.apply({
    fullResync: true,
    version: "v1",
    removes: [],
    upserts: [
      create(SessionRouteSchema, {
        sessionId: SESSION,
        clientKeyHash: hashSecret(SECRET),
        state: SessionState.READY,
        upstreams: clusters.map((c) => ({
          cluster: c,
          url: agents[c].url(`child-${c}`),
          secret: `agent-${c}`,
          isDefault: c === "east",
        })),
      }),
    ],
  });
  const { port } = await router.listen();
  routerPort = port;
  client = await RawSessionClient.connect(`ws://127.0.0.1:${port}/v1/sessions/${SESSION}`, SECRET);
  for (const c of clusters) await client.upstreamStatus(c, pb.UpstreamState.UP);
});

afterEach(async () => {
  client?.close();
  await router?.close();
  for (const c of clusters) await agents?.[c]?.stop();
});

const received = (c: Cluster, family: number, kind?: number) =>
  agents[c].inbox.count((f) => f.family === family && (kind === undefined || f.kind === kind));
const isError = (f: ReceivedFrame) => f.family === F.CONTROL && f.kind === pb.ControlKind.ERROR;
const text = (f: ReceivedFrame) => Buffer.from(f.as(pb.StreamDataSchema).data).toString();

function traffic(kind: pb.TrafficKind, connectionId: number, data = ""): Buffer {
  if (kind === pb.TrafficKind.CLOSE)
    return encodeFrame({ family: F.TRAFFIC, kind, connectionId }, pb.StreamCloseSchema, {});
  return encodeFrame({ family: F.TRAFFIC, kind, connectionId }, pb.StreamDataSchema, {
    data: Buffer.from(data),
  });
}

/** Every agent announces a connection with the same agent id; returns the client's ids. */
async function collidingConnections(agentConnId = 1): Promise<Record<Cluster, number>> {
  const ids = {} as Record<Cluster, number>;
  for (const c of clusters) {
    const wait = client.inbox.next((f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.NEW_CONNECTION);
    agents[c].emitConnection({ port: 8080, agentConnId });
    ids[c] = (await wait).connectionId;
  }
  return ids;
}

describe("client frames to upstreams", () => {
  const defaultOnly: Array<[string, number, () => Promise<ReceivedFrame>]> = [
    ["env", F.ENV, () => client.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {})],
    [
      "file",
      F.FILE,
      () =>
        client.request({ family: F.FILE, kind: pb.FileKind.STAT }, pb.FileStatSchema, { path: "/etc/hosts" }),
    ],
    [
      "dns",
      F.DNS,
      () =>
        client.request({ family: F.DNS, kind: pb.DnsKind.GETADDRINFO }, pb.DnsGetAddrInfoSchema, {
          host: "db",
        }),
    ],
    [
      "outgoing tcp",
      F.OUTGOING_TCP,
      () =>
        client.request(
          { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.CONNECT, connectionId: 7 },
          pb.TcpConnectSchema,
          { host: "db", port: 5432 },
        ),
    ],
    [
      "outgoing udp",
      F.OUTGOING_UDP,
      () =>
        client.request(
          { family: F.OUTGOING_UDP, kind: pb.OutgoingKind.CONNECT, connectionId: 8 },
          pb.UdpBindSchema,
          { host: "dns", port: 53 },
        ),
    ],
  ];
  it.each(defaultOnly)("sends %s to the Default upstream only", async (_name, family, call) => {
    const reply = await call();
    expect(reply.family).toBe(family);
    expect([received("east", family), received("west", family), received("north", family)]).toEqual([
      1, 0, 0,
    ]);
  });

  it("answers a request queued for a Default that did not come up with an error, not silence", async () => {
    // A session whose Default gateway does not know it yet (its route arrives later): the
    // link's first attempt is refused after the client's request was queued behind it.
    agents.east.refuseUpgrades = { count: 1, delayMs: 300 };
    router.table.apply({
      fullResync: false,
      version: "v2",
      removes: [],
      upserts: [
        create(SessionRouteSchema, {
          sessionId: "mc-late",
          clientKeyHash: hashSecret(SECRET),
          state: SessionState.READY,
          upstreams: [
            { cluster: "east", url: agents.east.url("late"), secret: "agent-east", isDefault: true },
          ],
        }),
      ],
    });
    const late = await RawSessionClient.connect(`ws://127.0.0.1:${routerPort}/v1/sessions/mc-late`, SECRET);
    try {
      const reply = await late.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {});
      expect(isError(reply)).toBe(true);
      const e = reply.as(pb.ProtocolErrorSchema);
      expect(e.code).toBe("SWITCHYARD_UPSTREAM_UNAVAILABLE");
      expect(e.message).toMatch(
        /upstream east did not come up \(.*404.*\); retry after its UpstreamStatus UP/,
      );
      // The link retries; once up, the same request is answered.
      await late.upstreamStatus("east", pb.UpstreamState.UP);
      const again = await late.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {});
      expect(again.as(pb.EnvResultSchema).vars.AGENT_NAME).toBe("east");
    } finally {
      late.close();
    }
  });

  it("answers env from the Default upstream", async () => {
    const reply = await client.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {});
    expect(reply.as(pb.EnvResultSchema).vars.AGENT_NAME).toBe("east");
  });

  it("broadcasts pings, subscriptions and control frames to every upstream", async () => {
    await client.ping();
    await client.subscribe(3, 8080);
    client.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.LOG_LEVEL }, pb.LogLevelSchema, {
        level: "debug",
      }),
    );
    for (const c of clusters) {
      await agents[c].inbox.waitFor((f) => f.family === F.CONTROL && f.kind === pb.ControlKind.LOG_LEVEL);
      expect(received(c, F.PING)).toBe(1);
      expect(agents[c].subscriptions.get(3)?.port).toBe(8080);
      expect(received(c, F.CONTROL, pb.ControlKind.LOG_LEVEL)).toBe(1);
    }
  });
});

describe("connection ids", () => {
  it("gives colliding agent ids distinct session ids and rewrites replies back", async () => {
    const ids = await collidingConnections(1);
    expect(new Set(Object.values(ids)).size).toBe(3);

    // Upstream → client: each agent's data arrives under its own session id.
    for (const c of clusters) {
      const wait = client.inbox.next(
        (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.DATA && f.connectionId === ids[c],
      );
      agents[c].emitData(1, `from ${c}`);
      expect(text(await wait)).toBe(`from ${c}`);
    }

    // Client → upstream: each answer reaches its owner only, under the agent's own id.
    for (const c of clusters) {
      client.send(traffic(pb.TrafficKind.DATA, ids[c], `to ${c}`));
      const got = await agents[c].inbox.waitFor(
        (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.DATA,
      );
      expect(got.connectionId).toBe(1);
      expect(text(got)).toBe(`to ${c}`);
    }
    for (const c of clusters) expect(received(c, F.TRAFFIC)).toBe(1);
  });

  it("ends a mapping on a close from either side", async () => {
    const ids = await collidingConnections(5);
    client.send(traffic(pb.TrafficKind.CLOSE, ids.west));
    const closed = await agents.west.inbox.waitFor(
      (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.CLOSE,
    );
    expect(closed.connectionId).toBe(5);
    const unknown = await client.request(
      { family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: ids.west },
      pb.StreamDataSchema,
      {},
    );
    expect(unknown.as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_UNKNOWN_CONNECTION");

    const fromAgent = client.inbox.next(
      (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.CLOSE && f.connectionId === ids.north,
    );
    agents.north.emitClose(5);
    await fromAgent;
    expect(router.sessions.get(SESSION)?.connectionCount).toBe(1);
  });

  it("routes a streamed stolen request's body, answer and ends between its owner and the client", async () => {
    const ids = await collidingConnections(3);
    const T = pb.TrafficKind;
    const end = (kind: number, connectionId: number) =>
      encodeFrame({ family: F.TRAFFIC, kind, connectionId }, pb.HttpBodyEndSchema, {});
    const onClient = (kind: number) =>
      client.inbox.next((f) => f.family === F.TRAFFIC && f.kind === kind && f.connectionId === ids.west);
    // Agent → client: the head, body chunks and the body's end, under the session id.
    const head = onClient(T.HTTP_REQUEST);
    agents.west.emitRaw(
      encodeFrame(
        { family: F.TRAFFIC, kind: T.HTTP_REQUEST, connectionId: 3, requestId: 3 },
        pb.HttpRequestSchema,
        { method: "POST", path: "/up", bodyStreamed: true },
      ),
    );
    expect((await head).as(pb.HttpRequestSchema).bodyStreamed).toBe(true);
    const chunk = onClient(T.DATA);
    agents.west.emitData(3, "upload");
    expect(text(await chunk)).toBe("upload");
    const bodyEnd = onClient(T.HTTP_REQUEST_END);
    agents.west.emitRaw(end(T.HTTP_REQUEST_END, 3));
    await bodyEnd;
    // Client → agent: the answer's head, chunks and end reach the owner only, under its id.
    client.send(
      encodeFrame(
        { family: F.TRAFFIC, kind: T.HTTP_RESPONSE, connectionId: ids.west, requestId: 3 },
        pb.HttpResponseSchema,
        { status: 200, bodyStreamed: true },
      ),
    );
    client.send(traffic(T.DATA, ids.west, "event"));
    client.send(end(T.HTTP_RESPONSE_END, ids.west));
    const answerEnd = await agents.west.inbox.waitFor(
      (f) => f.family === F.TRAFFIC && f.kind === T.HTTP_RESPONSE_END,
    );
    expect(answerEnd.connectionId).toBe(3);
    const onWest = agents.west.inbox.all.filter((f) => f.family === F.TRAFFIC).map((f) => f.kind);
    expect(onWest).toEqual([T.HTTP_RESPONSE, T.DATA, T.HTTP_RESPONSE_END]);
    for (const c of ["east", "north"] as const) expect(received(c, F.TRAFFIC)).toBe(0);
    // The mapping lives until the agent's CLOSE.
    expect(router.sessions.get(SESSION)?.connectionCount).toBe(3);
    const closed = onClient(T.CLOSE);
    agents.west.emitClose(3);
    await closed;
    expect(router.sessions.get(SESSION)?.connectionCount).toBe(2);
  });

  it("closes a lost upstream's connections toward the client and reports how many", async () => {
    const ids = await collidingConnections(9);
    const closed = client.inbox.next(
      (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.CLOSE && f.connectionId === ids.north,
    );
    const down = client.upstreamStatus("north", pb.UpstreamState.DOWN, 5000, true);
    await agents.north.stop();
    expect((await closed).as(pb.StreamCloseSchema).error).toMatch(/upstream north lost/);
    expect((await down).as(pb.UpstreamStatusSchema).connectionsClosed).toBe(1);
    expect(router.sessions.get(SESSION)?.connectionCount).toBe(2);
  });
});

describe("merged replies", () => {
  it("answers a ping with one pong carrying every cluster's health", async () => {
    const pong = await client.ping();
    expect(pong.kind).toBe(pb.PingKind.PONG);
    const body = pong.as(pb.PongSchema);
    expect(body.sentAtMicros).toBeGreaterThan(0n);
    expect(body.clusters.map((c) => [c.cluster, c.state])).toEqual([
      ["east", pb.HealthState.OK],
      ["north", pb.HealthState.OK],
      ["west", pb.HealthState.OK],
    ]);
    expect(client.inbox.count((f) => f.family === F.PING)).toBe(1);
  });

  it("reports a silent upstream as TIMEOUT and a lost one as DOWN in the one pong", async () => {
    agents.west.answerPings = false;
    const down = client.upstreamStatus("north", pb.UpstreamState.DOWN, 5000, true);
    await agents.north.stop();
    await down;
    const pong = await client.ping(5000);
    const states = Object.fromEntries(pong.as(pb.PongSchema).clusters.map((c) => [c.cluster, c.state]));
    expect(states).toEqual({
      east: pb.HealthState.OK,
      north: pb.HealthState.DOWN,
      west: pb.HealthState.TIMEOUT,
    });
    expect(client.inbox.count((f) => f.family === F.PING && f.requestId === pong.requestId)).toBe(1);
  });

  it("answers a subscription every cluster accepted with one success", async () => {
    const result = await client.subscribe(11, 8080);
    expect(result.flags & FLAG_ERROR).toBe(0);
    expect(result.connectionId).toBe(11);
    expect(result.as(pb.SubscriptionResultSchema).ok).toBe(true);
    expect(client.inbox.count((f) => f.family === F.SUBSCRIPTION)).toBe(1);
  });

  it("answers a subscription some clusters refused with one error naming them", async () => {
    agents.west.refuseSubscriptions = "port 9090 is already stolen";
    agents.north.refuseSubscriptions = "no such port";
    const result = await client.subscribe(12, 9090);
    expect(result.flags & FLAG_ERROR).toBe(FLAG_ERROR);
    const body = result.as(pb.SubscriptionResultSchema);
    expect(body.ok).toBe(false);
    expect(body.refusedClusters).toEqual(["north", "west"]);
    expect(body.error).toContain("west: port 9090 is already stolen");
    expect(body.error).toContain("north: no such port");
    expect(client.inbox.count((f) => f.family === F.SUBSCRIPTION)).toBe(1);
  });

  it("replays accepted subscriptions to a returning upstream without answering the client again", async () => {
    await client.subscribe(21, 8080);
    await client.unsubscribe(21, 8080);
    await client.subscribe(22, 8081);
    const down = client.upstreamStatus("west", pb.UpstreamState.DOWN, 5000, true);
    await agents.west.stop();
    await down;
    const up = client.upstreamStatus("west", pb.UpstreamState.UP, 5000, true);
    await agents.west.start();
    await up;
    const replay = await agents.west.inbox.waitFor(
      (f) => f.family === F.SUBSCRIPTION && f.connectionId === 22 && f.requestId >= 0x80000000,
    );
    expect(replay.kind).toBe(pb.SubscriptionKind.STEAL);
    expect(agents.west.subscriptions.has(21)).toBe(false);
    // The replay's result is the router's: the client saw one result per request it sent.
    await client.ping();
    expect(client.inbox.count((f) => f.family === F.SUBSCRIPTION)).toBe(3);
    expect(client.inbox.count(isError)).toBe(0);
    expect(agents.west.inbox.count(isError)).toBe(0);
  });

  it("gives a subscription change still in flight to an upstream that came up meanwhile", async () => {
    await client.subscribe(31, 8082);
    const down = client.upstreamStatus("west", pb.UpstreamState.DOWN, 5000, true);
    await agents.west.stop();
    await down;
    // east and north answer late: west returns (and gets its replay) while both changes wait.
    agents.east.delayMs = agents.north.delayMs = 200;
    let settled = false;
    const changes = Promise.all([client.subscribe(32, 8083), client.unsubscribe(31, 8082)]).then((r) => {
      settled = true;
      return r;
    });
    const up = client.upstreamStatus("west", pb.UpstreamState.UP, 5000, true);
    await agents.west.start();
    await up;
    await agents.west.inbox.waitFor(
      (f) => f.family === F.SUBSCRIPTION && f.connectionId === 31 && f.requestId >= 0x80000000,
    );
    expect(settled).toBe(false);
    expect([agents.west.subscriptions.has(31), agents.west.subscriptions.has(32)]).toEqual([true, false]);
    for (const r of await changes) expect(r.flags & FLAG_ERROR).toBe(0);
    await agents.west.inbox.waitFor(
      (f) =>
        f.family === F.SUBSCRIPTION && f.kind === pb.SubscriptionKind.UNSUBSCRIBE && f.connectionId === 31,
    );
    await client.ping();
    expect([agents.west.subscriptions.has(31), agents.west.subscriptions.has(32)]).toEqual([false, true]);
    expect(client.inbox.count(isError)).toBe(0);
  });
});

describe("frames from upstreams", () => {
  it("refuses a Default-only answer from another upstream", async () => {
    const wrong = agents.north.inbox.next(isError);
    agents.north.emitRaw(
      encodeFrame({ family: F.ENV, kind: pb.EnvKind.RESULT, requestId: 1 }, pb.EnvResultSchema, {}),
    );
    expect((await wrong).as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_FRAME_WRONG_UPSTREAM");
    expect(client.inbox.count((f) => f.family === F.ENV)).toBe(0);
  });

  it("refuses data on a connection the upstream never announced", async () => {
    const err = agents.west.inbox.next(isError);
    agents.west.emitData(4242, "nobody");
    expect((await err).as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_UNKNOWN_CONNECTION");
  });

  it("relays an upstream's error frame naming its cluster", async () => {
    const relayed = client.inbox.next(isError);
    agents.north.emitRaw(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.ERROR, requestId: 77 }, pb.ProtocolErrorSchema, {
        code: "SWITCHYARD_PORT_NOT_SERVED",
        message: "nothing listens on 9999",
      }),
    );
    const e = (await relayed).as(pb.ProtocolErrorSchema);
    expect([e.code, e.cluster]).toEqual(["SWITCHYARD_PORT_NOT_SERVED", "north"]);
  });
});
