// Owns one of the target's ports and forwards to the app behind it, handing traffic to
// sessions on the way. Per accepted connection, from the port's subscriptions then:
// - an unfiltered steal: the whole connection goes to that session (raw bytes);
// - filtered steals: HTTP/1.1 mode — each request (keep-alive, chunked, upgrades) is
//   matched; a match goes to the oldest matching session, the rest to the app;
// - otherwise raw bytes to the app.
// A connection (unfiltered steal) or request (filtered steal) whose steal is *held* (its
// session lost its connection and may come back, see port-subscriptions.ts) waits, unread,
// until the port's subscriptions change: renewed, it goes to the session; dropped, on to
// the app. Mirror sessions get a copy of what the client sends in every case (in HTTP
// mode, the requests re-serialized; held mirrors get nothing). Mirror copies never slow
// the app path: a mirror that cannot keep up loses data (counted), it never exerts
// backpressure.
import {
  createServer as createHttpServer,
  Agent,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { PortSubscriptions, Subscription } from "./port-subscriptions.js";
import type { RequestHead } from "./http-filter.js";
import { acceptStolenCaller, type StolenCaller } from "./stolen-caller.js";

export interface IncomingConnectionInfo {
  /** Unique per agent. */
  readonly id: number;
  readonly port: number;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly mode: "mirror" | "steal";
}

/** How the session layer talks back on a raw connection it was given. */
export interface ConnectionControl {
  /** Bytes for the client (ignored for mirrors: the app answers). */
  write(data: Buffer): boolean;
  /** Ends the client side. */
  end(): void;
  /** Flow control of the client → session direction. */
  pause(): void;
  resume(): void;
  /** Calls `cb` once after `write` returned false and the client drained (or closed). */
  drained(cb: () => void): void;
}

/** What the session layer returns for a raw connection: where the client's bytes go. */
export interface ConnectionSink {
  /** False means "slow down" (steal: the client is paused until `control.resume()`; mirror: ignored). */
  data(chunk: Buffer): boolean;
  end(): void;
}

/** A stolen HTTP request's head; its body and answer go through its StolenCaller. */
export interface StolenHttpRequest {
  readonly port: number;
  readonly remoteAddress: string;
  readonly head: RequestHead;
}

/** Implemented by the session layer (one per session). */
export interface TrafficSession {
  readonly id: string;
  connection(info: IncomingConnectionInfo, control: ConnectionControl): ConnectionSink;
  /** Takes a stolen request: answers it through `caller` (a 502 through `caller.fail` when it cannot). */
  request(req: StolenHttpRequest, caller: StolenCaller): void;
}

export interface PortProxyOptions {
  /** Port to own (0 = ephemeral, for tests). */
  listenPort: number;
  listenHost?: string;
  appHost?: string;
  appPort: number;
  subscriptions: PortSubscriptions;
  /** The port number subscriptions name (the app's port); default listenPort. */
  subscriptionPort?: number;
  sessions: (sessionId: string) => TrafficSession | undefined;
}

export class PortProxyMetrics {
  connections = { raw: 0, http: 0, stolen: 0 };
  /** Connections and requests that waited for a held steal. */
  held = 0;
  requests = { app: 0, stolen: 0, failed: 0 };
  mirrorBytes = 0;
  mirrorDroppedBytes = 0;
}

let nextId = 0;
const newId = () => (nextId = (nextId + 1) >>> 0 || 1);

function serializeHead(req: IncomingMessage): Buffer {
  const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
  return Buffer.from(lines.join("\r\n") + "\r\n\r\n", "latin1");
}

function headOf(req: IncomingMessage): RequestHead {
  const headers: Array<[string, string]> = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
  return { method: req.method ?? "GET", path: req.url ?? "/", headers };
}

export class PortProxy {
  readonly metrics = new PortProxyMetrics();
  private server: Server | undefined;
  // No deadline for a whole request (Node's default is 5 min): an upload streams for as long
  // as it takes, as it would to the app itself. Heads still have Node's 60 s.
  private readonly http = createHttpServer({ keepAliveTimeout: 65_000, requestTimeout: 0 });
  private readonly appAgent: Agent;
  private readonly sockets = new Set<Socket>();
  /** Mirror sinks of connections in HTTP mode, found again per request. */
  private readonly httpMirrors = new WeakMap<object, ConnectionSink[]>();
  /** Retries of connections and requests waiting for a held steal, run on the next change. */
  private waiting: Array<() => void> = [];
  private readonly unwatch: () => void;

  constructor(private readonly opts: PortProxyOptions) {
    if (!Number.isInteger(opts.appPort) || opts.appPort < 1 || opts.appPort > 65535) {
      throw new RangeError(`appPort must be a TCP port (1-65535), got ${opts.appPort}`);
    }
    this.appAgent = new Agent({ keepAlive: true, maxSockets: 256 });
    this.http.on("request", (req, res) => this.onRequest(req, res));
    this.http.on("upgrade", (req, socket, head) => void this.onUpgrade(req, socket, head));
    this.http.on("clientError", (err: NodeJS.ErrnoException, socket) => this.refuseUnparsable(err, socket));
    this.unwatch = opts.subscriptions.onChange((port) => {
      if (port !== this.subPort || this.waiting.length === 0) return;
      const retry = this.waiting;
      this.waiting = [];
      for (const r of retry) r();
    });
  }

  /**
   * A request Node's parser refused in HTTP mode gets the status Node itself would answer
   * (431 for a head over its 16 KiB limit, else 400), then the connection closes.
   */
  private refuseUnparsable(err: NodeJS.ErrnoException, socket: Duplex): void {
    if (!socket.writable) return void socket.destroy();
    const status =
      err.code === "HPE_HEADER_OVERFLOW" ? "431 Request Header Fields Too Large" : "400 Bad Request";
    socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`, () =>
      socket.destroy(),
    );
  }

  /** Connections and requests now waiting for a held steal. */
  get waitingCount(): number {
    return this.waiting.length;
  }

  private get subPort(): number {
    return this.opts.subscriptionPort ?? this.opts.listenPort;
  }

  async listen(): Promise<number> {
    const server = createServer((socket) => this.onConnection(socket));
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.opts.listenPort, this.opts.listenHost ?? "127.0.0.1", () => resolve());
    });
    const addr = server.address();
    return typeof addr === "object" && addr ? addr.port : this.opts.listenPort;
  }

  async close(): Promise<void> {
    this.unwatch();
    this.waiting = [];
    for (const s of this.sockets) s.destroy();
    this.appAgent.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private subs(): readonly Subscription[] {
    return this.opts.subscriptions.forPort(this.subPort);
  }

  private mirrorsOf(subs: readonly Subscription[], info: Omit<IncomingConnectionInfo, "id" | "mode">) {
    const sinks: ConnectionSink[] = [];
    for (const s of subs) {
      if (s.mode !== "mirror" || s.held) continue;
      const session = this.opts.sessions(s.sessionId);
      if (!session) continue;
      const control: ConnectionControl = {
        write: () => true,
        end: () => {},
        pause: () => {},
        resume: () => {},
        drained: (cb) => cb(),
      };
      sinks.push(session.connection({ ...info, id: newId(), mode: "mirror" }, control));
    }
    return sinks;
  }

  private copyToMirrors(sinks: ConnectionSink[], chunk: Buffer): void {
    for (const m of sinks) {
      if (m.data(chunk)) this.metrics.mirrorBytes += chunk.length;
      else this.metrics.mirrorDroppedBytes += chunk.length;
    }
  }

  private onConnection(socket: Socket): void {
    // A proxy forwards what it gets at once: no Nagle delay on either side.
    socket.setNoDelay(true);
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    this.dispatchConnection(socket, false);
  }

  /**
   * Leaves `stream` paused (unread) until the port's subscriptions change, then runs
   * `dispatch` again; once dispatched somewhere (not held again) the stream reads on.
   */
  private hold(
    stream: { pause(): unknown; resume(): unknown },
    dispatch: () => boolean,
    counted: boolean,
  ): true {
    stream.pause();
    if (!counted) this.metrics.held++;
    this.waiting.push(() => {
      if (!dispatch()) stream.resume();
    });
    return true;
  }

  /** Returns true when the connection was held (again). */
  private dispatchConnection(socket: Socket, counted: boolean): boolean {
    if (socket.destroyed) return false;
    const subs = this.subs();
    const info = {
      port: this.subPort,
      remoteAddress: socket.remoteAddress ?? "",
      remotePort: socket.remotePort ?? 0,
    };
    const steal = subs.find((s) => s.mode === "steal" && !s.filter);
    if (steal?.held) return this.hold(socket, () => this.dispatchConnection(socket, true), counted);
    const session = steal && this.opts.sessions(steal.sessionId);
    if (session) {
      this.metrics.connections.stolen++;
      this.stealRaw(socket, session, info, this.mirrorsOf(subs, info), Buffer.alloc(0));
      return false;
    }
    if (subs.some((s) => s.mode === "steal")) {
      this.metrics.connections.http++;
      const mirrors = this.mirrorsOf(subs, info);
      this.httpMirrors.set(socket, mirrors);
      socket.on("close", () => mirrors.forEach((m) => m.end()));
      this.http.emit("connection", socket);
      return false;
    }
    this.metrics.connections.raw++;
    this.pipeToApp(socket, this.mirrorsOf(subs, info), Buffer.alloc(0));
    return false;
  }

  /** Raw bytes both ways between a client socket and the app, with mirror copies. */
  private pipeToApp(client: Duplex, mirrors: ConnectionSink[], initial: Buffer): void {
    const app = createConnection({ host: this.opts.appHost ?? "127.0.0.1", port: this.opts.appPort });
    app.setNoDelay(true);
    const done = () => {
      client.destroy();
      app.destroy();
      mirrors.forEach((m) => m.end());
    };
    app.on("error", done);
    client.on("error", done);
    client.on("close", () => app.end());
    app.on("close", () => client.end());
    if (initial.length > 0) app.write(initial);
    if (mirrors.length > 0) client.on("data", (chunk: Buffer) => this.copyToMirrors(mirrors, chunk));
    client.pipe(app);
    app.pipe(client);
    client.on("end", () => mirrors.forEach((m) => m.end()));
  }

  /** The whole connection belongs to one session. */
  private stealRaw(
    client: Duplex,
    session: TrafficSession,
    base: Omit<IncomingConnectionInfo, "id" | "mode">,
    mirrors: ConnectionSink[],
    initial: Buffer,
  ): void {
    let ended = false;
    const control: ConnectionControl = {
      write: (data) => (client.destroyed ? false : client.write(data)),
      end: () => client.end(),
      pause: () => client.pause(),
      resume: () => client.resume(),
      drained: (cb) => {
        if (client.destroyed || !client.writableNeedDrain) return cb();
        let called = false;
        const once = () => {
          if (called) return;
          called = true;
          client.off("drain", once);
          client.off("close", once);
          cb();
        };
        client.on("drain", once);
        client.on("close", once);
      },
    };
    const sink = session.connection({ ...base, id: newId(), mode: "steal" }, control);
    const finish = () => {
      if (ended) return;
      ended = true;
      sink.end();
      mirrors.forEach((m) => m.end());
    };
    if (initial.length > 0) {
      this.copyToMirrors(mirrors, initial);
      if (!sink.data(initial)) client.pause();
    }
    client.on("data", (chunk: Buffer) => {
      this.copyToMirrors(mirrors, chunk);
      if (!sink.data(chunk)) client.pause();
    });
    client.on("end", finish);
    client.on("close", finish);
    client.on("error", () => client.destroy());
  }

  /** The oldest steal matching the request: a live session, "held" (wait), or none (the app). */
  private matching(head: RequestHead): TrafficSession | "held" | undefined {
    for (const s of this.subs()) {
      if (s.mode !== "steal" || !s.match || !s.match(head)) continue;
      if (s.held) return "held";
      const session = this.opts.sessions(s.sessionId);
      if (session) return session;
    }
    return undefined;
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const head = headOf(req);
    const mirrors = this.httpMirrors.get(req.socket) ?? [];
    if (mirrors.length > 0) {
      this.copyToMirrors(mirrors, serializeHead(req));
      req.on("data", (chunk: Buffer) => this.copyToMirrors(mirrors, chunk));
    }
    this.dispatchRequest(req, res, head, false);
  }

  private dispatchRequest(
    req: IncomingMessage,
    res: ServerResponse,
    head: RequestHead,
    counted: boolean,
  ): boolean {
    if (req.socket.destroyed) return false;
    const session = this.matching(head);
    if (session === "held") return this.hold(req, () => this.dispatchRequest(req, res, head, true), counted);
    if (session) this.stealRequest(session, req, res, head);
    else this.forwardRequest(req, res);
    return false;
  }

  private forwardRequest(req: IncomingMessage, res: ServerResponse): void {
    this.metrics.requests.app++;
    // Raw header pairs keep names, order and repeats; Content-Length / Transfer-Encoding
    // stay, so Node frames the body for the app exactly as the client did.
    const headers: string[] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const lower = req.rawHeaders[i]!.toLowerCase();
      if (lower !== "connection" && lower !== "keep-alive")
        headers.push(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
    }
    const upstream = httpRequest(
      {
        host: this.opts.appHost ?? "127.0.0.1",
        port: this.opts.appPort,
        method: req.method,
        path: req.url,
        headers: headers as unknown as Record<string, string>, // raw array form, see http.request docs
        agent: this.appAgent,
        setHost: false,
      },
      (upRes) => {
        const out: string[] = [];
        for (let i = 0; i < upRes.rawHeaders.length; i += 2) {
          const name = upRes.rawHeaders[i]!;
          const lower = name.toLowerCase();
          if (lower === "connection" || lower === "keep-alive" || lower === "transfer-encoding") continue;
          out.push(name, upRes.rawHeaders[i + 1]!);
        }
        res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, out);
        upRes.pipe(res);
        upRes.on("error", () => res.destroy());
      },
    );
    upstream.on("error", () => {
      this.metrics.requests.failed++;
      if (!res.headersSent) {
        res.writeHead(502, { "content-type": "text/plain" });
        res.end("switchyard agent: the application did not answer\n");
      } else res.destroy();
    });
    req.pipe(upstream);
  }

  /** Bodies stream both ways (stolen-caller.ts): no body is ever held whole beyond 64 KiB. */
  private stealRequest(
    session: TrafficSession,
    req: IncomingMessage,
    res: ServerResponse,
    head: RequestHead,
  ): void {
    this.metrics.requests.stolen++;
    acceptStolenCaller(
      req,
      res,
      () => this.metrics.requests.failed++,
      (caller) => session.request({ port: this.subPort, remoteAddress: caller.remoteAddress, head }, caller),
    );
  }

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, counted = false): boolean {
    if (socket.destroyed) return false;
    const session = this.matching(headOf(req));
    if (session === "held") return this.hold(socket, () => this.onUpgrade(req, socket, head, true), counted);
    const initial = Buffer.concat([serializeHead(req), head]);
    const mirrors = this.httpMirrors.get(req.socket) ?? [];
    // After an upgrade the connection is a byte stream: raw from here on.
    if (session) {
      this.metrics.requests.stolen++;
      this.stealRaw(
        socket,
        session,
        {
          port: this.subPort,
          remoteAddress: req.socket.remoteAddress ?? "",
          remotePort: req.socket.remotePort ?? 0,
        },
        mirrors,
        initial,
      );
    } else {
      this.metrics.requests.app++;
      this.copyToMirrors(mirrors, initial);
      this.pipeToApp(socket, mirrors, initial);
    }
    return false;
  }
}
