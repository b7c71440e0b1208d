// A local proxy for the developer's process, on one loopback port speaking both SOCKS5
// and HTTP (told apart by the first byte: 0x05 is SOCKS5). Every proxied connection is
// dialled through a `Dialer` — in the CLI the session's outgoing TCP, so connections
// leave from the Default cluster. Host names are passed through unresolved (SOCKS5
// domain addresses, CONNECT authorities, absolute-form URLs), so DNS happens remotely.
//
// - SOCKS5 (RFC 1928): no authentication; IPv4, IPv6 and domain addresses. CONNECT, and
//   UDP ASSOCIATE when a `UdpRelay` is given (datagrams relayed through it, see
//   socks-udp-association.ts; without one it is answered "command not supported"). No BIND.
// - HTTP CONNECT host:port → "200 Connection Established", then raw bytes (HTTPS_PROXY).
// - HTTP absolute-form requests (`GET http://host/path`, HTTP_PROXY): the first request
//   is rewritten to origin-form with `Connection: close`, so each proxied connection
//   carries one request to one origin.
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { CliError, CliErrorCode } from "../cli-errors.js";
import { STREAM_WRITE_HIGH_WATER_BYTES } from "../session/stream-chunks.js";
import { splice } from "./splice.js";
import { encodeSocksAddress } from "./socks-udp-header.js";
import { isUnspecifiedIp, sameIp, SocksUdpAssociation, type UdpRelay } from "./socks-udp-association.js";

export type { UdpFlow, UdpRelay } from "./socks-udp-association.js";

export interface Dialer {
  /** Opens a byte stream to host:port (host may be a name: resolve it remotely). */
  dial(host: string, port: number): Promise<Duplex>;
}

export interface LocalProxyOptions {
  dialer: Dialer;
  /** Listen host (default 127.0.0.1: never expose the cluster's network to the LAN). */
  host?: string;
  /** Listen port (default 0: any free port). */
  port?: number;
  /** Largest request head accepted for HTTP, bytes (default 64 KiB). */
  maxHeadBytes?: number;
  /** Called when a dial fails, for the CLI's log. */
  onDialError?: (target: string, err: Error) => void;
  /** Path for SOCKS5 UDP ASSOCIATE datagrams (default none: the command is refused). */
  udp?: UdpRelay;
  /** Listen on this Unix socket instead of host:port (CONNECT only: UDP needs an address). */
  path?: string;
}

const SOCKS_VERSION = 5;
const REP = {
  ok: 0,
  general: 1,
  notAllowed: 2,
  netUnreachable: 3,
  hostUnreachable: 4,
  refused: 5,
  cmdUnsupported: 7,
  atypUnsupported: 8,
};

export class LocalProxy {
  readonly #o: Required<Omit<LocalProxyOptions, "onDialError" | "udp" | "path">> &
    Pick<LocalProxyOptions, "onDialError" | "udp">;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  readonly #associations = new Set<SocksUdpAssociation>();
  /** Connections proxied so far (for status lines and tests). */
  connections = 0;
  /** UDP datagrams relayed so far, both directions. */
  udpDatagrams = 0;
  /** UDP datagrams dropped: foreign sources, fragments, malformed headers, undeliverable answers. */
  udpDropped = 0;

  constructor(options: LocalProxyOptions) {
    if (!options?.dialer)
      throw new CliError(CliErrorCode.INVALID_OPTION, "LocalProxy: option dialer is required");
    const port = options.port ?? 0;
    if (!Number.isInteger(port) || port < 0 || port > 65535)
      throw new CliError(CliErrorCode.INVALID_OPTION, `LocalProxy: port must be 0-65535, got ${port}`);
    this.#o = {
      dialer: options.dialer,
      host: options.host ?? "127.0.0.1",
      port,
      maxHeadBytes: options.maxHeadBytes ?? 64 * 1024,
      onDialError: options.onDialError,
      udp: options.udp,
    };
    this.#path = options.path;
  }

  readonly #path: string | undefined;

  async listen(): Promise<number> {
    // Reads and writes of a proxied connection are frames of up to 256 KiB: a frame
    // written at once does not report the socket full (Node's default is 16 KiB).
    const server = createServer({ highWaterMark: STREAM_WRITE_HIGH_WATER_BYTES }, (s) => this.#accept(s));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      if (this.#path) server.listen(this.#path, () => resolve());
      else server.listen(this.#o.port, this.#o.host, () => resolve());
    });
    this.#server = server;
    return this.#path ? 0 : (server.address() as AddressInfo).port;
  }

  get port(): number {
    return (this.#server?.address() as AddressInfo | undefined)?.port ?? 0;
  }

  /** socks5h:// (remote DNS) and http:// URLs of this proxy. */
  urls(): { socks: string; http: string } {
    const host = this.#o.host.includes(":") ? `[${this.#o.host}]` : this.#o.host;
    return { socks: `socks5h://${host}:${this.port}`, http: `http://${host}:${this.port}` };
  }

  async close(): Promise<void> {
    for (const a of this.#associations) a.close();
    for (const s of this.#sockets) s.destroy();
    const server = this.#server;
    this.#server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #accept(socket: Socket): void {
    this.#sockets.add(socket);
    socket.on("close", () => this.#sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.setNoDelay(true);
    socket.once("readable", () => {
      const first = socket.read(1) as Buffer | null;
      if (!first) return socket.destroy();
      socket.unshift(first);
      if (first[0] === SOCKS_VERSION) void this.#socks(socket);
      else void this.#http(socket);
    });
  }

  /** Reads exactly n bytes (or undefined on end). */
  #read(socket: Socket, n: number): Promise<Buffer | undefined> {
    return new Promise((resolve) => {
      const tryRead = () => {
        const b = socket.read(n) as Buffer | null;
        if (b) {
          cleanup();
          resolve(b);
        }
      };
      const onEnd = () => {
        cleanup();
        resolve(undefined);
      };
      const cleanup = () => {
        socket.off("readable", tryRead);
        socket.off("end", onEnd);
        socket.off("close", onEnd);
      };
      socket.on("readable", tryRead);
      socket.on("end", onEnd);
      socket.on("close", onEnd);
      tryRead();
    });
  }

  async #socks(socket: Socket): Promise<void> {
    const greet = await this.#read(socket, 2);
    if (!greet) return;
    const methods = await this.#read(socket, greet[1]!);
    if (!methods) return;
    if (!methods.includes(0x00)) {
      socket.end(Buffer.from([SOCKS_VERSION, 0xff])); // no acceptable method
      return;
    }
    socket.write(Buffer.from([SOCKS_VERSION, 0x00]));
    const req = await this.#read(socket, 4);
    if (!req) return;
    const [ver, cmd, , atyp] = req as unknown as [number, number, number, number];
    const reply = (rep: number) => Buffer.from([SOCKS_VERSION, rep, 0, 1, 0, 0, 0, 0, 0, 0]); // bound address 0.0.0.0:0
    let host: string;
    if (atyp === 1) {
      const a = await this.#read(socket, 4);
      if (!a) return;
      host = [...a].join(".");
    } else if (atyp === 3) {
      const len = await this.#read(socket, 1);
      if (!len) return;
      const name = await this.#read(socket, len[0]!);
      if (!name) return;
      host = name.toString("utf8");
    } else if (atyp === 4) {
      const a = await this.#read(socket, 16);
      if (!a) return;
      host = Array.from({ length: 8 }, (_, i) => a.readUInt16BE(i * 2).toString(16)).join(":");
    } else {
      socket.end(reply(REP.atypUnsupported));
      return;
    }
    const p = await this.#read(socket, 2);
    if (!p) return;
    const port = p.readUInt16BE(0);
    if (ver === SOCKS_VERSION && cmd === 3 && this.#o.udp)
      return this.#associate(socket, this.#o.udp, host, port);
    if (ver !== SOCKS_VERSION || cmd !== 1) {
      socket.end(reply(REP.cmdUnsupported));
      return;
    }
    let remote: Duplex;
    try {
      remote = await this.#o.dialer.dial(host, port);
    } catch (err) {
      this.#o.onDialError?.(`${host}:${port}`, err as Error);
      socket.end(reply(/refused/i.test((err as Error).message) ? REP.refused : REP.hostUnreachable));
      return;
    }
    socket.write(reply(REP.ok));
    this.#splice(socket, remote);
  }

  /** UDP ASSOCIATE: DST.ADDR/DST.PORT name the client's datagram source (all zeros: not known yet). */
  async #associate(socket: Socket, relay: UdpRelay, host: string, port: number): Promise<void> {
    const fail = (rep: number) => socket.end(Buffer.from([SOCKS_VERSION, rep, 0, 1, 0, 0, 0, 0, 0, 0]));
    if (!isUnspecifiedIp(host) && !sameIp(host, socket.remoteAddress ?? "")) return void fail(REP.notAllowed);
    let a: SocksUdpAssociation;
    try {
      a = await SocksUdpAssociation.open({
        control: socket,
        relay,
        bindHost: this.#o.host,
        clientPort: port,
        counters: this,
        onEnd: (gone) => this.#associations.delete(gone),
      });
    } catch (err) {
      this.#o.onDialError?.(`UDP on ${this.#o.host}`, err as Error);
      return void fail(REP.general);
    }
    if (socket.destroyed) return a.close();
    this.#associations.add(a);
    const { host: bndHost, port: bndPort } = a.bound;
    socket.write(
      Buffer.concat([Buffer.from([SOCKS_VERSION, REP.ok, 0]), encodeSocksAddress(bndHost, bndPort)]),
    );
  }

  async #http(socket: Socket): Promise<void> {
    // Read the request head (up to CRLFCRLF) without consuming what follows it.
    let head = Buffer.alloc(0);
    for (;;) {
      const chunk = socket.read() as Buffer | null;
      if (chunk) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf("\r\n\r\n");
        if (end >= 0) {
          const rest = head.subarray(end + 4);
          if (rest.length) socket.unshift(rest);
          head = head.subarray(0, end + 4);
          break;
        }
        if (head.length > this.#o.maxHeadBytes) {
          socket.end(
            "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
          );
          return;
        }
        continue;
      }
      const more = await new Promise<boolean>((resolve) => {
        const ok = () => {
          socket.off("end", no);
          socket.off("close", no);
          resolve(true);
        };
        const no = () => {
          socket.off("readable", ok);
          resolve(false);
        };
        socket.once("readable", ok);
        socket.once("end", no);
        socket.once("close", no);
      });
      if (!more) return;
    }
    const text = head.toString("latin1");
    const lineEnd = text.indexOf("\r\n");
    const [method, target, version] = text.slice(0, lineEnd).split(" ") as [string, string, string];
    const bad = (status: string, why: string) =>
      socket.end(
        `HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(why) + 1}\r\n\r\n${why}\n`,
      );
    if (!method || !target || !version?.startsWith("HTTP/"))
      return void bad("400 Bad Request", "not an HTTP request");
    if (method === "CONNECT") {
      const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(target);
      if (!m) return void bad("400 Bad Request", `CONNECT target "${target}" must be host:port`);
      const [host, port] = [m[1]!, Number(m[2])];
      let remote: Duplex;
      try {
        remote = await this.#o.dialer.dial(host, port);
      } catch (err) {
        this.#o.onDialError?.(target, err as Error);
        return void bad(
          "502 Bad Gateway",
          `switchyard: cannot connect to ${target} from the cluster: ${(err as Error).message}`,
        );
      }
      socket.write(`${version} 200 Connection Established\r\n\r\n`);
      this.#splice(socket, remote);
      return;
    }
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return void bad("400 Bad Request", "switchyard proxy: requests must use an absolute http:// URL");
    }
    if (url.protocol !== "http:")
      return void bad("400 Bad Request", `switchyard proxy: use CONNECT for ${url.protocol} URLs`);
    const port = url.port ? Number(url.port) : 80;
    const headers = text
      .slice(lineEnd + 2, text.length - 4)
      .split("\r\n")
      .filter((l) => l && !/^(proxy-connection|connection|keep-alive|proxy-authorization):/i.test(l));
    if (!headers.some((l) => /^host:/i.test(l))) headers.unshift(`Host: ${url.host}`);
    const rewritten = `${method} ${url.pathname}${url.search} ${version}\r\n${[...headers, "Connection: close"].join("\r\n")}\r\n\r\n`;
    let remote: Duplex;
    try {
      remote = await this.#o.dialer.dial(url.hostname.replace(/^\[|\]$/g, ""), port);
    } catch (err) {
      this.#o.onDialError?.(url.host, err as Error);
      return void bad(
        "502 Bad Gateway",
        `switchyard: cannot connect to ${url.host} from the cluster: ${(err as Error).message}`,
      );
    }
    remote.write(Buffer.from(rewritten, "latin1"));
    this.#splice(socket, remote);
  }

  #splice(local: Socket, remote: Duplex): void {
    this.connections++;
    splice(local, remote);
  }
}
