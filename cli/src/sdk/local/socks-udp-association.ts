// One SOCKS5 UDP association (RFC 1928 §7): a local datagram socket whose client
// datagrams, once their SOCKS5 UDP header is taken off, go out through a `UdpFlow`, and
// whose flow answers go back to the client with their source in the header. Only the
// control connection's IP may use it; the first valid datagram pins the client's port
// (or the port the request named). It lives exactly as long as the control connection
// and the flow: either ending ends the other.
import { createSocket, type RemoteInfo, type Socket as DgramSocket } from "node:dgram";
import { isIPv6, type Socket } from "node:net";
import { decodeSocksUdp, encodeSocksUdp, ipBytes } from "./socks-udp-header.js";

/** Where a UDP association's datagrams go: in the CLI, the session's outgoing UDP through the Default cluster. */
export interface UdpRelay {
  /** One association's path. host may be a name (resolve remotely). */
  open(): UdpFlow;
}

export interface UdpFlow {
  send(host: string, port: number, data: Buffer): void;
  /** Datagrams that came back, with their source address. */
  onMessage(listener: (from: { host: string; port: number }, data: Buffer) => void): void;
  /** Called once when the path fails or closes for good (the association is then torn down). */
  onClose(listener: (error: string) => void): void;
  close(): void;
}

/** The proxy's counters, bumped in place. */
export interface UdpCounters {
  /** Datagrams relayed, both directions. */
  udpDatagrams: number;
  /** Datagrams dropped: foreign sources, fragments, malformed headers, undeliverable answers. */
  udpDropped: number;
}

export interface UdpAssociationOptions {
  control: Socket;
  relay: UdpRelay;
  /** Local address to bind the datagram socket on (port 0). */
  bindHost: string;
  /** DST.PORT of the UDP ASSOCIATE request: the client's port when not 0. */
  clientPort: number;
  counters: UdpCounters;
  onEnd: (a: SocksUdpAssociation) => void;
}

/** Same IP, whatever its spelling (IPv4-mapped IPv6 counts as its IPv4 address). */
export function sameIp(a: string, b: string): boolean {
  const norm = (h: string) => {
    const x = ipBytes(h);
    const mapped =
      x?.length === 16 && x.subarray(0, 10).every((v) => v === 0) && x.readUInt16BE(10) === 0xffff;
    return mapped ? x.subarray(12) : x;
  };
  const [x, y] = [norm(a), norm(b)];
  return !!x && !!y && x.equals(y);
}

export function isUnspecifiedIp(host: string): boolean {
  const x = ipBytes(host);
  return !!x && x.every((v) => v === 0);
}

export class SocksUdpAssociation {
  readonly #o: UdpAssociationOptions;
  readonly #udp: DgramSocket;
  readonly #clientIp: string;
  #flow: UdpFlow | undefined;
  /** The client's datagram address, known from its first valid datagram. */
  #client: { address: string; port: number } | undefined;
  #closed = false;

  /** Binds the datagram socket; rejects when it cannot be bound. */
  static async open(o: UdpAssociationOptions): Promise<SocksUdpAssociation> {
    const udp = createSocket(isIPv6(o.bindHost.replace(/^\[|\]$/g, "")) ? "udp6" : "udp4");
    await new Promise<void>((resolve, reject) => {
      udp.once("error", (err) => {
        udp.close();
        reject(err);
      });
      udp.bind(0, o.bindHost, () => {
        udp.removeAllListeners("error");
        resolve();
      });
    });
    return new SocksUdpAssociation(o, udp);
  }

  private constructor(o: UdpAssociationOptions, udp: DgramSocket) {
    this.#o = o;
    this.#udp = udp;
    this.#clientIp = o.control.remoteAddress ?? "";
    udp.on("message", (msg, rinfo) => this.#fromClient(msg, rinfo));
    udp.on("error", () => this.close());
    o.control.once("close", () => this.close());
    // Nothing more is expected on the control connection; read it so it never stalls.
    o.control.on("data", () => {});
    if (o.control.destroyed) {
      this.close();
      return;
    }
    const flow = o.relay.open();
    this.#flow = flow;
    flow.onMessage((from, data) => this.#toClient(from, data));
    flow.onClose(() => this.close());
  }

  /** BND.ADDR/BND.PORT for the reply: the socket's address, or the control connection's local one when bound to any. */
  get bound(): { host: string; port: number } {
    const a = this.#udp.address();
    const host = isUnspecifiedIp(a.address) ? (this.#o.control.localAddress ?? a.address) : a.address;
    return { host: host.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, ""), port: a.port };
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#udp.close();
    } catch {
      // already closed
    }
    this.#flow?.close();
    this.#o.control.destroy();
    this.#o.onEnd(this);
  }

  #fromClient(msg: Buffer, rinfo: RemoteInfo): void {
    const c = this.#o.counters;
    const port = this.#client?.port ?? this.#o.clientPort;
    if (!sameIp(rinfo.address, this.#clientIp) || (port && rinfo.port !== port)) {
      c.udpDropped++;
      return;
    }
    const d = decodeSocksUdp(msg);
    // Fragments are not reassembled (RFC 1928 allows a relay to drop them).
    if (!d.ok || d.frag !== 0 || d.port === 0 || !this.#flow) {
      c.udpDropped++;
      return;
    }
    this.#client ??= { address: rinfo.address, port: rinfo.port };
    c.udpDatagrams++;
    this.#flow.send(d.host, d.port, d.data);
  }

  #toClient(from: { host: string; port: number }, data: Buffer): void {
    const c = this.#o.counters;
    const to = this.#client;
    if (this.#closed || !to) {
      c.udpDropped++;
      return;
    }
    let out: Buffer;
    try {
      out = encodeSocksUdp(from.host, from.port, data);
    } catch {
      c.udpDropped++;
      return;
    }
    this.#udp.send(out, to.port, to.address, (err) => {
      if (err) c.udpDropped++;
      else c.udpDatagrams++;
    });
  }
}
