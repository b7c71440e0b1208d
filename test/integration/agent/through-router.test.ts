// The real agent behind the real router process: what the router sends upstream (URL,
// bearer secret, Hello, broadcasts, remapped connection ids) is exactly what the agent
// accepts. Two agents (east = Default, west), each in front of its own local app and
// binding outgoing sockets to its own loopback address.
import { createServer, request, type Server } from "node:http";
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from "node:net";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as pb from "../../../proto/gen/session_pb.js";
import { AgentServer } from "../../../data-plane/agent/src/agent-server.js";
import { SessionSecrets } from "../../../data-plane/agent/src/session-secrets.js";
import { hashSecret as sha256Hex } from "../../../proto/session-auth.js";
import { TargetView } from "../../../data-plane/agent/src/target/target-view.js";
import { AgentClient } from "../../peers/agent-client.js";
import { RouterProcess } from "../router/router-process.js";

const CLIENT_SECRET = "client-secret-agent-e2e";
const SESSION = "mc-00000000000000a1";
const clusters = ["east", "west"] as const;
type Cluster = (typeof clusters)[number];
const bind: Record<Cluster, string> = { east: "127.0.0.2", west: "127.0.0.3" };

let router: RouterProcess;
const apps = {} as Record<Cluster, { server: Server; port: number }>;
const agents = {} as Record<Cluster, { agent: AgentServer; traffic: number }>;
let echo: TcpServer;
const echoSources: string[] = [];

function get(port: number, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: "127.0.0.1", port, path: "/hello", headers, agent: false }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve(body));
    })
      .on("error", reject)
      .end();
  });
}

async function connect(): Promise<AgentClient> {
  const c = await AgentClient.connect(router.sessionUrl(SESSION), CLIENT_SECRET);
  for (const cl of clusters) await c.session.upstreamStatus(cl, pb.UpstreamState.UP);
  return c;
}

beforeAll(async () => {
  // Both apps serve the same target port number, as replicas in two clusters would:
  // east's on 127.0.0.1, west's on 127.0.0.3.
  const appHost: Record<Cluster, string> = { east: "127.0.0.1", west: "127.0.0.3" };
  let targetPort = 0;
  for (const cl of clusters) {
    const server = createServer((_req, res) => res.end(`${cl}-app`));
    await new Promise<void>((r) => server.listen(targetPort, appHost[cl], () => r()));
    targetPort = (server.address() as AddressInfo).port;
    apps[cl] = { server, port: targetPort };
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
  router = await RouterProcess.start([
    {
      sessionId: SESSION,
      secret: CLIENT_SECRET,
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
    apps[cl]?.server.close();
  }
  echo?.close();
});

describe("agent behind the router", () => {
  it("answers Hello from the router and merged pings report both clusters OK", async () => {
    const c = await connect();
    const pong = await c.ping();
    expect(pong.clusters.map((h) => [h.cluster, h.state]).sort()).toEqual([
      ["east", pb.HealthState.OK],
      ["west", pb.HealthState.OK],
    ]);
    c.close();
  });

  it("steals with a header filter in both clusters; the answers get back to the callers", async () => {
    const c = await connect();
    c.httpHandler = (req) => ({ status: 200, body: `local saw ${req.path}` });
    const sub = await c.subscribe(11, apps.east.port, "steal", {
      filter: { case: "header", value: { name: "x-user", valueRegex: "^alice$" } },
    });
    expect(sub.ok).toBe(true);
    expect(await get(agents.east.traffic, { "x-user": "alice" })).toBe("local saw /hello");
    expect(await get(agents.west.traffic, { "x-user": "alice" })).toBe("local saw /hello");
    expect(await get(agents.east.traffic)).toBe("east-app");
    // Raw steal stream through the router: connection ids are remapped both ways.
    await c.unsubscribe(11, apps.east.port);
    expect((await c.subscribe(12, apps.east.port, "steal")).ok).toBe(true);
    const pending = get(agents.west.traffic);
    const conn = await c.nextConnection();
    expect(conn.info.subscriptionId).toBe(12);
    await conn.untilText("GET /hello");
    conn.write("HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nraw-local");
    expect(await pending).toBe("raw-local");
    c.closeSession();
    await expect.poll(() => agents.east.agent.sessions.size + agents.west.agent.sessions.size).toBe(0);
    expect(await get(agents.west.traffic)).toBe("west-app");
    c.close();
  });

  it("a restarted agent gets the session's subscriptions back from the router", async () => {
    const c = await connect();
    c.httpHandler = () => ({ status: 200, body: "local-again" });
    const filter = { filter: { case: "header" as const, value: { name: "x-user", valueRegex: "^bob$" } } };
    expect((await c.subscribe(21, apps.east.port, "steal", filter)).ok).toBe(true);
    const west = agents.west.agent;
    const port = west.port;
    await west.close();
    await c.session.upstreamStatus("west", pb.UpstreamState.DOWN, 10_000, true);
    const up = c.session.upstreamStatus("west", pb.UpstreamState.UP, 20_000, true);
    agents.west.agent = new AgentServer({
      host: "127.0.0.1",
      port,
      secrets: new SessionSecrets({ secretHashes: [sha256Hex("agent-west")] }),
      view: new TargetView(undefined, undefined),
      ports: [
        {
          appPort: apps.west.port,
          appHost: "127.0.0.3",
          listenPort: agents.west.traffic,
          listenHost: "127.0.0.1",
        },
      ],
      outgoing: { bindAddress: bind.west },
      logger: pino({ level: "silent" }),
    });
    await agents.west.agent.listen();
    await up;
    // The router replays subscription 21 on the new link; the agent accepts it.
    await expect
      .poll(() => agents.west.agent.subscriptions.forPort(apps.west.port).length, { timeout: 5000 })
      .toBe(1);
    expect(await get(agents.west.traffic, { "x-user": "bob" })).toBe("local-again");
    expect(await get(agents.east.traffic, { "x-user": "bob" })).toBe("local-again");
    c.close();
    await expect
      .poll(() => agents.west.agent.sessions.size + agents.east.agent.sessions.size, { timeout: 5000 })
      .toBe(0);
  });

  it("outgoing TCP leaves from the Default cluster's agent only", async () => {
    const c = await connect();
    const res = await c.tcpConnect(5, "127.0.0.1", (echo.address() as AddressInfo).port);
    expect(res).toMatchObject({ error: "", localAddress: bind.east });
    c.tcpSend(5, "through-east");
    await expect.poll(() => c.tcpReceived(5).toString()).toBe("through-east");
    expect(echoSources).toEqual([bind.east]);
    const dns = await c.dns("localhost");
    expect(dns.error).toBe("");
    const env = await c.env();
    expect(env.error).toMatch(/^SWITCHYARD_AGENT_NO_TARGET_POD: /);
    c.close();
  });
});
