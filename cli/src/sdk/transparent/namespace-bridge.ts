// The CLI's end of the bridge (bridge-protocol.ts): a Unix socket in the CLI's private
// directory that the helper inside the command's namespaces connects to. It hands the helper
// its base at once and its setup once the session is open (`configure`), learns when the
// namespace is ready (or why it could not be built), and carries
// the namespace's TCP connections and UDP flows: through the session's outgoing path (the
// Default cluster), or from this machine for loopback and the addresses kept local.
import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { isIP, connect, createServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { UdpFlow, UdpRelay } from "../local/local-proxy.js";
import { splice } from "../local/splice.js";
import {
  DatagramReader,
  encodeDatagram,
  readLine,
  writeLine,
  type BridgeRequest,
  type NamespaceBase,
  type NamespaceSetup,
  type SetupLine,
} from "./bridge-protocol.js";

/** The namespace's way out through the session (the Default cluster). */
export interface SessionOutgoing {
  /** Outgoing TCP through the Default cluster. */
  dial(host: string, port: number): Promise<Duplex>;
  /** Outgoing UDP through the Default cluster. */
  udp: UdpRelay;
}

export interface NamespaceBridgeOptions extends Partial<SessionOutgoing> {
  /** The socket's path (in a 0700 directory of the CLI's). */
  path: string;
  base: NamespaceBase;
  /** The rest of the setup when it is known up front (else `configure` it). */
  setup?: NamespaceSetup;
  /** Whether an address stays on this machine (loopback always does). */
  keepLocal(address: string): boolean;
  /** A connection or flow failed, for the CLI's log. */
  onError?: (what: string, err: Error) => void;
}

export type HelperReady = { ready: true } | { ready: false; error: string };

const LOOPBACK = (a: string) => a === "localhost" || a === "::1" || /^127\./.test(a);

export class NamespaceBridge {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  readonly #flows = new Set<UdpFlow>();
  #ready: Promise<HelperReady>;
  #settle!: (r: HelperReady) => void;
  #outgoing: SessionOutgoing | undefined;
  /** The line the helper waits for after its base, once known; and its control line, once connected. */
  #line: SetupLine | undefined;
  #control: Socket | undefined;
  /** Counters for tests and the status line. */
  readonly stats = { tcp: 0, udpFlows: 0, local: 0 };

  constructor(private readonly o: NamespaceBridgeOptions) {
    this.#ready = new Promise((resolve) => (this.#settle = resolve));
    if (o.dial && o.udp) this.#outgoing = { dial: o.dial, udp: o.udp };
    if (o.setup) this.#line = { setup: o.setup };
  }

  /** The session is open: the namespace's connections go through it, and the helper gets its setup. */
  configure(setup: NamespaceSetup, outgoing: SessionOutgoing): void {
    this.#outgoing = outgoing;
    this.#send({ setup });
  }

  /** The session could not open: the helper ends without running the command. */
  cancel(reason: string): void {
    this.#send({ cancel: reason });
  }

  #send(line: SetupLine): void {
    if (this.#line) return;
    this.#line = line;
    if (this.#control && !this.#control.destroyed) writeLine(this.#control, line);
  }

  get path(): string {
    return this.o.path;
  }

  async listen(): Promise<void> {
    const server = createServer((s) => void this.#accept(s));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.o.path, () => resolve());
    });
    this.#server = server;
  }

  /** The helper's word on the namespace: ready, or why not (also when it ended before saying). */
  ready(): Promise<HelperReady> {
    return this.#ready;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    for (const f of this.#flows) f.close();
    const server = this.#server;
    this.#server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async #accept(socket: Socket): Promise<void> {
    this.#sockets.add(socket);
    socket.on("close", () => this.#sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let req: BridgeRequest;
    try {
      req = await readLine<BridgeRequest>(socket, 4096);
    } catch {
      socket.destroy();
      return;
    }
    if (req.op === "setup") return this.#controlLine(socket);
    if (req.op === "tcp" && typeof req.host === "string" && Number.isInteger(req.port))
      return this.#tcp(socket, req.host, req.port, req.local === true);
    if (req.op === "udp") return this.#udp(socket);
    writeLine(socket, { ok: false, error: "unknown bridge request" });
    socket.end();
  }

  #controlLine(socket: Socket): void {
    if (this.#control) {
      writeLine(socket, { ok: false, error: "the namespace helper is already connected" });
      socket.end();
      return;
    }
    this.#control = socket;
    writeLine(socket, { ok: true, base: this.o.base });
    if (this.#line) writeLine(socket, this.#line);
    socket.resume();
    void readLine<HelperReady>(socket).then(
      (r) => this.#settle(r.ready ? { ready: true } : { ready: false, error: String(r.error) }),
      () => this.#settle({ ready: false, error: "the namespace helper closed its control line" }),
    );
  }

  #isLocal(host: string, forced: boolean): boolean {
    return forced || LOOPBACK(host) || (isIP(host) !== 0 && this.o.keepLocal(host));
  }

  /**
   * A TCP connection for the namespace: from this machine for loopback, kept-local addresses
   * and `forcedLocal` (the laptop's loopback listeners), else through the session. Failures
   * are told to onError and rethrown.
   */
  async connect(host: string, port: number, forcedLocal = false): Promise<Duplex> {
    this.stats.tcp++;
    const local = this.#isLocal(host, forcedLocal);
    try {
      if (!local) {
        if (!this.#outgoing) throw new Error("the session is not open yet");
        return await this.#outgoing.dial(host, port);
      }
      this.stats.local++;
      return await new Promise<Duplex>((resolve, reject) => {
        const c = connect({ host: forcedLocal && !isIP(host) ? "127.0.0.1" : host, port });
        c.once("connect", () => resolve(c));
        c.once("error", reject);
      });
    } catch (err) {
      this.o.onError?.(`connection to ${host}:${port}${local ? " (local)" : ""}`, err as Error);
      throw err;
    }
  }

  async #tcp(socket: Socket, host: string, port: number, forced: boolean): Promise<void> {
    let remote: Duplex;
    try {
      remote = await this.connect(host, port, forced);
    } catch (err) {
      writeLine(socket, { ok: false, error: (err as Error).message });
      socket.end();
      return;
    }
    writeLine(socket, { ok: true });
    splice(socket, remote);
    socket.resume();
  }

  #udp(socket: Socket): void {
    this.stats.udpFlows++;
    let remote: UdpFlow | undefined;
    let local: UdpFlow | undefined;
    const back = (from: { host: string; port: number }, data: Buffer) => {
      if (!socket.destroyed) socket.write(encodeDatagram(from.host, from.port, data));
    };
    const open = (flow: UdpFlow): UdpFlow => {
      this.#flows.add(flow);
      flow.onMessage(back);
      flow.onClose((error) => {
        this.#flows.delete(flow);
        if (error) this.o.onError?.(`UDP flow`, new Error(error));
        socket.destroy();
      });
      return flow;
    };
    const reader = new DatagramReader();
    writeLine(socket, { ok: true });
    socket.on("data", (chunk: Buffer) => {
      let datagrams;
      try {
        datagrams = reader.push(chunk);
      } catch (err) {
        this.o.onError?.("UDP flow", err as Error);
        socket.destroy();
        return;
      }
      for (const d of datagrams) {
        const out = this.#outgoing;
        if (this.#isLocal(d.host, false)) (local ??= open(localUdpFlow())).send(d.host, d.port, d.data);
        else if (out) (remote ??= open(out.udp.open())).send(d.host, d.port, d.data);
        else {
          // Never from this machine instead: nothing of the namespace leaves but through the session.
          this.o.onError?.(`UDP to ${d.host}:${d.port}`, new Error("the session is not open yet"));
          socket.destroy();
          return;
        }
      }
    });
    socket.on("close", () => {
      remote?.close();
      local?.close();
    });
    socket.resume();
  }
}

/** A UDP flow from this machine (for loopback and kept-local destinations). */
export function localUdpFlow(): UdpFlow {
  const sockets = new Map<4 | 6, UdpSocket>();
  const messages: Array<(from: { host: string; port: number }, data: Buffer) => void> = [];
  const closes: Array<(error: string) => void> = [];
  let closed = false;
  const socketFor = (family: 4 | 6): UdpSocket => {
    let s = sockets.get(family);
    if (!s) {
      s = createSocket(family === 6 ? "udp6" : "udp4");
      s.on("message", (data, rinfo) => {
        for (const m of messages) m({ host: rinfo.address, port: rinfo.port }, data);
      });
      s.on("error", (err) => end(err.message));
      sockets.set(family, s);
    }
    return s;
  };
  const end = (error: string) => {
    if (closed) return;
    closed = true;
    for (const s of sockets.values()) s.close();
    for (const c of closes) c(error);
  };
  return {
    send(host, port, data) {
      if (closed) return;
      const family = isIP(host) === 6 ? 6 : 4;
      socketFor(family).send(data, port, host === "localhost" ? "127.0.0.1" : host);
    },
    onMessage: (l) => void messages.push(l),
    onClose: (l) => void closes.push(l),
    close: () => end(""),
  };
}
