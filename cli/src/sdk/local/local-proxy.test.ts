// The local SOCKS5 / HTTP proxy against a fake session transport: names reach the dialer
// unresolved (remote DNS), bytes flow both ways through OutgoingTcpStreams, HTTP
// absolute-form requests are rewritten, and dial failures get protocol-correct answers.
import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import * as pb from "../../../../proto/gen/session_pb.js";
import { LocalProxy } from "./local-proxy.js";
import { LoopbackTransport } from "../../../../test/peers/loopback-transport.js";

let proxy: LocalProxy | undefined;
const sockets: Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await proxy?.close();
  proxy = undefined;
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
