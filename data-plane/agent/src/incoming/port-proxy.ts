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
//
// This file dispatches: which way each connection, request and upgrade goes, and the
// port's listener. The ways themselves: raw-forwarding.ts (to the app, or stolen whole),
// http-forwarding.ts (a request to the app), stolen-caller.ts (a request stolen), with
// mirror-copies.ts feeding mirrors and held-steals.ts keeping what waits for a held steal.
// What a session is handed is session-handoff.ts.
import {
  createServer as createHttpServer,
  Agent,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import { createServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { HeldSteals, type Holdable } from "./held-steals.js";
import type { RequestHead } from "./http-filter.js";
import { forwardToApp, headOf, refuseUnparsable, serializeHead } from "./http-forwarding.js";
import { copyToMirrors, openMirrors } from "./mirror-copies.js";
import type { PortSubscriptions, Subscription } from "./port-subscriptions.js";
import { pipeToApp, stealRaw, type AppAddress } from "./raw-forwarding.js";
import type { ConnectionOrigin, ConnectionSink, TrafficSession } from "./session-handoff.js";
import { acceptStolenCaller } from "./stolen-caller.js";

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

export class PortProxy {
  readonly metrics = new PortProxyMetrics();
  private server: Server | undefined;
  // No deadline for a whole request (Node's default is 5 min): an upload streams for as long
  // as it takes, as it would to the app itself. Heads still have Node's 60 s.
  private readonly http = createHttpServer({ keepAliveTimeout: 65_000, requestTimeout: 0 });
  private readonly appAgent: Agent;
  private readonly app: AppAddress;
  private readonly sockets = new Set<Socket>();
  /** Mirror sinks of connections in HTTP mode, found again per request. */
  private readonly httpMirrors = new WeakMap<object, ConnectionSink[]>();
  private readonly held: HeldSteals;

  constructor(private readonly opts: PortProxyOptions) {
    if (!Number.isInteger(opts.appPort) || opts.appPort < 1 || opts.appPort > 65535) {
      throw new RangeError(`appPort must be a TCP port (1-65535), got ${opts.appPort}`);
    }
    this.app = { host: opts.appHost ?? "127.0.0.1", port: opts.appPort };
    this.appAgent = new Agent({ keepAlive: true, maxSockets: 256 });
    this.http.on("request", (req, res) => this.onRequest(req, res));
    this.http.on("upgrade", (req, socket, head) => void this.onUpgrade(req, socket, head));
    this.http.on("clientError", (err: NodeJS.ErrnoException, socket) => refuseUnparsable(err, socket));
    this.held = new HeldSteals(opts.subscriptions, this.subPort);
  }

  /** Connections and requests now waiting for a held steal. */
  get waitingCount(): number {
    return this.held.count;
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
    this.held.close();
    for (const s of this.sockets) s.destroy();
    this.appAgent.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private subs(): readonly Subscription[] {
    return this.opts.subscriptions.forPort(this.subPort);
  }

  private mirrorsOf(subs: readonly Subscription[], origin: ConnectionOrigin): ConnectionSink[] {
    return openMirrors(subs, origin, this.opts.sessions);
  }

  private onConnection(socket: Socket): void {
    // A proxy forwards what it gets at once: no Nagle delay on either side.
    socket.setNoDelay(true);
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    this.dispatchConnection(socket, false);
  }

  /** Holds `stream` until the port's subscriptions change (held-steals.ts); counted once. */
  private hold(stream: Holdable, dispatch: () => boolean, counted: boolean): true {
    if (!counted) this.metrics.held++;
    this.held.hold(stream, dispatch);
    return true;
  }

  /** Returns true when the connection was held (again). */
  private dispatchConnection(socket: Socket, counted: boolean): boolean {
    if (socket.destroyed) return false;
    const subs = this.subs();
    const origin = {
      port: this.subPort,
      remoteAddress: socket.remoteAddress ?? "",
      remotePort: socket.remotePort ?? 0,
    };
    const steal = subs.find((s) => s.mode === "steal" && !s.filter);
    if (steal?.held) return this.hold(socket, () => this.dispatchConnection(socket, true), counted);
    const session = steal && this.opts.sessions(steal.sessionId);
    if (session) {
      this.metrics.connections.stolen++;
      stealRaw(socket, session, origin, this.mirrorsOf(subs, origin), Buffer.alloc(0), this.metrics);
      return false;
    }
    if (subs.some((s) => s.mode === "steal")) {
      this.metrics.connections.http++;
      const mirrors = this.mirrorsOf(subs, origin);
      this.httpMirrors.set(socket, mirrors);
      socket.on("close", () => mirrors.forEach((m) => m.end()));
      this.http.emit("connection", socket);
      return false;
    }
    this.metrics.connections.raw++;
    pipeToApp(socket, this.app, this.mirrorsOf(subs, origin), Buffer.alloc(0), this.metrics);
    return false;
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
      copyToMirrors(mirrors, serializeHead(req), this.metrics);
      req.on("data", (chunk: Buffer) => copyToMirrors(mirrors, chunk, this.metrics));
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
    else {
      this.metrics.requests.app++;
      forwardToApp(req, res, this.app, this.appAgent, () => this.metrics.requests.failed++);
    }
    return false;
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
      const origin = {
        port: this.subPort,
        remoteAddress: req.socket.remoteAddress ?? "",
        remotePort: req.socket.remotePort ?? 0,
      };
      stealRaw(socket, session, origin, mirrors, initial, this.metrics);
    } else {
      this.metrics.requests.app++;
      copyToMirrors(mirrors, initial, this.metrics);
      pipeToApp(socket, this.app, mirrors, initial, this.metrics);
    }
    return false;
  }
}
