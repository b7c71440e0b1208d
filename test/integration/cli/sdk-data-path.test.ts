// The SDK's data path against real router processes (static routes file) and scripted agents
// for east (Default) and west — no control plane needed:
// env from the Default cluster only; a steal delivered to a local TCP server and the
// answer back to the caller; a stolen HTTP request answered by a local HTTP server; the
// local SOCKS5 proxy leaving through east's outgoing TCP with remote DNS; an upstream loss
// reported; the router in use killed → reconnect through the other router with the
// subscriptions restored; the session removed from the routers → `lost`.
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import * as pb from "../../../proto/gen/session_pb.js";
import { ScriptedAgent } from "../../peers/scripted-agent.js";
import type { ReceivedFrame } from "../../peers/frame-inbox.js";
import { LocalProxy } from "../../../cli/src/sdk/local/local-proxy.js";
import { SessionClient, type UpstreamEvent } from "../../../cli/src/sdk/session/session-client.js";
import { TrafficDelivery } from "../../../cli/src/sdk/local/traffic-delivery.js";
import type { CliError } from "../../../cli/src/sdk/cli-errors.js";
import { RouterProcess, type RouteSpec } from "../router/router-process.js";

const F = pb.FrameFamily;
const SECRET = "cli-data-path-secret";
const SESSION = "mc-00000000000000a1";

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function agents() {
  const east = new ScriptedAgent({ name: "east", secret: "agent-east", env: { DB_HOST: "db.east" } });
  const west = new ScriptedAgent({ name: "west", secret: "agent-west" });
  await east.start();
  await west.start();
  cleanup.push(
    () => east.stop(),
    () => west.stop(),
  );
  return { east, west };
}

function route(a: { east: ScriptedAgent; west: ScriptedAgent }): RouteSpec {
  return {
    sessionId: SESSION,
    secret: SECRET,
    upstreams: [
      { cluster: "east", url: a.east.url(SESSION), secret: "agent-east", isDefault: true },
      { cluster: "west", url: a.west.url(SESSION), secret: "agent-west" },
    ],
  };
}

async function router(routes: RouteSpec[]): Promise<RouterProcess> {
  const r = await RouterProcess.start(routes);
  cleanup.push(() => r.stop());
  return r;
}

async function client(urls: string[]): Promise<SessionClient> {
  const c = new SessionClient({
    sessionId: SESSION,
    secret: SECRET,
    urls,
    backoff: { initialMs: 100, maxMs: 400, maxAttempts: 4 },
    pingIntervalMs: 0,
  });
  const bothUp = new Promise<void>((resolve) => {
    const up = new Set<string>();
    const on = (u: UpstreamEvent) => {
      if (u.up) up.add(u.cluster);
      if (up.has("east") && up.has("west")) {
        c.off("upstream", on);
        resolve();
      }
    };
    c.on("upstream", on);
  });
  await c.connect();
  cleanup.push(() => c.close());
  await bothUp;
  return c;
}

function once<T>(emitter: { once(ev: string, fn: (v: T) => void): unknown }, ev: string): Promise<T> {
  return new Promise((resolve) => emitter.once(ev, resolve));
}

async function listen(server: Server | HttpServer): Promise<number> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const open = new Set<Socket>();
  server.on("connection", (s: Socket) => {
    open.add(s);
    s.once("close", () => open.delete(s));
  });
  cleanup.push(() => {
    for (const s of open) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return (server.address() as AddressInfo).port;
}

const trafficFrom = (kind: number, id?: number) => (f: ReceivedFrame) =>
  f.family === F.TRAFFIC && f.kind === kind && (id === undefined || f.connectionId === id);

describe("SDK data path through real routers", () => {
  it("reads env from the Default cluster only and answers pings with per-cluster health", async () => {
    const a = await agents();
    const r = await router([route(a)]);
    const c = await client([r.sessionUrl(SESSION)]);
    const env = await c.env();
    expect(env).toEqual({ AGENT_NAME: "east", DB_HOST: "db.east" });
    expect(a.west.inbox.all.some((f) => f.family === F.ENV)).toBe(false);
    const pong = await c.ping();
    expect(pong.clusters.map((h) => [h.cluster, h.state]).sort()).toEqual([
      ["east", "ok"],
      ["west", "ok"],
    ]);
    const st = await c.stat("/etc/config/app.yaml");
    expect(st.size).toBe("east".length);
  });

  it("delivers a stolen raw connection from west to a local TCP server and the answer back", async () => {
    const a = await agents();
    const r = await router([route(a)]);
    const c = await client([r.sessionUrl(SESSION)]);
    const local = createServer((s: Socket) =>
      s.on("data", (d: Buffer) => s.write(`local saw: ${d.toString()}`)),
    );
    const localPort = await listen(local);
    const delivery = new TrafficDelivery(c, { ports: new Map([[8080, localPort]]) });
    delivery.start();
    cleanup.push(() => delivery.stop());
    const sub = await c.subscribe(8080, "steal");
    expect(a.east.subscriptions.get(sub.id)?.port).toBe(8080);
    expect(a.west.subscriptions.get(sub.id)?.port).toBe(8080);

    const conn = a.west.emitConnection({ port: 8080, subscriptionId: sub.id });
    a.west.emitData(conn, "GET / from west");
    const answer = await a.west.inbox.waitFor(
      (f) => trafficFrom(pb.TrafficKind.DATA, conn)(f),
      5000,
      "answer from the local app",
    );
    expect(Buffer.from(answer.as(pb.StreamDataSchema).data).toString()).toBe("local saw: GET / from west");
    expect(delivery.stats.connections).toBe(1);
  });

  it("answers a stolen HTTP request (filtered steal) with the local HTTP server's response", async () => {
    const a = await agents();
    const r = await router([route(a)]);
    const c = await client([r.sessionUrl(SESSION)]);
    const local = createHttpServer((req, res) => {
      res.setHeader("x-served-by", "local");
      res.end(`local ${req.method} ${req.url}`);
    });
    const localPort = await listen(local);
    const delivery = new TrafficDelivery(c, { ports: new Map([[8080, localPort]]) });
    delivery.start();
    cleanup.push(() => delivery.stop());
    const sub = await c.subscribe(8080, "steal", { header: { name: "x-user", valueRegex: "^(?:alice)$" } });
    const steal = a.east.inbox.all.find((f) => f.family === F.SUBSCRIPTION && f.connectionId === sub.id)!;
    expect(steal.as(pb.SubscribeSchema).httpFilter?.filter.case).toBe("header");

    const conn = a.east.emitConnection({ port: 8080, subscriptionId: sub.id });
    a.east.emitHttpRequest(conn, conn, { method: "GET", path: "/api/orders" });
    const res = await a.east.inbox.waitFor(
      trafficFrom(pb.TrafficKind.HTTP_RESPONSE, conn),
      5000,
      "HTTP response",
    );
    const body = res.as(pb.HttpResponseSchema);
    expect(body.status).toBe(200);
    expect(Buffer.from(body.body).toString()).toBe("local GET /api/orders");
    expect(body.headers.find((h) => h.name.toLowerCase() === "x-served-by")?.value).toBe("local");
    expect(res.requestId).toBe(conn);
  });

  it("gives the local process a SOCKS5 proxy leaving through the Default cluster with remote DNS", async () => {
    const a = await agents();
    const r = await router([route(a)]);
    const c = await client([r.sessionUrl(SESSION)]);
    const proxy = new LocalProxy({ dialer: { dial: (h, p) => c.connectTcp(h, p) } });
    const port = await proxy.listen();
    cleanup.push(() => proxy.close());
    const s = connect(port, "127.0.0.1");
    cleanup.push(() => void s.destroy());
    await once(s, "connect");
    const received: Buffer[] = [];
    const got = (n: number) =>
      new Promise<Buffer>((resolve) => {
        const check = () => {
          const all = Buffer.concat(received);
          if (all.length >= n) {
            s.off("data", onData);
            received.length = 0;
            resolve(all);
          }
        };
        const onData = (d: Buffer) => {
          received.push(d);
          check();
        };
        s.on("data", onData);
        check();
      });
    s.write(Buffer.from([5, 1, 0]));
    await got(2);
    const host = Buffer.from("orders-db.shop.svc");
    s.write(Buffer.concat([Buffer.from([5, 1, 0, 3, host.length]), host, Buffer.from([0x15, 0x38])]));
    expect((await got(10))[1]).toBe(0);
    s.write("SELECT 1");
    // The scripted agent echoes outgoing data: the bytes made the round trip through east.
    expect((await got(8)).toString()).toBe("SELECT 1");
    const connectFrame = a.east.inbox.all.find(
      (f) => f.family === F.OUTGOING_TCP && f.kind === pb.OutgoingKind.CONNECT,
    )!;
    expect(connectFrame.as(pb.TcpConnectSchema)).toMatchObject({ host: "orders-db.shop.svc", port: 5432 });
    expect(a.west.inbox.all.some((f) => f.family === F.OUTGOING_TCP)).toBe(false);
  });

  it("exchanges UDP datagrams through the Default cluster and resolves names there", async () => {
    const a = await agents();
    const r = await router([route(a)]);
    const c = await client([r.sessionUrl(SESSION)]);
    const udp = await c.bindUdp("dns.shop.svc", 53);
    const echoed = new Promise<{ data: Buffer }>((resolve) => udp.once("message", resolve));
    expect(udp.send(Buffer.from("query"))).toBe(true);
    expect((await echoed).data.toString()).toBe("query");
    const bind = a.east.inbox.all.find(
      (f) => f.family === F.OUTGOING_UDP && f.kind === pb.OutgoingKind.CONNECT,
    )!;
    expect(bind.as(pb.UdpBindSchema)).toMatchObject({ host: "dns.shop.svc", port: 53 });
    expect(a.west.inbox.all.some((f) => f.family === F.OUTGOING_UDP)).toBe(false);
    udp.close();
    expect(await c.lookup("orders.shop.svc")).toEqual([{ address: "10.0.0.1", family: 4 }]);
    expect(await c.reverse("10.0.0.1")).toEqual(["east"]);
  });

  it("reports a lost upstream and keeps the Default cluster working", async () => {
    const a = await agents();
    const r = await router([route(a)]);
    const c = await client([r.sessionUrl(SESSION)]);
    const down = new Promise<UpstreamEvent>((resolve) =>
      c.on("upstream", (u) => !u.up && u.cluster === "west" && resolve(u)),
    );
    await a.west.stop();
    expect((await down).isDefault).toBe(false);
    expect((await c.env()).AGENT_NAME).toBe("east");
  });

  it("reconnects through another router when the one in use dies, restoring subscriptions", async () => {
    const a = await agents();
    const r1 = await router([route(a)]);
    const r2 = await router([route(a)]);
    const c = await client([r1.sessionUrl(SESSION), r2.sessionUrl(SESSION)]);
    expect(c.url).toBe(r1.sessionUrl(SESSION));
    const sub = await c.subscribe(8080, "mirror");
    const mirrorsBefore = a.east.inbox.all.filter(
      (f) => f.family === F.SUBSCRIPTION && f.kind === pb.SubscriptionKind.MIRROR,
    ).length;

    const reconnecting = once<{ attempt: number; delayMs: number }>(c, "reconnecting");
    const reconnected = once<{ url: string; resubscribed: number; refused: string[] }>(c, "reconnected");
    await r1.stop();
    expect((await reconnecting).attempt).toBe(1);
    const back = await reconnected;
    expect(back).toEqual({ url: r2.sessionUrl(SESSION), resubscribed: 1, refused: [] });
    expect(c.state).toBe("open");
    // The subscription reached the agents again through the new router, under the same id.
    await a.east.inbox.waitFor(
      (f) =>
        f.family === F.SUBSCRIPTION &&
        f.kind === pb.SubscriptionKind.MIRROR &&
        f.connectionId === sub.id &&
        a.east.inbox.all.filter((g) => g.family === F.SUBSCRIPTION && g.kind === pb.SubscriptionKind.MIRROR)
          .length > mirrorsBefore,
      5000,
      "re-subscription",
    );
    expect((await c.env()).AGENT_NAME).toBe("east");
  });

  it("says the session is lost when the routers no longer know it", async () => {
    const a = await agents();
    const r1 = await router([route(a)]);
    const r2 = await router([route(a)]);
    const c = await client([r1.sessionUrl(SESSION), r2.sessionUrl(SESSION)]);
    const lost = once<CliError>(c, "lost");
    r2.reload([]);
    await r2.waitForLog((l) => l.msg === "static routes applied" && l.sessions === 0, 5000);
    await r1.stop();
    const err = await lost;
    expect(err.code).toBe("SWITCHYARD_CLI_SESSION_LOST");
    expect(err.message).toMatch(/is gone/);
    expect(c.state).toBe("lost");
    await expect(c.env()).rejects.toMatchObject({ code: "SWITCHYARD_CLI_SESSION_LOST" });
  });
});
