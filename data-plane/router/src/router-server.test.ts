// The router's two listeners in-process: the session port answers probes and sessions only
// (/metrics and /debug/* are 404 there, like any unknown path), the admin port serves
// them; and an unknown session is refused with the very bytes a wrong secret gets.
import { create } from "@bufbuild/protobuf";
import { connect as netConnect, createServer, type Server } from "node:net";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SessionRouteSchema, SessionState } from "../../../proto/gen/route_discovery_pb.js";
import { hashSecret } from "../../../proto/session-auth.js";
import { RouterServer } from "./router-server.js";

const SESSION = "mc-admin-0001";
const SECRET = "client-secret-admin";

let router: RouterServer;
let publicBase: string;
let adminBase: string;

beforeEach(async () => {
  router = new RouterServer({
    host: "127.0.0.1",
    port: 0,
    admin: { host: "127.0.0.1", port: 0 },
    logger: pino({ level: "silent" }),
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
        upstreams: [
          { cluster: "east", url: "ws://127.0.0.1:1/v1/sessions/child", secret: "s", isDefault: true },
        ],
      }),
    ],
  });
  const { port } = await router.listen();
  publicBase = `http://127.0.0.1:${port}`;
  adminBase = `http://127.0.0.1:${router.adminAddress!.port}`;
});

afterEach(async () => {
  await router?.close();
});

describe("the session port", () => {
  it("answers /metrics and /debug/* with 404, as any unknown path", async () => {
    const unknown = await fetch(`${publicBase}/no-such-path`);
    expect(unknown.status).toBe(404);
    const unknownBody = (await unknown.json()) as { code: string };
    for (const path of ["/metrics", "/debug/routes", "/debug/memory", "/debug/memory?gc=1"]) {
      const r = await fetch(publicBase + path);
      expect(r.status, path).toBe(404);
      const body = (await r.json()) as { code: string; message: string };
      expect(body.code, path).toBe(unknownBody.code);
      expect(body.message, path).not.toContain(SESSION);
    }
  });

  it("still answers the probes", async () => {
    expect((await fetch(`${publicBase}/healthz`)).status).toBe(200);
    expect((await fetch(`${publicBase}/readyz`)).status).toBe(200);
  });
});

describe("the admin port", () => {
  it("serves /metrics, /healthz, /readyz, /debug/routes and /debug/memory", async () => {
    const metrics = await fetch(`${adminBase}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^switchyard_router_routing_table_sessions 1$/m);
    expect((await fetch(`${adminBase}/healthz`)).status).toBe(200);
    expect((await fetch(`${adminBase}/readyz`)).status).toBe(200);
    const routes = await (await fetch(`${adminBase}/debug/routes`)).text();
    expect(routes).toContain(SESSION);
    expect(routes).toContain("ws://127.0.0.1:1/v1/sessions/child");
    expect(routes).not.toContain(hashSecret(SECRET));
    const memory = (await (await fetch(`${adminBase}/debug/memory`)).json()) as { heapUsed: number };
    expect(memory.heapUsed).toBeGreaterThan(0);
    expect((await fetch(`${adminBase}/v1/sessions/${SESSION}`)).status).toBe(404);
  });

  it("answers /debug/routes?session= with that session only, and when this router applied it", async () => {
    const one = (await (await fetch(`${adminBase}/debug/routes?session=${SESSION}`)).json()) as {
      sessions: Array<{ sessionId: string; changedAt: string }>;
      attached: unknown[];
    };
    expect(one.sessions.map((s) => s.sessionId)).toEqual([SESSION]);
    expect(one.attached).toEqual([]);
    const at = Date.parse(one.sessions[0]!.changedAt);
    expect(Date.now() - at).toBeGreaterThanOrEqual(0);
    expect(Date.now() - at).toBeLessThan(60_000);
    const missing = await fetch(`${adminBase}/debug/routes?session=nope`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { message: string }).message).toMatch(
      /session "nope" is not in this router's table/,
    );
  });

  it("binds loopback by default and names --admin-listen when its port is taken", async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, "127.0.0.1", r));
    const port = (taken.address() as { port: number }).port;
    const second = new RouterServer({
      host: "127.0.0.1",
      port: 0,
      admin: { port },
      logger: pino({ level: "silent" }),
    });
    try {
      await expect(second.listen()).rejects.toThrow(
        new RegExp(
          `admin listener: cannot listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE\\).*--admin-listen`,
        ),
      );
    } finally {
      await second.close();
      await new Promise((r) => taken.close(r));
    }
  });
});

/**
 * Everything a server writes back to a WebSocket upgrade request, until it closes the
 * connection; an accepted upgrade (101) is cut off after its headers.
 */
function upgradeReply(
  base: string,
  sessionId: string,
  secret: string,
  prefix = "/v1/sessions/",
): Promise<Buffer> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = netConnect(Number(port), hostname, () =>
      socket.write(
        `GET ${prefix}${sessionId} HTTP/1.1\r\n` +
          `Host: ${hostname}:${port}\r\n` +
          "Upgrade: websocket\r\nConnection: Upgrade\r\n" +
          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
          `Authorization: Bearer ${secret}\r\n\r\n`,
      ),
    );
    socket.on("data", (c: Buffer) => {
      chunks.push(c);
      const soFar = Buffer.concat(chunks).toString("latin1");
      if (soFar.startsWith("HTTP/1.1 101 ") && soFar.includes("\r\n\r\n")) socket.destroy();
    });
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(chunks)));
  });
}

describe("an unknown session and a wrong secret", () => {
  it("get the same bytes back, and the connection is closed without an upgrade", async () => {
    const wrongSecret = await upgradeReply(publicBase, SESSION, "not-the-secret");
    const unknown = await upgradeReply(publicBase, "mc-never-existed", SECRET);
    const unknownWrong = await upgradeReply(publicBase, "mc-never-existed-either", "not-the-secret");
    expect(unknown.toString("latin1")).toBe(wrongSecret.toString("latin1"));
    expect(unknownWrong.equals(wrongSecret)).toBe(true);
    const reply = wrongSecret.toString("utf8");
    expect(reply).toMatch(/^HTTP\/1\.1 404 Not Found\r\n/);
    expect(reply).not.toContain(SESSION);
    expect(reply).not.toMatch(/101 Switching Protocols/);
    // The right secret still gets through: the refusal above is not a broken endpoint.
    expect((await upgradeReply(publicBase, SESSION, SECRET)).toString()).toMatch(/^HTTP\/1\.1 101 /);
  });

  it("are told apart from a missing secret only before any lookup: 401 whatever the id", async () => {
    const a = await upgradeReply(publicBase, SESSION, "");
    const b = await upgradeReply(publicBase, "mc-never-existed", "");
    expect(a.equals(b)).toBe(true);
    expect(a.toString()).toMatch(/^HTTP\/1\.1 401 /);
  });
});

describe("the multiplexed gateway endpoint /v1/mux/{id}", () => {
  it("refuses exactly as the session endpoint does, and upgrades with a session's secret", async () => {
    const session = await upgradeReply(publicBase, SESSION, "not-the-secret");
    const mux = await upgradeReply(publicBase, SESSION, "not-the-secret", "/v1/mux/");
    const muxUnknown = await upgradeReply(publicBase, "mc-never-existed", SECRET, "/v1/mux/");
    expect(mux.equals(session)).toBe(true);
    expect(muxUnknown.equals(session)).toBe(true);
    expect((await upgradeReply(publicBase, SESSION, "", "/v1/mux/")).toString()).toMatch(/^HTTP\/1\.1 401 /);
    expect((await upgradeReply(publicBase, SESSION, SECRET, "/v1/mux/")).toString()).toMatch(
      /^HTTP\/1\.1 101 /,
    );
  });
});
