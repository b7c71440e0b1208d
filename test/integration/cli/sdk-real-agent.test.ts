// The SDK with the real agent (data-plane/agent AgentServer, in process) behind a real
// router process: east (Default, outgoing sockets bound to 127.0.0.2) and west (127.0.0.3),
// each in front of its own app on the same target port. What `switchyard exec` wires up —
// TrafficDelivery to a local app and the LocalProxy over outgoing TCP — is exercised
// against what the agent really sends: filtered steals answered locally while other
// requests still reach the cluster app, mirrors that leave the app answering, raw steals,
// and outgoing connections — TCP, and SOCKS5 UDP ASSOCIATE datagrams — that leave from east only.
import { createSocket } from "node:dgram";
import { createServer, request, type Server } from "node:http";
import {
  connect,
  createServer as createTcpServer,
  type AddressInfo,
  type Server as TcpServer,
  type Socket,
} from "node:net";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AgentServer } from "../../../data-plane/agent/src/agent-server.js";
import { SessionSecrets } from "../../../data-plane/agent/src/session-secrets.js";
import { hashSecret as sha256Hex } from "../../../proto/session-auth.js";
import { TargetView } from "../../../data-plane/agent/src/target/target-view.js";
import { LocalProxy } from "../../../cli/src/sdk/local/local-proxy.js";
import { sessionUdpRelay } from "../../../cli/src/sdk/local/session-udp-relay.js";
import { decodeSocksUdp, encodeSocksUdp } from "../../../cli/src/sdk/local/socks-udp-header.js";
import { SessionClient, type UpstreamEvent } from "../../../cli/src/sdk/session/session-client.js";
import { TrafficDelivery } from "../../../cli/src/sdk/local/traffic-delivery.js";
import { RouterProcess } from "../router/router-process.js";

const SECRET = "cli-real-agent-secret";
const SESSION = "mc-00000000000000b2";
const clusters = ["east", "west"] as const;
type Cluster = (typeof clusters)[number];
const bind: Record<Cluster, string> = { east: "127.0.0.2", west: "127.0.0.3" };
const appHost: Record<Cluster, string> = { east: "127.0.0.1", west: "127.0.0.3" };

let router: RouterProcess;
let targetPort = 0;
const apps = {} as Record<Cluster, { server: Server; seen: string[] }>;
const agents = {} as Record<Cluster, { agent: AgentServer; traffic: number }>;
let echo: TcpServer;
const echoSources: string[] = [];
let local: Server;
let localPort = 0;
const localSeen: string[] = [];

function get(port: number, path: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: "127.0.0.1", port, path, headers, agent: false }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve(body));
    })
      .on("error", reject)
      .end();
  });
}

beforeAll(async () => {
  for (const cl of clusters) {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(req.url ?? "");
      res.end(`${cl}-app`);
    });
    await new Promise<void>((r) => server.listen(targetPort, appHost[cl], () => r()));
    targetPort = (server.address() as AddressInfo).port;
    apps[cl] = { server, seen };
  }
  for (const cl of clusters) {
    const agent = new AgentServer({
      host: "127.0.0.1",
      port: 0,
      secrets: new SessionSecrets({ secretHashes: [sha256Hex(`agent-${cl}`)] }),
      view: new TargetView(undefined, undefined),
      ports: [{ appPort: targetPort, appHost: appHost[cl], listenPort: 0, listenHost: "127.0.0.1" }],
      outgoing: { bindAddress: bind[cl] },
      logger: pino({ level: "silent" }),
    });
    await agent.listen();
    agents[cl] = { agent, traffic: agent.trafficPorts.get(targetPort)! };
  }
  echo = createTcpServer((s) => {
    echoSources.push(s.remoteAddress ?? "");
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", () => r()));
  local = createServer((req, res) => {
    localSeen.push(req.url ?? "");
    res.end(`local saw ${req.method} ${req.url}`);
  });
  await new Promise<void>((r) => local.listen(0, "127.0.0.1", () => r()));
  localPort = (local.address() as AddressInfo).port;
  router = await RouterProcess.start([
    {
      sessionId: SESSION,
      secret: SECRET,
      upstreams: clusters.map((cl) => ({
        cluster: cl,
        url: agents[cl].agent.url(`child-${cl}`),
        secret: `agent-${cl}`,
        isDefault: cl === "east",
      })),
    },
  ]);
});

afterAll(async () => {
  await router?.stop();
  for (const cl of clusters) {
    await agents[cl]?.agent.close();
    apps[cl]?.server.closeAllConnections();
    apps[cl]?.server.close();
  }
  echo?.close();
  local?.closeAllConnections();
  local?.close();
});

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function session(): Promise<{ c: SessionClient; delivery: TrafficDelivery }> {
  const c = new SessionClient({ sessionId: SESSION, secret: SECRET, urls: [router.sessionUrl(SESSION)] });
  const up = new Set<string>();
  const bothUp = new Promise<void>((resolve) =>
    c.on("upstream", (u: UpstreamEvent) => {
      if (u.up) up.add(u.cluster);
      if (up.size === 2) resolve();
    }),
  );
  await c.connect();
  await bothUp;
  const delivery = new TrafficDelivery(c, { ports: new Map([[targetPort, localPort]]) });
  delivery.start();
  cleanup.push(async () => {
    delivery.stop();
    c.close();
    // The agents forget the session once the router link closes.
    await expect
      .poll(() => agents.east.agent.sessions.size + agents.west.agent.sessions.size, { timeout: 10_000 })
      .toBe(0);
  });
  return { c, delivery };
}

describe("SDK with the real agent", () => {
  it("steals only requests matching the header filter in both clusters; others reach the cluster app", async () => {
    const { c } = await session();
    await c.subscribe(targetPort, "steal", { header: { name: "x-user", valueRegex: "^(?:alice)$" } });
    expect(await get(agents.east.traffic, "/from-east", { "x-user": "alice" })).toBe(
      "local saw GET /from-east",
    );
    expect(await get(agents.west.traffic, "/from-west", { "x-user": "alice" })).toBe(
      "local saw GET /from-west",
    );
    expect(await get(agents.east.traffic, "/bob", { "x-user": "bob" })).toBe("east-app");
    expect(localSeen).not.toContain("/bob");
  });

  it("mirrors: the cluster app still answers and the local app sees a copy", async () => {
    const { c } = await session();
    await c.subscribe(targetPort, "mirror");
    expect(await get(agents.west.traffic, "/mirrored")).toBe("west-app");
    await expect.poll(() => localSeen.includes("/mirrored"), { timeout: 5000 }).toBe(true);
    expect(apps.west.seen).toContain("/mirrored");
  });

  it("steals raw connections to the local app and returns its answer", async () => {
    const { c, delivery } = await session();
    await c.subscribe(targetPort, "steal");
    expect(await get(agents.west.traffic, "/raw")).toBe("local saw GET /raw");
    expect(delivery.stats.connections).toBeGreaterThan(0);
    expect(apps.west.seen).not.toContain("/raw");
  });

  it("sends the proxy's connections out of the Default cluster (east's bind address)", async () => {
    const { c } = await session();
    const proxy = new LocalProxy({ dialer: { dial: (h, p) => c.connectTcp(h, p) } });
    const port = await proxy.listen();
    cleanup.push(() => proxy.close());
    const s: Socket = connect(port, "127.0.0.1");
    cleanup.push(() => s.destroy());
    const reply = new Promise<string>((resolve) => {
      let text = "";
      s.on("data", (d: Buffer) => {
        text += d.toString("latin1");
        if (text.includes("through east")) resolve(text);
      });
    });
    await new Promise((r) => s.once("connect", r));
    s.write(`CONNECT 127.0.0.1:${(echo.address() as AddressInfo).port} HTTP/1.1\r\n\r\n`);
    s.write("through east");
    expect(await reply).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nthrough east/);
    expect(echoSources.at(-1)).toBe("127.0.0.2");
    // No pod behind these agents: env fails with the agent's own reason, not a wrong answer.
    await expect(c.env()).rejects.toThrow(/SWITCHYARD_AGENT_NO_TARGET_POD/);
    const addrs = await c.lookup("localhost");
    expect(addrs.length).toBeGreaterThan(0);
  });

  it("relays the proxy's UDP ASSOCIATE datagrams out of the Default cluster and back", async () => {
    const { c } = await session();
    const dnsEcho = createSocket("udp4");
    const dnsSources: string[] = [];
    dnsEcho.on("message", (m, r) => {
      dnsSources.push(r.address);
      dnsEcho.send(m, r.port, r.address);
    });
    await new Promise<void>((r) => dnsEcho.bind(0, "127.0.0.1", () => r()));
    cleanup.push(() => dnsEcho.close());
    const proxy = new LocalProxy({
      dialer: { dial: (h, p) => c.connectTcp(h, p) },
      udp: sessionUdpRelay(c),
    });
    const port = await proxy.listen();
    cleanup.push(() => proxy.close());
    const s: Socket = connect(port, "127.0.0.1");
    cleanup.push(() => s.destroy());
    const reply = new Promise<Buffer>((resolve) => {
      let got = Buffer.alloc(0);
      s.on("data", (d: Buffer) => {
        got = Buffer.concat([got, d]);
        if (got.length >= 12) resolve(got);
      });
    });
    await new Promise((r) => s.once("connect", r));
    s.write(Buffer.from([5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0]));
    const r = await reply;
    expect([...r.subarray(0, 4)]).toEqual([5, 0, 5, 0]);
    const bnd = r.readUInt16BE(10);

    const client = createSocket("udp4");
    await new Promise<void>((res) => client.bind(0, "127.0.0.1", () => res()));
    cleanup.push(() => client.close());
    // A DNS query (id 0x5a17, RD) for orders.shop.svc A IN.
    const qname = Buffer.concat(
      ["orders", "shop", "svc"].map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)])),
    );
    const query = Buffer.concat([
      Buffer.from([0x5a, 0x17, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]),
      qname,
      Buffer.from([0, 0, 1, 0, 1]),
    ]);
    const echoPort = dnsEcho.address().port;
    const answer = new Promise<Buffer>((res) => client.once("message", (m) => res(m)));
    client.send(encodeSocksUdp("127.0.0.1", echoPort, query), bnd, "127.0.0.1");
    expect(decodeSocksUdp(await answer)).toEqual({
      ok: true,
      frag: 0,
      host: "127.0.0.1",
      port: echoPort,
      data: query,
    });
    expect(dnsSources).toEqual(["127.0.0.2"]);
    expect(proxy.udpDatagrams).toBe(2);
    const eastUdp = () => [...agents.east.agent.sessions.values()].reduce((n, x) => n + x.udp.size, 0);
    expect(eastUdp()).toBe(1);
    expect([...agents.west.agent.sessions.values()].reduce((n, x) => n + x.udp.size, 0)).toBe(0);
    // Closing the control connection ends the association and the agent's socket.
    s.destroy();
    await expect.poll(eastUdp, { timeout: 10_000 }).toBe(0);
  });
});
