// The namespace's resolver against real UDP sockets: a fake relay stands for the session's
// outgoing UDP and hands queries to a real "nameserver" socket on loopback.
import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { afterEach, describe, expect, it } from "vitest";
import type { UdpFlow, UdpRelay } from "../local/local-proxy.js";
import { localUdpFlow } from "./namespace-bridge.js";
import { NamespaceDns } from "./namespace-dns.js";

const closers: Array<() => void> = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

/** A nameserver that answers each query with its id and a tag naming the server. */
async function nameserver(tag: string, silent = false): Promise<{ port: number; queries: Buffer[] }> {
  const s: UdpSocket = createSocket("udp4");
  const queries: Buffer[] = [];
  s.on("message", (m, r) => {
    queries.push(m);
    if (!silent) s.send(Buffer.concat([m.subarray(0, 12), Buffer.from(tag)]), r.port, r.address);
  });
  await new Promise<void>((r) => s.bind(0, "127.0.0.1", r));
  closers.push(() => s.close());
  return { port: s.address().port, queries };
}

/** Relays "nameserver:53" to the real server's port; everything else as given. */
function relayTo(ports: Record<string, number>): UdpRelay & { flows: UdpFlow[] } {
  const flows: UdpFlow[] = [];
  return {
    flows,
    open() {
      const f = localUdpFlow();
      const flow: UdpFlow = {
        send: (host, port, data) => f.send("127.0.0.1", port === 53 ? ports[host]! : port, data),
        onMessage: (l) => f.onMessage(l),
        onClose: (l) => f.onClose(l),
        close: () => f.close(),
      };
      flows.push(flow);
      return flow;
    },
  };
}

function query(id: number, name: string): Buffer {
  const q = Buffer.alloc(12 + name.length);
  q.writeUInt16BE(id, 0);
  q.write(name, 12);
  return q;
}

async function ask(port: number, q: Buffer, timeoutMs = 3000): Promise<Buffer | undefined> {
  const c = createSocket("udp4");
  closers.push(() => c.close());
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(undefined), timeoutMs);
    c.once("message", (m) => {
      clearTimeout(t);
      resolve(m);
    });
    c.send(q, port, "127.0.0.1");
  });
}

describe("namespace resolver", () => {
  it("forwards each query to the pod's nameserver and answers the asker with its own id", async () => {
    const ns = await nameserver("east");
    const dns = new NamespaceDns({
      nameservers: ["10.96.0.10"],
      udp: relayTo({ "10.96.0.10": ns.port }),
      dialTcp: () => Promise.reject(new Error("no tcp")),
      port: 0,
    });
    await dns.listen();
    closers.push(() => dns.close());
    const port = dnsPort(dns);
    // Two clients with the same id: each gets its own answer back.
    const [a, b] = await Promise.all([ask(port, query(7, "a.svc")), ask(port, query(7, "b.svc"))]);
    expect(a?.readUInt16BE(0)).toBe(7);
    expect(b?.readUInt16BE(0)).toBe(7);
    expect(a?.subarray(12).toString()).toBe("east");
    // The nameserver saw two different ids (the resolver's own), not the clients' colliding 7s.
    const ids = ns.queries.map((q) => q.readUInt16BE(0));
    expect(new Set(ids).size).toBe(2);
    expect(ns.queries.map((q) => q.subarray(12).toString()).sort()).toEqual(["a.svc", "b.svc"]);
  });

  it("asks the next nameserver when the first does not answer", async () => {
    const quiet = await nameserver("first", true);
    const second = await nameserver("second");
    const dns = new NamespaceDns({
      nameservers: ["10.96.0.10", "10.96.0.11"],
      udp: relayTo({ "10.96.0.10": quiet.port, "10.96.0.11": second.port }),
      dialTcp: () => Promise.reject(new Error("no tcp")),
      port: 0,
      timeoutMs: 200,
    });
    await dns.listen();
    closers.push(() => dns.close());
    const answer = await ask(dnsPort(dns), query(1, "x"));
    expect(answer?.subarray(12).toString()).toBe("second");
    expect(quiet.queries).toHaveLength(1);
  });

  it("refuses a pod without nameservers", () => {
    expect(
      () =>
        new NamespaceDns({ nameservers: [], udp: relayTo({}), dialTcp: () => Promise.reject(new Error()) }),
    ).toThrow(/names no nameserver/);
  });
});

function dnsPort(dns: NamespaceDns): number {
  return dns.udpPort;
}
