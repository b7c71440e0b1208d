// What the CLI puts on the wire: a raw TCP (and TLS) server that does the WebSocket
// handshake by hand and parses frame headers itself — a `ws` server would unmask them
// before anyone could look — proves that every client frame, Hello and the ones after,
// is masked with a non-zero key that changes from frame to frame, over ws:// and wss://.
import { createHash } from "node:crypto";
import { createServer as createTcpServer, type AddressInfo, type Server, type Socket } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import { afterEach, describe, expect, it } from "vitest";
import * as pb from "../../../../proto/gen/session_pb.js";
import { decodeFrame, encodeFrame } from "../../../../proto/frame-codec.js";
import { PROTOCOL_VERSION_MAX } from "../../../../proto/frame-version.js";
import { createCertificateAuthority } from "../../../../test/env/pki.js";
import { dialRouter, type DialedRouter } from "./router-dial.js";

const F = pb.FrameFamily;
const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

interface WireFrame {
  opcode: number;
  masked: boolean;
  /** The 4-byte masking key as sent (empty when unmasked). */
  key: Buffer;
  /** The payload, unmasked. */
  payload: Buffer;
}

/** A WebSocket peer that reads frames off the socket itself. */
class RawWebSocketServer {
  readonly frames: WireFrame[] = [];
  private readonly sockets = new Set<Socket>();
  private waiters: Array<() => void> = [];

  /** @param tls true for a TLS server: frames are read off its decrypted sockets. */
  constructor(
    private readonly server: Server,
    tls = false,
  ) {
    server.on(tls ? "secureConnection" : "connection", (s: Socket) => this.accept(s));
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", () => r()));
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((r) => this.server.close(r));
  }

  async untilFrames(n: number): Promise<WireFrame[]> {
    while (this.frames.length < n) {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`${this.frames.length} of ${n} frames arrived`)), 5000);
        this.waiters.push(() => (clearTimeout(t), resolve()));
      });
    }
    return this.frames.slice(0, n);
  }

  private accept(s: Socket): void {
    this.sockets.add(s);
    let buf = Buffer.alloc(0);
    let upgraded = false;
    s.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (!upgraded) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.subarray(0, end).toString("latin1");
        buf = buf.subarray(end + 4);
        const key = /^sec-websocket-key:\s*(\S+)/im.exec(head)?.[1] ?? "";
        const accept = createHash("sha1")
          .update(key + WS_GUID)
          .digest("base64");
        s.write(
          "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
            `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
        );
        upgraded = true;
      }
      for (let f = this.parse(buf); f; f = this.parse(buf)) {
        buf = buf.subarray(f.size);
        this.frames.push(f.frame);
        if (this.frames.length === 1) this.answerHello(s, f.frame);
        for (const w of this.waiters.splice(0)) w();
      }
    });
    s.on("error", () => {});
  }

  /** One frame from the front of `b`, or undefined until all of it has arrived. */
  private parse(b: Buffer): { frame: WireFrame; size: number } | undefined {
    if (b.length < 2) return undefined;
    const masked = (b[1]! & 0x80) !== 0;
    let len = b[1]! & 0x7f;
    let at = 2;
    if (len === 126) {
      if (b.length < 4) return undefined;
      len = b.readUInt16BE(2);
      at = 4;
    } else if (len === 127) {
      if (b.length < 10) return undefined;
      len = Number(b.readBigUInt64BE(2));
      at = 10;
    }
    const keyLen = masked ? 4 : 0;
    if (b.length < at + keyLen + len) return undefined;
    const key = Buffer.from(b.subarray(at, at + keyLen));
    const payload = Buffer.from(b.subarray(at + keyLen, at + keyLen + len));
    if (masked) for (let i = 0; i < payload.length; i++) payload[i] = payload[i]! ^ key[i % 4]!;
    return { frame: { opcode: b[0]! & 0x0f, masked, key, payload }, size: at + keyLen + len };
  }

  private answerHello(s: Socket, hello: WireFrame): void {
    const f = decodeFrame(hello.payload);
    const ack = encodeFrame(
      { family: F.CONTROL, kind: pb.ControlKind.HELLO_ACK, requestId: f.header.requestId },
      pb.HelloAckSchema,
      { version: PROTOCOL_VERSION_MAX, peer: "raw-router" },
    );
    // Server frames are never masked; the ack is short (< 126 bytes).
    s.write(Buffer.concat([Buffer.from([0x82, ack.length]), ack]));
  }
}

const open: Array<{ server: RawWebSocketServer; dialed?: DialedRouter }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    o.dialed?.ws.terminate();
    await o.server.close();
  }
});

async function sendAndInspect(server: RawWebSocketServer, url: string, caPem?: string): Promise<void> {
  const entry: { server: RawWebSocketServer; dialed?: DialedRouter } = { server };
  open.push(entry);
  const dialed = await dialRouter(url, "raw-secret", caPem ? { caPem } : {});
  entry.dialed = dialed;
  const sent = Array.from({ length: 8 }, (_, i) => Buffer.from(`frame ${i} `.repeat(i * 20 + 1)));
  for (const b of sent) dialed.ws.send(b);
  const frames = await server.untilFrames(1 + sent.length);

  // The Hello, as the router reads it once unmasked.
  const hello = decodeFrame(frames[0]!.payload);
  expect(hello.header).toMatchObject({ family: F.CONTROL, kind: pb.ControlKind.HELLO });
  expect(frames.slice(1).map((f) => f.payload)).toEqual(sent);
  for (const f of frames) {
    expect(f.opcode).toBe(0x2);
    expect(f.masked).toBe(true);
    expect(f.key).toHaveLength(4);
    expect(f.key.equals(Buffer.alloc(4))).toBe(false);
  }
  // Random keys: nine 32-bit draws collide with odds of about 1 in 10^8.
  expect(new Set(frames.map((f) => f.key.toString("hex"))).size).toBe(frames.length);
}

describe("router dial: frame masking", () => {
  it("masks every frame with a fresh non-zero key over ws://", async () => {
    const server = new RawWebSocketServer(createTcpServer());
    const port = await server.listen();
    await sendAndInspect(server, `ws://127.0.0.1:${port}/v1/sessions/mask-ws`);
  });

  it("masks every frame with a fresh non-zero key over wss:// too", async () => {
    const ca = await createCertificateAuthority("router-dial-test-ca");
    const leaf = await ca.issue({ commonName: "127.0.0.1", ipAddresses: ["127.0.0.1"], usage: "server" });
    const server = new RawWebSocketServer(createTlsServer({ cert: leaf.certPem, key: leaf.keyPem }), true);
    const port = await server.listen();
    await sendAndInspect(server, `wss://127.0.0.1:${port}/v1/sessions/mask-wss`, ca.certPem);
  });
});
