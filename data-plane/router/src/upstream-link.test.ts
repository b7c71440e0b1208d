// A wss:// upstream dialled by IP address whose certificate names only a DNS name, as
// routers reach sidecar agents (by pod IP, certificate for "switchyard-agent"): the link
// comes up when the route's server_name is that name (sent as SNI, checked against the
// certificate) and goes down with the certificate error without it.
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { pino } from "pino";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { WebSocketServer } from "ws";
import { encodeFrame } from "../../../proto/frame-codec.js";
import { PROTOCOL_VERSION_MAX } from "../../../proto/frame-version.js";
import { ControlKind, FrameFamily, HelloAckSchema } from "../../../proto/gen/session_pb.js";
import { createCertificateAuthority, type CertificateAuthority } from "../../../test/env/pki.js";
import { eventually } from "../../../test/support/poll.js";
import { TrafficCounters } from "./router-metrics.js";
import { UpstreamLink } from "./upstream-link.js";

let ca: CertificateAuthority;
let leaf: { certPem: string; keyPem: string };
const cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  ca = await createCertificateAuthority("upstream-link-test-ca");
  leaf = await ca.issue({ commonName: "switchyard-agent", dnsNames: ["switchyard-agent"], usage: "server" });
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A wss:// endpoint on 127.0.0.1 that answers Hello; records the SNI name each client sent. */
async function tlsAgent(): Promise<{ url: string; serverNames: unknown[] }> {
  const serverNames: unknown[] = [];
  const server: Server = createServer({ cert: leaf.certPem, key: leaf.keyPem });
  const wss = new WebSocketServer({ server });
  wss.on("connection", (ws, req) => {
    serverNames.push((req.socket as TLSSocket).servername);
    ws.on("message", () =>
      ws.send(
        encodeFrame({ family: FrameFamily.CONTROL, kind: ControlKind.HELLO_ACK }, HelloAckSchema, {
          version: PROTOCOL_VERSION_MAX,
          peer: "test-agent",
        }),
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `wss://127.0.0.1:${(server.address() as AddressInfo).port}/v1/sessions/s`, serverNames };
}

function link(url: string, serverName: string) {
  const events = { up: 0, downs: [] as string[] };
  const l = new UpstreamLink(
    {
      sessionId: "s",
      cluster: "pod-a",
      url,
      secret: "agent-secret",
      caPem: ca.certPem,
      serverName,
      isDefault: true,
      limits: { highWaterBytes: 1 << 20, lowWaterBytes: 1 << 18, hardLimitBytes: 8 << 20 },
      maxPayloadBytes: 1 << 20,
      backoff: { initialMs: 60_000, maxMs: 60_000 },
      connectTimeoutMs: 5_000,
      pingIntervalMs: 30_000,
      unmasked: false,
      mux: false,
      counters: new TrafficCounters("pod-a"),
      log: pino({ level: "silent" }),
    },
    {
      frame: () => {},
      up: () => events.up++,
      down: (_l, error) => events.downs.push(error),
      drained: () => {},
    },
  );
  cleanups.push(() => l.close());
  l.connect();
  return { link: l, events };
}

describe("UpstreamLink server_name", () => {
  it("verifies an upstream dialled by IP against server_name and sends it as SNI", async () => {
    const agent = await tlsAgent();
    const { link: l, events } = link(agent.url, "switchyard-agent");
    await eventually("link up", () => (l.state === "open" ? true : undefined), { timeoutMs: 5_000 });
    expect(events).toEqual({ up: 1, downs: [] });
    expect(agent.serverNames).toEqual(["switchyard-agent"]);
  });

  it("refuses the same upstream without server_name: the certificate does not name the IP", async () => {
    const agent = await tlsAgent();
    const { link: l, events } = link(agent.url, "");
    await eventually("link down", () => (l.state === "down" ? true : undefined), { timeoutMs: 5_000 });
    expect(l.lastError).toMatch(/IP: 127\.0\.0\.1 is not in the cert's list/);
    expect(events.up).toBe(0);
    expect(events.downs).toEqual([l.lastError]);
    expect(agent.serverNames).toEqual([]);
  });

  it("refuses a server_name the certificate does not carry", async () => {
    const agent = await tlsAgent();
    const { link: l } = link(agent.url, "other-agent");
    await eventually("link down", () => (l.state === "down" ? true : undefined), { timeoutMs: 5_000 });
    expect(l.lastError).toMatch(/Host: other-agent\. is not in the cert's altnames: DNS:switchyard-agent/);
  });
});
