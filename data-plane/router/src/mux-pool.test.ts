// The dialer's pool against gateways that refuse the multiplexed upgrade: one that does not
// serve /v1/mux (an older router) is dialled per session from then on; one that refuses the
// session named in the upgrade is asked again next time.
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ErrorCode } from "../../../proto/error-codes.js";
import { writeRefusal } from "../../../proto/session-endpoint.js";
import type { MuxChannel } from "./mux-channel.js";
import { MuxPool } from "./mux-pool.js";

const servers: Server[] = [];
const pools: MuxPool[] = [];
afterEach(() => {
  for (const p of pools.splice(0)) p.close();
  for (const s of servers.splice(0)) s.close();
});

async function refusingGateway(code: string): Promise<string> {
  const server = createServer();
  server.on("upgrade", (_req, socket: Socket) => writeRefusal(socket, 404, code, "refused for the test"));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  servers.push(server);
  return `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function pool(): MuxPool {
  const p = new MuxPool({
    pingIntervalMs: 30_000,
    connectTimeoutMs: 5_000,
    maxPayloadBytes: 1024 * 1024,
    unmasked: false,
    log: pino({ level: "silent" }),
  });
  pools.push(p);
  return p;
}

const failure = (c: MuxChannel): Promise<string> =>
  new Promise((resolve) => {
    let message = "";
    c.on("error", (e) => (message = e.message));
    c.on("close", () => resolve(message));
  });

describe("MuxPool", () => {
  it("dials per session once a gateway shows it serves no /v1/mux", async () => {
    const base = await refusingGateway(ErrorCode.NOT_FOUND);
    const p = pool();
    const d = { url: `${base}/v1/sessions/ns:a`, secret: "s", caPem: "", serverName: "" };
    const first = p.open(d)!;
    expect(first).toBeDefined();
    expect(await failure(first)).toBe(
      `gateway connection lost: gateway refused the multiplexed connection: 404 ${ErrorCode.NOT_FOUND}: refused for the test`,
    );
    expect(p.open(d)).toBeUndefined();
    expect(p.open({ ...d, url: `${base}/v1/sessions/ns:b` })).toBeUndefined();
    expect(p.dialled).toBe(1);
  });

  it("asks again after a refusal of the session that opened the connection", async () => {
    const base = await refusingGateway(ErrorCode.SESSION_NOT_FOUND);
    const p = pool();
    const d = { url: `${base}/v1/sessions/ns:a`, secret: "s", caPem: "", serverName: "" };
    expect(await failure(p.open(d)!)).toContain(`404 ${ErrorCode.SESSION_NOT_FOUND}`);
    const again = p.open(d);
    expect(again).toBeDefined();
    await failure(again!);
    expect(p.dialled).toBe(2);
  });

  it("dials per session for an upstream URL that is not a session URL", () => {
    const p = pool();
    expect(p.open({ url: "ws://127.0.0.1:1/other", secret: "s", caPem: "", serverName: "" })).toBeUndefined();
    expect(
      p.open({ url: "http://127.0.0.1:1/v1/sessions/a", secret: "s", caPem: "", serverName: "" }),
    ).toBeUndefined();
    expect(p.dialled).toBe(0);
  });
});
