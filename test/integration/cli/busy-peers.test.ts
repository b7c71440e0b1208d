// A busy peer is not a dead peer, through the whole data path: the SDK's SessionClient, a
// real router process and the real agent (AgentServer in process), every liveness timeout
// short (router pings every 250 ms, so a peer may be silent for 500 ms; agent ping
// timeout and SDK liveness 500 ms). A slow consumer at either end holds a large transfer
// under backpressure for six of those timeouts — a local program that does not read a
// stolen request's body (the CLI stops reading, the router stops reading the agent), and
// a destination that does not read an outgoing upload (the agent stops reading, the
// router stops reading the CLI) — and the session survives with every byte intact. A
// router that really dies (SIGSTOP: its sockets stay open, it just never answers) is still
// found within the SDK's timeout, and the session moves to the other router.
import { createHash } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import { createServer as createTcpServer, type AddressInfo, type Socket } from "node:net";
import { Readable } from "node:stream";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AgentServer } from "../../../data-plane/agent/src/agent-server.js";
import { SessionSecrets } from "../../../data-plane/agent/src/session-secrets.js";
import { TargetView } from "../../../data-plane/agent/src/target/target-view.js";
import type { IncomingHttpRequest } from "../../../cli/src/sdk/session/incoming-traffic.js";
import { SessionClient, type UpstreamEvent } from "../../../cli/src/sdk/session/session-client.js";
import { hashSecret } from "../../../proto/session-auth.js";
import { RouterProcess } from "../router/router-process.js";

const SECRET = "busy-peers-secret";
const SESSION = "mc-00000000000000c3";
const PING_INTERVAL_MS = 250;
const SILENCE_MS = 2 * PING_INTERVAL_MS;
const HOLD_MS = 6 * SILENCE_MS; // well past every timeout, below the 10× ceilings
const TOTAL = 32 * 1024 * 1024;

let app: Server;
let targetPort = 0;
let agent: AgentServer;
let trafficPort = 0;

beforeAll(async () => {
  app = createServer((_req, res) => res.end("cluster-app"));
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", () => r()));
  targetPort = (app.address() as AddressInfo).port;
  agent = new AgentServer({
    host: "127.0.0.1",
    port: 0,
    secrets: new SessionSecrets({ secretHashes: [hashSecret("agent-east")] }),
    view: new TargetView(undefined, undefined),
    ports: [{ appPort: targetPort, listenPort: 0 }],
    pingTimeoutMs: SILENCE_MS,
    logger: pino({ level: "silent" }),
  });
  await agent.listen();
  trafficPort = agent.trafficPorts.get(targetPort)!;
});

afterAll(async () => {
  await agent?.close();
  app?.closeAllConnections();
  app?.close();
});

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** TOTAL bytes that differ block by block, so a lost or reordered block shows. */
const payload = (() => {
  const b = Buffer.alloc(TOTAL);
  for (let at = 0, i = 0; at < TOTAL; at += 64 * 1024, i++) b.fill(i % 251, at, at + 64 * 1024);
  return b;
})();

async function startRouter(): Promise<RouterProcess> {
  const r = await RouterProcess.start(
    [
      {
        sessionId: SESSION,
        secret: SECRET,
        upstreams: [{ cluster: "east", url: agent.url(SESSION), secret: "agent-east", isDefault: true }],
      },
    ],
    ["--ws-ping-interval-ms", String(PING_INTERVAL_MS), "--log-level", "info"],
  );
  cleanup.push(() => r.stop());
  return r;
}

/** A connected session; `trouble` collects every reconnect and upstream loss. */
async function session(routers: RouterProcess[]) {
  const c = new SessionClient({
    sessionId: SESSION,
    secret: SECRET,
    urls: routers.map((r) => r.sessionUrl(SESSION)),
    pingIntervalMs: SILENCE_MS / 4,
    livenessTimeoutMs: SILENCE_MS,
    backoff: { initialMs: 50, maxMs: 200, maxAttempts: 4 },
  });
  const trouble: string[] = [];
  const up = new Promise<void>((resolve) =>
    c.on("upstream", (u: UpstreamEvent) => {
      if (u.up) resolve();
      else trouble.push(`${u.cluster} down: ${u.error}`);
    }),
  );
  c.on("reconnecting", (e) => trouble.push(`reconnecting: ${e.error}`));
  c.on("reconnected", (e) => trouble.push(`reconnected ${e.url}`));
  c.on("lost", (e) => trouble.push(`lost: ${e.message}`));
  await c.connect();
  await up;
  cleanup.push(async () => {
    c.close();
    await expect.poll(() => agent.sessions.size, { timeout: 10_000 }).toBe(0);
  });
  return { c, trouble };
}

function post(port: number, path: string, body: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method: "POST", agent: false }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve(`${res.statusCode} ${text}`));
    });
    req.on("error", reject);
    req.end(body);
  });
}

describe("a busy peer is not a dead peer", () => {
  it("a local program that does not read a stolen request's body for six timeouts: the session survives, the body arrives whole", async () => {
    const router = await startRouter();
    const { c, trouble } = await session([router]);
    await c.subscribe(targetPort, "steal", { path: "^/upload" });
    const requests: IncomingHttpRequest[] = [];
    c.on("httpRequest", (r) => requests.push(r));
    const answer = post(trafficPort, "/upload", payload);
    await expect.poll(() => requests.length, { timeout: 10_000 }).toBe(1);
    const req = requests[0]!;
    const body = req.body as Readable;
    // The program reads nothing yet: the session stops reading, then the router stops
    // reading the agent, and the agent stops reading the caller.
    await expect
      .poll(() => router.metric("switchyard_router_events_total", { event: "backpressure_pause_upstream" }), {
        timeout: 10_000,
        interval: 50,
      })
      .toBeGreaterThan(0);
    await sleep(HOLD_MS);
    expect(trouble).toEqual([]);
    expect(c.state).toBe("open");
    expect(agent.metrics.counters.pingTimeouts).toBe(0);
    expect(body.readableLength).toBeLessThan(TOTAL / 4); // it really was held, not buffered

    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk as Buffer);
    const got = Buffer.concat(chunks);
    req.respond({ status: 200, body: Buffer.from(`${got.length} ${sha(got)}`) });
    expect(await answer).toBe(`200 ${TOTAL} ${sha(payload)}`);
    expect(trouble).toEqual([]);
    expect(agent.metrics.counters.pingTimeouts).toBe(0);
  });

  it("an outgoing upload whose destination does not read for six timeouts: the session survives, every byte arrives", async () => {
    const router = await startRouter();
    const { c, trouble } = await session([router]);
    const sockets: Socket[] = [];
    const received: Buffer[] = [];
    let reading = false;
    const dest = createTcpServer((s) => {
      sockets.push(s);
      if (!reading) s.pause();
      s.on("data", (d: Buffer) => received.push(d));
    });
    await new Promise<void>((r) => dest.listen(0, "127.0.0.1", () => r()));
    cleanup.push(() => {
      for (const s of sockets) s.destroy();
      dest.close();
    });
    const stream = await c.connectTcp("127.0.0.1", (dest.address() as AddressInfo).port);
    Readable.from(
      (function* () {
        for (let at = 0; at < TOTAL; at += 256 * 1024) yield payload.subarray(at, at + 256 * 1024);
      })(),
    ).pipe(stream);
    // The agent stops reading the session, then the router stops reading the SDK.
    await expect
      .poll(() => agent.sessions.get(SESSION)?.flow.readingBlocked, { timeout: 10_000, interval: 10 })
      .toBe(true);
    await expect
      .poll(() => router.metric("switchyard_router_events_total", { event: "backpressure_pause_client" }), {
        timeout: 10_000,
        interval: 50,
      })
      .toBeGreaterThan(0);
    await sleep(HOLD_MS);
    expect(trouble).toEqual([]);
    expect(c.state).toBe("open");
    expect(agent.metrics.counters.pingTimeouts).toBe(0);

    reading = true;
    for (const s of sockets) s.resume();
    await expect
      .poll(() => received.reduce((n, b) => n + b.length, 0), { timeout: 30_000, interval: 50 })
      .toBe(TOTAL);
    expect(sha(Buffer.concat(received))).toBe(sha(payload));
    expect(trouble).toEqual([]);
    expect(agent.metrics.counters.pingTimeouts).toBe(0);
  });

  it("a router that stops answering (SIGSTOP) is found within the SDK's timeout; the other router takes over", async () => {
    const r1 = await startRouter();
    const r2 = await startRouter();
    const { c, trouble } = await session([r1, r2]);
    const sub = await c.subscribe(targetPort, "steal", { path: "^/after" });
    expect(c.url).toBe(r1.sessionUrl(SESSION));
    process.kill(r1.pid, "SIGSTOP");
    cleanup.push(() => process.kill(r1.pid, "SIGCONT")); // before its stop (cleanups run in reverse)
    const since = Date.now();
    await expect.poll(() => c.url, { timeout: 10_000, interval: 10 }).toBe(r2.sessionUrl(SESSION));
    expect(Date.now() - since).toBeLessThan(SILENCE_MS + 2000);
    await expect.poll(() => trouble.some((t) => t.startsWith("reconnected"))).toBe(true);
    expect(c.subscriptions.map((s) => s.id)).toEqual([sub.id]);
    // The agent follows: the stolen request reaches the session through the new router.
    c.on("httpRequest", (r) => r.respond({ status: 200, body: Buffer.from("local") }));
    await expect
      .poll(() => post(trafficPort, "/after", Buffer.from("x")), { timeout: 10_000 })
      .toBe("200 local");
  });
});
