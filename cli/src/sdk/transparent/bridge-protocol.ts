// The wire between the CLI and its helper inside the command's namespaces: a Unix socket
// (a path in the CLI's private directory, reachable from both network namespaces). Each
// connection opens with one JSON line, the request; the CLI answers one JSON line, then:
// - `setup`: the connection stays open as the helper's control line. The answer carries the
//   NamespaceBase, sent at once: the helper builds the namespace's network with it while the
//   session is still starting. Once the session is open the CLI writes `{"setup":…}` (the
//   NamespaceSetup: the target's files, DNS, ports and the command), or `{"cancel":…}` when
//   the session could not open; the helper answers `{"ready":true}` or `{"ready":false,…}`.
// - `tcp`:   raw bytes both ways, to host:port (through the Default cluster, or from this
//   machine when `local` or the address is kept local).
// - `udp`:   datagram frames both ways (encodeDatagram / DatagramReader), one UDP flow.
import type { Socket } from "node:net";

export type BridgeRequest =
  { op: "setup" } | { op: "tcp"; host: string; port: number; local?: boolean } | { op: "udp" };

export type BridgeAnswer = { ok: true } | { ok: false; error: string };

/** A file of the target, laid out at `path` in the namespace. */
export interface LayerFile {
  path: string;
  mode: number;
  /** base64 */
  data: string;
}

/** What the helper needs before the session is open: it builds the namespace's network. */
export interface NamespaceBase {
  /** The user the command runs as (the CLI's own ids). */
  uid: number;
  gid: number;
  tun2socks: string;
  /**
   * The CLI's private directory (0700): the bridge and the incoming sockets live there, and
   * the helper mounts a tmpfs of its own on `scratchDir(dir)`, so the target's files never
   * touch a disk and vanish with the namespace.
   */
  dir: string;
  /** Log level: "quiet" says only failures. */
  quiet: boolean;
}

/** The base's answer to `setup`. */
export type SetupAnswer = { ok: true; base: NamespaceBase } | { ok: false; error: string };

/** What the CLI writes on the control line once the session is open, or could not be. */
export type SetupLine = { setup: NamespaceSetup } | { cancel: string };

/** What the helper needs once the session is open: the target's files, DNS, ports and the command. */
export interface NamespaceSetup {
  command: string[];
  env: Record<string, string>;
  cwd: string;
  /** The namespace's /etc/resolv.conf (nameserver: the helper's resolver). */
  resolvConf: string;
  /** Where the helper's resolver sends queries (the pod's nameservers), through the Default cluster. */
  nameservers: string[];
  files: LayerFile[];
  /** Loopback listeners of this machine the command reaches at the same address and port as before. */
  hostListeners: Array<{ host: string; port: number }>;
  /** Command ports the CLI delivers incoming traffic to: each served at `incomingSocket(dir, port)`. */
  deliverPorts: number[];
}

export const MAX_LINE_BYTES = 4 * 1024 * 1024;

/** The CLI's SOCKS5 server for the namespace's TCP (tun2socks speaks to it over this Unix socket). */
export function socksSocket(dir: string): string {
  return `${dir}/socks.sock`;
}

export function scratchDir(dir: string): string {
  return `${dir}/scratch`;
}

export function incomingSocket(dir: string, port: number): string {
  return `${dir}/in-${port}.sock`;
}

export function writeLine(socket: Socket, value: unknown): void {
  socket.write(`${JSON.stringify(value)}\n`);
}

/** Reads one JSON line; whatever follows it is pushed back for the next reader, the socket paused. */
export function readLine<T>(socket: Socket, maxBytes = MAX_LINE_BYTES): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    const done = (err?: Error, value?: T) => {
      socket.off("data", onData);
      socket.off("end", onEnd);
      socket.off("error", onEnd);
      socket.off("close", onEnd);
      if (err) reject(err);
      else resolve(value as T);
    };
    const onData = (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const nl = buf.indexOf(10);
      if (nl < 0) {
        if (buf.length > maxBytes) done(new Error(`bridge line longer than ${maxBytes} bytes`));
        return;
      }
      socket.pause();
      const rest = buf.subarray(nl + 1);
      if (rest.length) socket.unshift(rest);
      try {
        done(undefined, JSON.parse(buf.subarray(0, nl).toString("utf8")) as T);
      } catch (err) {
        done(new Error(`malformed bridge line: ${(err as Error).message}`));
      }
    };
    const onEnd = (err?: unknown) =>
      done(err instanceof Error ? err : new Error("bridge connection closed before its line"));
    socket.on("data", onData);
    socket.once("end", onEnd);
    socket.once("error", onEnd);
    socket.once("close", onEnd);
    // An earlier readLine left the socket paused after its own line.
    socket.resume();
  });
}

/** One datagram on a `udp` connection: u32 length, u8 host length, host, u16 port, payload. */
export function encodeDatagram(host: string, port: number, data: Buffer): Buffer {
  const h = Buffer.from(host, "utf8");
  if (h.length > 255) throw new RangeError(`host name longer than 255 bytes: ${host.slice(0, 40)}…`);
  const out = Buffer.allocUnsafe(4 + 1 + h.length + 2 + data.length);
  out.writeUInt32BE(1 + h.length + 2 + data.length, 0);
  out.writeUInt8(h.length, 4);
  h.copy(out, 5);
  out.writeUInt16BE(port, 5 + h.length);
  data.copy(out, 7 + h.length);
  return out;
}

export const MAX_DATAGRAM_FRAME = 70_000;

/** Splits a `udp` connection's bytes into datagrams. */
export class DatagramReader {
  #buf: Buffer = Buffer.alloc(0);

  /** Feeds bytes; returns the complete datagrams. Throws on a malformed frame. */
  push(chunk: Buffer): Array<{ host: string; port: number; data: Buffer }> {
    this.#buf = this.#buf.length ? Buffer.concat([this.#buf, chunk]) : chunk;
    const out: Array<{ host: string; port: number; data: Buffer }> = [];
    while (this.#buf.length >= 4) {
      const len = this.#buf.readUInt32BE(0);
      if (len < 3 || len > MAX_DATAGRAM_FRAME) throw new Error(`malformed datagram frame of ${len} bytes`);
      if (this.#buf.length < 4 + len) break;
      const hl = this.#buf.readUInt8(4);
      if (3 + hl > len) throw new Error("malformed datagram frame: host longer than the frame");
      const host = this.#buf.subarray(5, 5 + hl).toString("utf8");
      const port = this.#buf.readUInt16BE(5 + hl);
      const data = Buffer.from(this.#buf.subarray(7 + hl, 4 + len));
      out.push({ host, port, data });
      this.#buf = this.#buf.subarray(4 + len);
    }
    return out;
  }
}
