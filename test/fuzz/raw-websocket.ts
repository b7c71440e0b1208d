// Broken WebSocket framing under the frames, for the session-endpoint fuzz suites: a raw
// TCP socket that completes the upgrade by hand (ws would never send a bad frame), complete
// WebSocket frames with random FIN/RSV bits, opcodes, mask bit and payload (only the length
// is kept true, so the endpoint always has a whole frame to judge), and the close frame the
// endpoint answers with, read back from the socket.
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import fc from "fast-check";

/** Opens `url` (ws://) with a bearer secret and completes the upgrade; resolves with the socket. */
export function upgradeRaw(url: string, secret: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname);
    let head = "";
    const onData = (chunk: Buffer) => {
      head += chunk.toString("latin1");
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      if (!head.startsWith("HTTP/1.1 101")) {
        socket.destroy();
        return reject(new Error(`upgrade refused: ${head.split("\r\n")[0]}`));
      }
      const rest = Buffer.from(head.slice(end + 4), "latin1");
      if (rest.length > 0) socket.unshift(rest);
      resolve(socket);
    };
    socket.on("data", onData);
    socket.once("error", reject);
    socket.once("connect", () =>
      socket.write(
        `GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n` +
          `Authorization: Bearer ${secret}\r\n\r\n`,
      ),
    );
  });
}

/** One WebSocket frame from its parts; `mask` undefined sends it unmasked (a client must mask). */
export function wsFrame(b0: number, payload: Buffer, mask: Buffer | undefined): Buffer {
  const len = payload.length;
  const ext = len < 126 ? Buffer.alloc(0) : len < 65536 ? Buffer.alloc(2) : Buffer.alloc(8);
  if (len >= 126 && len < 65536) ext.writeUInt16BE(len);
  else if (len >= 65536) ext.writeBigUInt64BE(BigInt(len));
  const b1 = (mask ? 0x80 : 0) | (len < 126 ? len : len < 65536 ? 126 : 127);
  const body = Buffer.from(payload);
  if (mask) for (let i = 0; i < body.length; i++) body[i]! ^= mask[i & 3]!;
  return Buffer.concat([Buffer.from([b0, b1]), ext, mask ?? Buffer.alloc(0), body]);
}

/** A client's close frame (1000), masked. */
export const CLOSE_1000 = wsFrame(0x88, Buffer.from([0x03, 0xe8]), Buffer.from([1, 2, 3, 4]));

/** A complete WebSocket frame with random FIN, RSV bits, opcode, mask and payload. */
export const wsFrameArb: fc.Arbitrary<{ bytes: Buffer; describe: string }> = fc
  .record({
    fin: fc.boolean(),
    rsv: fc.constantFrom(0, 0, 1, 2, 4, 7),
    opcode: fc.integer({ min: 0, max: 15 }),
    masked: fc.constantFrom(true, true, false),
    payload: fc.oneof(fc.uint8Array({ maxLength: 40 }), fc.uint8Array({ minLength: 126, maxLength: 300 })),
  })
  // A well-formed close frame is answered with its own code (which may be 1002): not broken framing.
  .filter(
    (r) =>
      !(
        r.opcode === 8 &&
        r.fin &&
        r.rsv === 0 &&
        r.masked &&
        r.payload.length !== 1 &&
        r.payload.length <= 125
      ),
  )
  .map((r) => ({
    bytes: wsFrame(
      (r.fin ? 0x80 : 0) | (r.rsv << 4) | r.opcode,
      Buffer.from(r.payload),
      r.masked ? Buffer.from([9, 8, 7, 6]) : undefined,
    ),
    describe: `fin=${r.fin} rsv=${r.rsv} opcode=${r.opcode} masked=${r.masked} length=${r.payload.length}`,
  }));

/**
 * Reads the server's frames from `socket` until its close frame; resolves with the close
 * code (1005 when it carried none), or undefined when the socket ended without one.
 */
export function serverCloseCode(socket: Socket, timeoutMs = 5000): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close from the server within ${timeoutMs} ms`));
    }, timeoutMs);
    const done = (code: number | undefined) => {
      clearTimeout(timer);
      socket.removeAllListeners("data");
      socket.destroy();
      resolve(code);
    };
    socket.on("data", (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (buf.length < 2) return;
        let len = buf[1]! & 0x7f;
        let at = 2;
        if (len === 126) {
          if (buf.length < 4) return;
          len = buf.readUInt16BE(2);
          at = 4;
        } else if (len === 127) {
          if (buf.length < 10) return;
          len = Number(buf.readBigUInt64BE(2));
          at = 10;
        }
        if (buf.length < at + len) return;
        const opcode = buf[0]! & 0x0f;
        const payload = buf.subarray(at, at + len);
        buf = buf.subarray(at + len);
        if (opcode === 0x8) return done(payload.length >= 2 ? payload.readUInt16BE(0) : 1005);
      }
    });
    socket.once("close", () => done(undefined));
    socket.once("error", () => undefined);
  });
}
