// The local SOCKS5 / HTTP proxy against a fake session transport: names reach the dialer
// unresolved (remote DNS), bytes flow both ways through OutgoingTcpStreams, HTTP
// absolute-form requests are rewritten, and dial failures get protocol-correct answers.
// UDP ASSOCIATE runs against a fake UdpRelay whose flows are real datagram sockets talking
// to a real local UDP echo server.
import { createSocket, type Socket as DgramSocket } from "node:dgram";
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import * as pb from "../../../../proto/gen/session_pb.js";
import { LocalProxy, type UdpFlow, type UdpRelay } from "./local-proxy.js";
import { decodeSocksUdp, encodeSocksUdp } from "./socks-udp-header.js";
import { LoopbackTransport } from "../../../../test/peers/loopback-transport.js";

let proxy: LocalProxy | undefined;
const sockets: Socket[] = [];
const dgrams: DgramSocket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await proxy?.close();
  proxy = undefined;
  for (const d of dgrams.splice(0))
    try {
      d.close();
    } catch {
      // closed already (by a flow, or a failed bind)
    }
});

async function start(t: LoopbackTransport): Promise<number> {
  proxy = new LocalProxy({ dialer: t });
  return proxy.listen();
}

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => resolve(s));
    s.once("error", reject);
    sockets.push(s);
  });
}

/** Reads until `n` bytes have arrived. */
function readBytes(s: Socket, n: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      if (buf.length >= n) {
        s.off("data", onData);
        resolve(buf);
      }
    };
    s.on("data", onData);
    s.once("error", reject);
    s.once("close", () => resolve(buf));
  });
}

function readUntil(s: Socket, marker: string): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    const onData = (d: Buffer) => {
      text += d.toString("latin1");
      if (text.includes(marker)) {
        s.off("data", onData);
        resolve(text);
      }
    };
    s.on("data", onData);
  });
}

function readUntilClose(s: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    s.on("data", (d: Buffer) => (text += d.toString("latin1")));
    s.once("close", () => resolve(text));
  });
}

describe("LocalProxy SOCKS5", () => {
  it("passes a domain name to the dialer unresolved and relays bytes both ways", async () => {
    const t = new LoopbackTransport((d) => Buffer.from(d.toString().toUpperCase()));
    const port = await start(t);
    const s = await open(port);
    s.write(Buffer.from([5, 1, 0]));
    expect([...(await readBytes(s, 2))]).toEqual([5, 0]);
    const host = Buffer.from("db.shop.svc.cluster.local");
    s.write(Buffer.concat([Buffer.from([5, 1, 0, 3, host.length]), host, Buffer.from([0x15, 0x38])]));
    const reply = await readBytes(s, 10);
    expect(reply[1]).toBe(0);
    s.write("hello through the cluster");
    expect((await readBytes(s, 25)).toString()).toBe("HELLO THROUGH THE CLUSTER");
    expect(t.dialed).toEqual(["db.shop.svc.cluster.local:5432"]);
    expect(
      t.sent.some((f) => f.family === pb.FrameFamily.OUTGOING_TCP && f.kind === pb.OutgoingKind.DATA),
    ).toBe(true);
  });

  it("accepts IPv4 and IPv6 addresses", async () => {
    const t = new LoopbackTransport();
    const port = await start(t);
    const s4 = await open(port);
    s4.write(Buffer.from([5, 1, 0, 5, 1, 0, 1, 10, 0, 0, 7, 0, 80]));
    expect((await readBytes(s4, 12))[3]).toBe(0);
    const s6 = await open(port);
    const addr = Buffer.alloc(16);
    addr[15] = 1;
    s6.write(Buffer.concat([Buffer.from([5, 1, 0, 5, 1, 0, 4]), addr, Buffer.from([0, 81])]));
    expect((await readBytes(s6, 12))[3]).toBe(0);
    expect(t.dialed).toEqual(["10.0.0.7:80", "0:0:0:0:0:0:0:1:81"]);
  });

  it("answers connection refused when the dial fails, and refuses BIND", async () => {
    const t = new LoopbackTransport();
    t.refuse = "connect ECONNREFUSED 10.0.0.9:1";
    const port = await start(t);
    const s = await open(port);
    const closed = readUntilClose(s);
    s.write(Buffer.from([5, 1, 0, 5, 1, 0, 1, 10, 0, 0, 9, 0, 1]));
    const bytes = Buffer.from(await closed, "latin1");
    expect([...bytes.subarray(0, 4)]).toEqual([5, 0, 5, 5]);

    const b = await open(port);
    const closedB = readUntilClose(b);
    b.write(Buffer.from([5, 1, 0, 5, 2, 0, 1, 10, 0, 0, 9, 0, 1]));
    expect(Buffer.from(await closedB, "latin1")[3]).toBe(7);
  });

  it("refuses clients that offer no no-auth method", async () => {
    const port = await start(new LoopbackTransport());
    const s = await open(port);
    const closed = readUntilClose(s);
    s.write(Buffer.from([5, 1, 2]));
    expect([...Buffer.from(await closed, "latin1")]).toEqual([5, 0xff]);
  });
});

describe("LocalProxy HTTP", () => {
  it("tunnels CONNECT host:port", async () => {
    const t = new LoopbackTransport();
    const port = await start(t);
    const s = await open(port);
    s.write("CONNECT api.internal:443 HTTP/1.1\r\nHost: api.internal:443\r\n\r\n");
    const head = (await readBytes(s, 39)).toString();
    expect(head).toBe("HTTP/1.1 200 Connection Established\r\n\r\n");
    s.write("tls-bytes");
    expect((await readBytes(s, 9)).toString()).toBe("tls-bytes");
    expect(t.dialed).toEqual(["api.internal:443"]);
  });

  it("rewrites an absolute-form request to origin-form with Connection: close", async () => {
    const t = new LoopbackTransport();
    const port = await start(t);
    const s = await open(port);
    const head = readUntil(s, "\r\n\r\n");
    s.write(
      "GET http://orders.shop:8080/v1/orders?x=1 HTTP/1.1\r\nHost: orders.shop:8080\r\nProxy-Connection: keep-alive\r\n\r\n",
    );
    // The loopback echoes what the proxy sent upstream.
    const full = await head;
    expect(full).toMatch(/^GET \/v1\/orders\?x=1 HTTP\/1\.1\r\n/);
    expect(full).toContain("Host: orders.shop:8080\r\n");
    expect(full).toContain("Connection: close\r\n");
    expect(full).not.toMatch(/proxy-connection/i);
    expect(t.dialed).toEqual(["orders.shop:8080"]);
  });

  it("answers 502 naming the target when the cluster cannot connect", async () => {
    const t = new LoopbackTransport();
    t.refuse = "getaddrinfo ENOTFOUND nowhere.shop";
    const port = await start(t);
    const s = await open(port);
    const closed = readUntilClose(s);
    s.write("CONNECT nowhere.shop:443 HTTP/1.1\r\n\r\n");
    const text = await closed;
    expect(text).toMatch(/^HTTP\/1\.1 502 Bad Gateway/);
    expect(text).toContain("nowhere.shop:443");
    expect(text).toContain("ENOTFOUND");
  });

  it("rejects requests that are not absolute http URLs", async () => {
    const port = await start(new LoopbackTransport());
    const s = await open(port);
    const closed = readUntilClose(s);
    s.write("GET /relative HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(await closed).toMatch(/^HTTP\/1\.1 400 /);
  });
});

/** A UDP socket on 127.0.0.1 (port 0 unless given), closed after the test. */
async function udpSocket(port = 0): Promise<DgramSocket> {
  const d = createSocket("udp4");
  dgrams.push(d);
  await new Promise<void>((resolve, reject) => {
    d.once("error", reject);
    d.bind(port, "127.0.0.1", () => resolve());
  });
  return d;
}

/** Answers every datagram with "echo:" + its bytes. */
async function udpEcho(): Promise<number> {
  const d = await udpSocket();
  d.on("message", (m, r) => d.send(Buffer.concat([Buffer.from("echo:"), m]), r.port, r.address));
  return d.address().port;
}

/** Flows are real datagram sockets; "echo.svc" stands for a name only the far side can resolve. */
class FakeRelay implements UdpRelay {
  readonly flows: Array<{ sent: string[]; closed: boolean; fail: (error: string) => void }> = [];
  open(): UdpFlow {
    const sock = createSocket("udp4");
    dgrams.push(sock);
    const rec = { sent: [] as string[], closed: false, fail: (_: string) => {} };
    this.flows.push(rec);
    return {
      send: (host, port, data) => {
        rec.sent.push(`${host}:${port} ${data.toString()}`);
        sock.send(data, port, host === "echo.svc" ? "127.0.0.1" : host);
      },
      onMessage: (l) => sock.on("message", (m, r) => l({ host: r.address, port: r.port }, m)),
      onClose: (l) => (rec.fail = l),
      close: () => {
        rec.closed = true;
        sock.close();
      },
    };
  }
}

/** Greeting + UDP ASSOCIATE (DST 0.0.0.0:`clientPort` unless `dst` is given); the raw reply. */
async function associate(
  port: number,
  clientPort = 0,
  dst = [0, 0, 0, 0],
): Promise<{ s: Socket; reply: Buffer }> {
  const s = await open(port);
  const p = [clientPort >> 8, clientPort & 0xff];
  s.write(Buffer.from([5, 1, 0, 5, 3, 0, 1, ...dst, ...p]));
  return { s, reply: await readBytes(s, 12) };
}

function nextMessage(d: DgramSocket): Promise<Buffer> {
  return new Promise((resolve) => d.once("message", (m) => resolve(m)));
}

/** Whether 127.0.0.1:port is free for a UDP bind (the association's socket closed). */
async function udpPortFree(port: number): Promise<boolean> {
  try {
    await udpSocket(port);
    return true;
  } catch {
    return false;
  }
}

describe("LocalProxy SOCKS5 UDP ASSOCIATE", () => {
  it("relays datagrams both ways with their addresses, dropping fragments and malformed headers", async () => {
    const echoPort = await udpEcho();
    const relay = new FakeRelay();
    proxy = new LocalProxy({ dialer: new LoopbackTransport(), udp: relay });
    const { reply } = await associate(await proxy.listen());
    expect([...reply.subarray(0, 8)]).toEqual([5, 0, 5, 0, 0, 1, 127, 0]);
    expect([...reply.subarray(8, 10)]).toEqual([0, 1]);
    const bnd = reply.readUInt16BE(10);
    expect(bnd).toBeGreaterThan(0);

    const client = await udpSocket();
    let answer = nextMessage(client);
    client.send(encodeSocksUdp("127.0.0.1", echoPort, Buffer.from("query-1")), bnd, "127.0.0.1");
    expect(decodeSocksUdp(await answer)).toEqual({
      ok: true,
      frag: 0,
      host: "127.0.0.1",
      port: echoPort,
      data: Buffer.from("echo:query-1"),
    });

    client.send(encodeSocksUdp("127.0.0.1", echoPort, Buffer.from("fragment"), 1), bnd, "127.0.0.1");
    client.send(Buffer.from([0, 0, 0, 9, 1, 2]), bnd, "127.0.0.1");
    answer = nextMessage(client);
    client.send(encodeSocksUdp("echo.svc", echoPort, Buffer.from("query-2")), bnd, "127.0.0.1");
    expect(decodeSocksUdp(await answer)).toMatchObject({ ok: true, data: Buffer.from("echo:query-2") });
    // The name reached the relay unresolved; the fragment and the junk never did.
    expect(relay.flows).toHaveLength(1);
    expect(relay.flows[0]!.sent).toEqual([`127.0.0.1:${echoPort} query-1`, `echo.svc:${echoPort} query-2`]);
    expect(proxy.udpDropped).toBe(2);
    expect(proxy.udpDatagrams).toBe(4);
  });

  it("accepts only the client's pinned port: the first sender's, or the one the request named", async () => {
    const echoPort = await udpEcho();
    const relay = new FakeRelay();
    proxy = new LocalProxy({ dialer: new LoopbackTransport(), udp: relay });
    const port = await proxy.listen();
    const first = await udpSocket();
    const other = await udpSocket();
    const { reply } = await associate(port);
    const bnd = reply.readUInt16BE(10);
    const answer = nextMessage(first);
    first.send(encodeSocksUdp("127.0.0.1", echoPort, Buffer.from("a")), bnd, "127.0.0.1");
    await answer;
    other.send(encodeSocksUdp("127.0.0.1", echoPort, Buffer.from("b")), bnd, "127.0.0.1");
    await expect.poll(() => proxy!.udpDropped).toBe(1);

    const named = await associate(port, other.address().port, [127, 0, 0, 1]);
    const bnd2 = named.reply.readUInt16BE(10);
    first.send(encodeSocksUdp("127.0.0.1", echoPort, Buffer.from("c")), bnd2, "127.0.0.1");
    await expect.poll(() => proxy!.udpDropped).toBe(2);
    const answer2 = nextMessage(other);
    other.send(encodeSocksUdp("127.0.0.1", echoPort, Buffer.from("d")), bnd2, "127.0.0.1");
    expect(decodeSocksUdp(await answer2)).toMatchObject({ data: Buffer.from("echo:d") });
    expect(relay.flows.map((f) => f.sent.length)).toEqual([1, 1]);
  });

  it("refuses a request naming another client address (02)", async () => {
    proxy = new LocalProxy({ dialer: new LoopbackTransport(), udp: new FakeRelay() });
    const s = await open(await proxy.listen());
    const closed = readUntilClose(s);
    s.write(Buffer.from([5, 1, 0, 5, 3, 0, 1, 10, 9, 9, 9, 0, 0]));
    expect([...Buffer.from(await closed, "latin1").subarray(2, 4)]).toEqual([5, 2]);
  });

  it("ends the association when the control connection closes, and the connection when the flow fails", async () => {
    const relay = new FakeRelay();
    proxy = new LocalProxy({ dialer: new LoopbackTransport(), udp: relay });
    const port = await proxy.listen();
    const one = await associate(port);
    const bnd1 = one.reply.readUInt16BE(10);
    expect(await udpPortFree(bnd1)).toBe(false);
    one.s.destroy();
    await expect.poll(() => relay.flows[0]!.closed).toBe(true);
    await expect.poll(() => udpPortFree(bnd1)).toBe(true);

    const two = await associate(port);
    const closed = readUntilClose(two.s);
    relay.flows[1]!.fail("SWITCHYARD_TEST: the cluster closed the socket");
    await closed;
    expect(relay.flows[1]!.closed).toBe(true);
    await expect.poll(() => udpPortFree(two.reply.readUInt16BE(10))).toBe(true);

    await associate(port);
    await proxy.close();
    expect(relay.flows[2]!.closed).toBe(true);
  });

  it("answers command not supported (07) without a UdpRelay", async () => {
    const port = await start(new LoopbackTransport());
    const s = await open(port);
    const closed = readUntilClose(s);
    s.write(Buffer.from([5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0]));
    expect([...Buffer.from(await closed, "latin1").subarray(2, 4)]).toEqual([5, 7]);
  });
});
