// client ↔ real router process ↔ 3 scripted agents: authentication at upgrade, every
// routing rule of DESIGN §5, merged replies, connection-id remapping with colliding
// agent ids, bad frames, and the HTTP endpoints of the session and admin ports.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { PROTOCOL_VERSION_MAX } from "../../../proto/frame-version.js";
import * as pb from "../../../proto/gen/session_pb.js";
import { encodeFrame, encodeRaw, FLAG_ERROR } from "../../../proto/frame-codec.js";
import { ScriptedAgent } from "../../peers/scripted-agent.js";
import { RawSessionClient, UpgradeRefusedError } from "../../peers/raw-session-client.js";
import type { ReceivedFrame } from "../../peers/frame-inbox.js";
import { RouterProcess, type RouteSpec } from "./router-process.js";

const F = pb.FrameFamily;
const SECRET = "client-secret-0123456789";
const clusters = ["east", "west", "north"] as const;

let agents: Record<(typeof clusters)[number], ScriptedAgent>;
let router: RouterProcess;

function routes(): RouteSpec[] {
  return [
    {
      sessionId: "mc-0000000000000001",
      secret: SECRET,
      upstreams: clusters.map((c) => ({
        cluster: c,
        url: agents[c].url("child-" + c),
        secret: "agent-" + c,
        isDefault: c === "east",
      })),
    },
    { sessionId: "mc-creating", secret: SECRET, state: "SESSION_STATE_CREATING", upstreams: [] },
  ];
}

async function connect(): Promise<RawSessionClient> {
  const client = await RawSessionClient.connect(router.sessionUrl("mc-0000000000000001"), SECRET);
  for (const c of clusters) await client.upstreamStatus(c, pb.UpstreamState.UP);
  return client;
}

const isError = (f: ReceivedFrame) => f.family === F.CONTROL && f.kind === pb.ControlKind.ERROR;

beforeAll(async () => {
  agents = {
    east: new ScriptedAgent({ name: "east", secret: "agent-east" }),
    west: new ScriptedAgent({ name: "west", secret: "agent-west" }),
    north: new ScriptedAgent({ name: "north", secret: "agent-north" }),
  };
  for (const c of clusters) await agents[c].start();
  router = await RouterProcess.start(routes());
});

afterAll(async () => {
  await router?.stop();
  for (const c of clusters) await agents?.[c]?.stop();
});

beforeEach(() => {
  for (const c of clusters) {
    agents[c].inbox.clear();
    agents[c].refuseSubscriptions = undefined;
  }
});

describe("upgrade authentication", () => {
  it("refuses a missing secret with 401 before upgrading", async () => {
    const err = await RawSessionClient.connect(router.sessionUrl("mc-0000000000000001"), SECRET, {
      authorization: null,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpgradeRefusedError);
    expect((err as UpgradeRefusedError).status).toBe(401);
    expect((err as UpgradeRefusedError).body.code).toBe("SWITCHYARD_UNAUTHENTICATED");
  });

  it("answers a wrong secret exactly as an unknown session: 404, same code and message", async () => {
    const refusal = async (sessionId: string, secret: string) => {
      const err = (await RawSessionClient.connect(router.sessionUrl(sessionId), secret).catch(
        (e: unknown) => e,
      )) as UpgradeRefusedError;
      expect(err).toBeInstanceOf(UpgradeRefusedError);
      return { status: err.status, body: err.body, retryAfter: err.retryAfter };
    };
    const wrong = await refusal("mc-0000000000000001", "wrong");
    const unknown = await refusal("mc-ffffffffffffffff", SECRET);
    expect(wrong).toEqual(unknown);
    expect(wrong.status).toBe(404);
    expect(wrong.body.code).toBe("SWITCHYARD_SESSION_NOT_FOUND");
    expect(JSON.stringify(wrong)).not.toContain("mc-0000000000000001");
    // Only the admin port's metrics tell the two apart.
    expect(await router.metric("switchyard_router_events_total", { event: "auth_failed" })).toBeGreaterThan(
      0,
    );
    expect(
      await router.metric("switchyard_router_events_total", { event: "session_not_found" }),
    ).toBeGreaterThan(0);
  });

  it("answers a session being created with 503 and Retry-After", async () => {
    const err = (await RawSessionClient.connect(router.sessionUrl("mc-creating"), SECRET).catch(
      (e: unknown) => e,
    )) as UpgradeRefusedError;
    expect(err.status).toBe(503);
    expect(err.body.code).toBe("SWITCHYARD_SESSION_CREATING");
    expect(Number(err.retryAfter)).toBeGreaterThan(0);
  });

  it("requires Hello first and negotiates the version", async () => {
    const raw = await RawSessionClient.connect(router.sessionUrl("mc-0000000000000001"), SECRET, {
      hello: false,
    });
    const reply = await raw.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {});
    expect(reply.as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_HELLO_REQUIRED");
    const ack = await raw.request({ family: F.CONTROL, kind: pb.ControlKind.HELLO }, pb.HelloSchema, {
      minVersion: 1,
      maxVersion: 7,
    });
    expect(ack.as(pb.HelloAckSchema).version).toBe(PROTOCOL_VERSION_MAX);
    raw.close();

    const future = await RawSessionClient.connect(router.sessionUrl("mc-0000000000000001"), SECRET, {
      hello: false,
    });
    const refused = await future.request({ family: F.CONTROL, kind: pb.ControlKind.HELLO }, pb.HelloSchema, {
      minVersion: 5,
      maxVersion: 9,
    });
    expect(refused.as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_PROTOCOL_VERSION_UNSUPPORTED");
    expect((await future.waitClosed()).code).toBe(1002);
  });
});

describe("routing (DESIGN §5)", () => {
  let client: RawSessionClient;
  beforeAll(async () => {
    client = await connect();
  });
  afterAll(() => client.close());

  const stateful: Array<[string, () => Promise<ReceivedFrame>, number]> = [
    ["env", () => client.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {}), F.ENV],
    [
      "dns getaddrinfo",
      () =>
        client.request({ family: F.DNS, kind: pb.DnsKind.GETADDRINFO }, pb.DnsGetAddrInfoSchema, {
          host: "db",
        }),
      F.DNS,
    ],
    [
      "dns reverse",
      () =>
        client.request({ family: F.DNS, kind: pb.DnsKind.REVERSE }, pb.DnsReverseSchema, {
          address: "10.0.0.1",
        }),
      F.DNS,
    ],
    [
      "file stat",
      () =>
        client.request({ family: F.FILE, kind: pb.FileKind.STAT }, pb.FileStatSchema, { path: "/etc/hosts" }),
      F.FILE,
    ],
    [
      "outgoing tcp",
      () =>
        client.request(
          { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.CONNECT, connectionId: 7 },
          pb.TcpConnectSchema,
          { host: "db", port: 5432 },
        ),
      F.OUTGOING_TCP,
    ],
    [
      "outgoing udp",
      () =>
        client.request(
          { family: F.OUTGOING_UDP, kind: pb.OutgoingKind.CONNECT, connectionId: 8 },
          pb.UdpBindSchema,
          { host: "dns", port: 53 },
        ),
      F.OUTGOING_UDP,
    ],
  ];
  it.each(stateful)("sends %s to the Default cluster only", async (_name, call, family) => {
    const reply = await call();
    expect(reply.family).toBe(family);
    expect(agents.east.inbox.count((f) => f.family === family)).toBe(1);
    expect(agents.west.inbox.count((f) => f.family === family)).toBe(0);
    expect(agents.north.inbox.count((f) => f.family === family)).toBe(0);
  });

  it("answers env from the Default agent", async () => {
    const reply = await client.request({ family: F.ENV, kind: pb.EnvKind.GET }, pb.EnvGetSchema, {});
    expect(reply.as(pb.EnvResultSchema).vars.AGENT_NAME).toBe("east");
  });

  it("relays outgoing TCP data both ways with the client's stream id", async () => {
    const data = Buffer.from("hello over tcp");
    const wait = client.inbox.next(
      (f) => f.family === F.OUTGOING_TCP && f.kind === pb.OutgoingKind.DATA && f.connectionId === 77,
    );
    client.send(
      encodeFrame(
        { family: F.OUTGOING_TCP, kind: pb.OutgoingKind.DATA, connectionId: 77 },
        pb.StreamDataSchema,
        { data },
      ),
    );
    expect(Buffer.from((await wait).as(pb.StreamDataSchema).data).toString()).toBe("hello over tcp");
  });

  it("broadcasts a ping and answers one pong with per-cluster health", async () => {
    const before = client.inbox.count((f) => f.family === F.PING);
    const pong = await client.ping();
    expect(pong.kind).toBe(pb.PingKind.PONG);
    const body = pong.as(pb.PongSchema);
    expect(body.clusters.map((c) => c.cluster)).toEqual(["east", "north", "west"]);
    expect(body.clusters.every((c) => c.state === pb.HealthState.OK)).toBe(true);
    expect(body.sentAtMicros).toBeGreaterThan(0n);
    for (const c of clusters) expect(agents[c].inbox.count((f) => f.family === F.PING)).toBe(1);
    expect(client.inbox.count((f) => f.family === F.PING) - before).toBe(1);
  });

  it("broadcasts a subscription and merges the acknowledgements into one success", async () => {
    const result = await client.subscribe(11, 8080);
    expect(result.flags & FLAG_ERROR).toBe(0);
    expect(result.as(pb.SubscriptionResultSchema).ok).toBe(true);
    for (const c of clusters) expect(agents[c].subscriptions.get(11)?.port).toBe(8080);
    expect(client.inbox.count((f) => f.family === F.SUBSCRIPTION && f.requestId === result.requestId)).toBe(
      1,
    );
    const un = await client.unsubscribe(11, 8080);
    expect(un.as(pb.SubscriptionResultSchema).ok).toBe(true);
    for (const c of clusters) expect(agents[c].subscriptions.has(11)).toBe(false);
  });

  it("answers a subscription refused by one cluster with one error naming it", async () => {
    agents.west.refuseSubscriptions = "port 9090 is already stolen by another session";
    const result = await client.subscribe(12, 9090);
    expect(result.flags & FLAG_ERROR).toBe(FLAG_ERROR);
    const body = result.as(pb.SubscriptionResultSchema);
    expect(body.ok).toBe(false);
    expect(body.refusedClusters).toEqual(["west"]);
    expect(body.error).toContain("west: port 9090 is already stolen");
    expect(client.inbox.count((f) => f.family === F.SUBSCRIPTION && f.requestId === result.requestId)).toBe(
      1,
    );
  });

  it("broadcasts control frames (log level, close) to every cluster", async () => {
    client.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.LOG_LEVEL }, pb.LogLevelSchema, {
        level: "debug",
      }),
    );
    for (const c of clusters) {
      const f = await agents[c].inbox.waitFor(
        (x) => x.family === F.CONTROL && x.kind === pb.ControlKind.LOG_LEVEL,
      );
      expect(f.as(pb.LogLevelSchema).level).toBe("debug");
    }
  });

  it("remaps colliding agent connection ids and routes replies to the owner only", async () => {
    // Every agent announces its connection as id 1.
    const announced: ReceivedFrame[] = [];
    for (const c of clusters) {
      const wait = client.inbox.next(
        (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.NEW_CONNECTION,
      );
      agents[c].emitConnection({ port: 8080, agentConnId: 1 });
      announced.push(await wait);
    }
    const ids = announced.map((f) => f.connectionId);
    expect(new Set(ids).size).toBe(3);

    // Data from each agent arrives under its session id.
    for (const [i, c] of clusters.entries()) {
      const wait = client.inbox.next(
        (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.DATA && f.connectionId === ids[i],
      );
      agents[c].emitData(1, `from ${c}`);
      expect(Buffer.from((await wait).as(pb.StreamDataSchema).data).toString()).toBe(`from ${c}`);
    }

    // The client's answer on each id reaches only its owner, with the agent's own id.
    for (const [i, c] of clusters.entries()) {
      client.send(
        encodeFrame(
          { family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: ids[i] },
          pb.StreamDataSchema,
          { data: Buffer.from(`to ${c}`) },
        ),
      );
      const got = await agents[c].inbox.waitFor(
        (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.DATA,
      );
      expect(got.connectionId).toBe(1);
      expect(Buffer.from(got.as(pb.StreamDataSchema).data).toString()).toBe(`to ${c}`);
    }
    for (const c of clusters) expect(agents[c].inbox.count((f) => f.family === F.TRAFFIC)).toBe(1);

    // A close from the client ends the mapping; the id is then unknown.
    client.send(
      encodeFrame(
        { family: F.TRAFFIC, kind: pb.TrafficKind.CLOSE, connectionId: ids[1] },
        pb.StreamCloseSchema,
        {},
      ),
    );
    await agents.west.inbox.waitFor((f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.CLOSE);
    const err = await client.request(
      { family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: ids[1] },
      pb.StreamDataSchema,
      {},
    );
    expect(err.as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_UNKNOWN_CONNECTION");

    // A close from an agent reaches the client under the session id.
    const closed = client.inbox.next(
      (f) => f.family === F.TRAFFIC && f.kind === pb.TrafficKind.CLOSE && f.connectionId === ids[2],
    );
    agents.north.emitClose(1);
    await closed;
    for (const c of ["east"] as const) agents[c].emitClose(1);
  });

  it("rejects bad client frames with an error frame and counts them", async () => {
    const cases: Array<[Buffer, string]> = [
      [Buffer.from([1, 2, 3]), "SWITCHYARD_FRAME_TRUNCATED"],
      [encodeRaw({ family: 42, kind: 1, requestId: 5 }), "SWITCHYARD_FRAME_UNKNOWN_FAMILY"],
      [encodeRaw({ family: F.ENV, kind: 99, requestId: 6 }), "SWITCHYARD_FRAME_UNKNOWN_KIND"],
      [
        encodeRaw({ family: F.ENV, kind: pb.EnvKind.GET, requestId: 7 }, Buffer.alloc(2 * 1024 * 1024)),
        "SWITCHYARD_FRAME_OVERSIZED",
      ],
      [
        Buffer.concat([
          encodeRaw({ family: F.ENV, kind: pb.EnvKind.GET, requestId: 8 }, Buffer.alloc(10)),
          Buffer.alloc(3),
        ]),
        "SWITCHYARD_FRAME_BAD_LENGTH",
      ],
      [
        encodeRaw({ family: F.ENV, kind: pb.EnvKind.RESULT, requestId: 9 }),
        "SWITCHYARD_FRAME_WRONG_DIRECTION",
      ],
    ];
    for (const [buf, code] of cases) {
      const before = await router.metric("switchyard_router_bad_frames_total", { source: "client", code });
      const wait = client.inbox.next((f) => isError(f) && f.as(pb.ProtocolErrorSchema).code === code);
      client.send(buf);
      await wait;
      expect(await router.metric("switchyard_router_bad_frames_total", { source: "client", code })).toBe(
        before + 1,
      );
    }
    // The session still works.
    expect((await client.ping()).kind).toBe(pb.PingKind.PONG);
  });

  it("rejects a bad upstream frame with an error frame to that upstream", async () => {
    const wait = agents.west.inbox.next((f) => isError(f));
    agents.west.emitData(4242, "no such connection");
    expect((await wait).as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_UNKNOWN_CONNECTION");
    expect(
      await router.metric("switchyard_router_bad_frames_total", {
        source: "upstream",
        code: "SWITCHYARD_UNKNOWN_CONNECTION",
      }),
    ).toBeGreaterThan(0);
    const env = agents.north;
    const wrong = env.inbox.next((f) => isError(f));
    env.emitRaw(
      encodeFrame({ family: F.ENV, kind: pb.EnvKind.RESULT, requestId: 1 }, pb.EnvResultSchema, {}),
    );
    expect((await wrong).as(pb.ProtocolErrorSchema).code).toBe("SWITCHYARD_FRAME_WRONG_UPSTREAM");
  });
});

describe("HTTP endpoints", () => {
  it("serves healthz and readyz on both ports, metrics on the admin port", async () => {
    for (const base of [router.base, router.adminBase]) {
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
    }
    const m = await router.metrics();
    expect(m).toContain("switchyard_router_frames_total");
    expect(m).toContain("switchyard_router_fanout_latency_seconds_bucket");
    expect(m).not.toContain("mc-0000000000000001");
  });

  it("answers /metrics and /debug/* on the session port with 404, as any unknown path", async () => {
    const unknown = await fetch(`${router.base}/no-such-path`);
    expect(unknown.status).toBe(404);
    const { code } = (await unknown.json()) as { code: string };
    for (const path of ["/metrics", "/debug/routes", "/debug/memory"]) {
      const r = await fetch(router.base + path);
      expect(r.status, path).toBe(404);
      const text = await r.text();
      expect((JSON.parse(text) as { code: string }).code, path).toBe(code);
      expect(text, path).not.toContain("mc-0000000000000001");
    }
    const memory = (await (await fetch(`${router.adminBase}/debug/memory`)).json()) as { rss: number };
    expect(memory.rss).toBeGreaterThan(0);
  });

  it("redacts secrets and hashes in /debug/routes (admin port)", async () => {
    const text = await (await fetch(`${router.adminBase}/debug/routes`)).text();
    expect(text).toContain("mc-0000000000000001");
    expect(text).not.toContain("agent-east");
    expect(text).not.toMatch(/[0-9a-f]{64}/);
  });
});
