// A scriptable agent for router tests and benchmarks (not the real agent): it speaks the
// session protocol the way an agent does — answers Hello, pings, env, DNS and file stat,
// accepts or refuses subscriptions, echoes outgoing TCP/UDP data — and lets a test emit
// incoming connections and data, slow its answers, stop reading, be killed and restarted
// on the same port. Every frame it receives is recorded for assertions.
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import { WebSocketServer, type WebSocket } from "ws";
import * as pb from "../../proto/gen/session_pb.js";
import {
  checkFrame,
  encodeFrame,
  encodeRaw,
  FLAG_ERROR,
  FrameCheck,
  frameCheckError,
  HEADER_BYTES,
} from "../../proto/frame-codec.js";
import { negotiateVersion, PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN } from "../../proto/frame-version.js";
import { bearerSecret } from "../../proto/session-auth.js";
import { FrameInbox, toReceived } from "./frame-inbox.js";

const F = pb.FrameFamily;

export interface ScriptedAgentOptions {
  /** Name reported in env (AGENT_NAME) and DNS answers, so tests see who answered. */
  name: string;
  /** Secret the router must present as `Authorization: Bearer …`. */
  secret: string;
  host?: string;
  /** Port to listen on; 0 (default) picks one, kept across restarts. */
  port?: number;
  env?: Record<string, string>;
  /** Record every received frame in `inbox` (default true; benchmarks turn it off). */
  record?: boolean;
  /** Protocol versions this agent claims (default the codec's). */
  versions?: { min: number; max: number };
}

export class ScriptedAgent {
  readonly inbox = new FrameInbox();
  /** Active subscriptions: subscription id → port and mode. */
  readonly subscriptions = new Map<number, { port: number; kind: number }>();
  /** Open incoming connections this agent announced. */
  readonly connections = new Set<number>();
  /** Number of Hello frames answered (one per router connection). */
  hellos = 0;
  /** Refuse subscriptions with this reason (undefined: accept). */
  refuseSubscriptions: string | undefined;
  /** Answer pings (false simulates a hung agent). */
  answerPings = true;
  /** Delay every answer by this many ms (0: answer synchronously). */
  delayMs = 0;
  /** Outgoing data bytes received (counted even when not recording). */
  outgoingBytes = 0;
  /** Echo outgoing TCP/UDP data back (default true). */
  echo = true;
  /**
   * Answer the next `count` upgrades, after `delayMs`, with a 404 as a gateway that does not
   * know the session yet does.
   */
  refuseUpgrades = { count: 0, delayMs: 0 };

  private server: Server | undefined;
  private wss: WebSocketServer | undefined;
  private readonly sockets = new Set<WebSocket>();
  private current: WebSocket | undefined;
  private port: number;
  private nextConnId = 1;
  private readonly record: boolean;
  private readonly versions: { min: number; max: number };

  constructor(readonly opts: ScriptedAgentOptions) {
    if (!opts.name) throw new Error("ScriptedAgent: option name is required");
    if (!opts.secret) throw new Error("ScriptedAgent: option secret is required");
    this.port = opts.port ?? 0;
    this.record = opts.record ?? true;
    this.versions = opts.versions ?? { min: PROTOCOL_VERSION_MIN, max: PROTOCOL_VERSION_MAX };
  }

  get listeningPort(): number {
    return this.port;
  }

  /** ws:// URL a route's upstream points at. */
  url(sessionId = "s"): string {
    return `ws://${this.opts.host ?? "127.0.0.1"}:${this.port}/v1/sessions/${sessionId}`;
  }

  get socketCount(): number {
    return this.sockets.size;
  }

  async start(): Promise<number> {
    if (this.server) return this.port;
    const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, skipUTF8Validation: true });
    const server = createServer((_req, res) => {
      res.writeHead(404).end();
    });
    server.on("upgrade", (req, socket: Duplex, head) => {
      if (this.refuseUpgrades.count > 0) {
        this.refuseUpgrades.count--;
        const body = JSON.stringify({ code: "SWITCHYARD_SESSION_NOT_FOUND", message: "no such session" });
        const refuse = () =>
          socket.end(
            `HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
          );
        setTimeout(refuse, this.refuseUpgrades.delayMs);
        return;
      }
      if (bearerSecret(req.headers) !== this.opts.secret) {
        socket.end("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, socket as Socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, this.opts.host ?? "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    this.wss = wss;
    return this.port;
  }

  /** Kills the agent: every socket is terminated (no close handshake), the port closed, state lost. */
  async stop(): Promise<void> {
    this.subscriptions.clear();
    const server = this.server;
    this.server = undefined;
    for (const ws of this.sockets) ws.terminate();
    this.sockets.clear();
    this.current = undefined;
    this.connections.clear();
    this.wss?.close();
    if (server) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Stops reading from the router (its send buffer fills): a slow agent. */
  pauseReading(): void {
    for (const ws of this.sockets) ws.pause();
  }

  resumeReading(): void {
    for (const ws of this.sockets) ws.resume();
  }

  /** Sends the router a WebSocket ping: what a real agent does while it cannot read (busy, not dead). */
  pingRouter(): void {
    for (const ws of this.sockets) ws.ping();
  }

  /** Announces an incoming connection on `port`; returns the agent's id for it. */
  emitConnection(opts: {
    port: number;
    subscriptionId?: number;
    agentConnId?: number;
    mode?: pb.TrafficMode;
  }): number {
    const id = opts.agentConnId ?? this.nextConnId++;
    this.connections.add(id);
    this.sendNow(
      encodeFrame(
        { family: F.TRAFFIC, kind: pb.TrafficKind.NEW_CONNECTION, connectionId: id },
        pb.NewConnectionSchema,
        {
          subscriptionId: opts.subscriptionId ?? 0,
          port: opts.port,
          remoteAddress: "10.1.2.3",
          remotePort: 40000 + (id % 20000),
          mode: opts.mode ?? pb.TrafficMode.STEAL,
        },
      ),
    );
    return id;
  }

  emitData(agentConnId: number, data: Uint8Array | string): void {
    this.sendNow(
      encodeFrame(
        { family: F.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: agentConnId },
        pb.StreamDataSchema,
        {
          data: typeof data === "string" ? Buffer.from(data) : data,
        },
      ),
    );
  }

  emitClose(agentConnId: number): void {
    this.connections.delete(agentConnId);
    this.sendNow(
      encodeFrame(
        { family: F.TRAFFIC, kind: pb.TrafficKind.CLOSE, connectionId: agentConnId },
        pb.StreamCloseSchema,
        {},
      ),
    );
  }

  emitHttpRequest(agentConnId: number, requestId: number, req: { method: string; path: string }): void {
    this.sendNow(
      encodeFrame(
        { family: F.TRAFFIC, kind: pb.TrafficKind.HTTP_REQUEST, connectionId: agentConnId, requestId },
        pb.HttpRequestSchema,
        req,
      ),
    );
  }

  /** Sends raw bytes as one binary message (for malformed-frame tests). */
  /** True while a router is connected (frames can be emitted). */
  get connected(): boolean {
    return this.current !== undefined;
  }

  emitRaw(buf: Buffer): void {
    this.sendNow(buf);
  }

  private sendNow(buf: Buffer): void {
    if (!this.current) throw new Error(`ScriptedAgent ${this.opts.name}: no router is connected`);
    this.current.send(buf);
  }

  private accept(ws: WebSocket, _socket: Socket): void {
    this.sockets.add(ws);
    ws.binaryType = "nodebuffer";
    ws.on("message", (data: Buffer, isBinary) => {
      try {
        this.onMessage(ws, data, isBinary);
      } catch (err) {
        // A payload that does not decode: answer like an agent would, never crash the test.
        const e = err as Error & { code?: string };
        this.error(
          ws,
          e.code ?? "SWITCHYARD_FRAME_BAD_PAYLOAD",
          e.message,
          data.length >= 8 ? data.readUInt32BE(4) : 0,
        );
      }
    });
    ws.on("close", () => {
      this.sockets.delete(ws);
      if (this.current === ws) this.current = undefined;
    });
    ws.on("error", () => {});
  }

  private reply(ws: WebSocket, buf: Buffer): void {
    if (this.delayMs > 0) setTimeout(() => ws.readyState === ws.OPEN && ws.send(buf), this.delayMs);
    else ws.send(buf);
  }

  private error(ws: WebSocket, code: string, message: string, requestId = 0): void {
    ws.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.ERROR, requestId }, pb.ProtocolErrorSchema, {
        code,
        message,
      }),
    );
  }

  private onMessage(ws: WebSocket, data: Buffer, isBinary: boolean): void {
    if (!isBinary) return this.error(ws, "SWITCHYARD_FRAME_NOT_BINARY", "text message");
    const check = checkFrame(data);
    if (check !== FrameCheck.Ok) {
      const e = frameCheckError(check, data);
      return this.error(ws, e.code, e.message, e.requestId);
    }
    const family = data[0]!;
    const kind = data[1]!;
    const requestId = data.readUInt32BE(4);
    const connectionId = data.readUInt32BE(8);
    // Bulk data is counted, not recorded, so benchmarks do not grow memory.
    if ((family === F.OUTGOING_TCP || family === F.OUTGOING_UDP) && kind === pb.OutgoingKind.DATA) {
      this.outgoingBytes += data.length - HEADER_BYTES;
      if (this.echo) this.reply(ws, data);
      return;
    }
    const f = toReceived(data);
    if (this.record) this.inbox.push(f);
    const hdr = { requestId, connectionId };
    switch (family) {
      case F.CONTROL:
        if (kind === pb.ControlKind.HELLO) {
          const hello = f.as(pb.HelloSchema);
          const v = negotiateVersion(this.versions, { min: hello.minVersion, max: hello.maxVersion });
          if (v === undefined)
            return this.error(
              ws,
              "SWITCHYARD_PROTOCOL_VERSION_UNSUPPORTED",
              "no common protocol version",
              requestId,
            );
          this.hellos++;
          this.current = ws;
          ws.send(
            encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.HELLO_ACK, requestId }, pb.HelloAckSchema, {
              version: v,
              peer: this.opts.name,
            }),
          );
        }
        return;
      case F.PING:
        if (!this.answerPings) return;
        // Pong echoes the ping's sent_at (same field number): reuse the payload bytes.
        return this.reply(
          ws,
          encodeRaw({ family: F.PING, kind: pb.PingKind.PONG, ...hdr }, data.subarray(HEADER_BYTES)),
        );
      case F.ENV:
        return this.reply(
          ws,
          encodeFrame({ family: F.ENV, kind: pb.EnvKind.RESULT, ...hdr }, pb.EnvResultSchema, {
            vars: { AGENT_NAME: this.opts.name, ...this.opts.env },
          }),
        );
      case F.DNS:
        return this.reply(
          ws,
          encodeFrame({ family: F.DNS, kind: pb.DnsKind.RESULT, ...hdr }, pb.DnsResultSchema, {
            addresses: [{ address: "10.0.0.1", ipFamily: 4 }],
            hostnames: [this.opts.name],
          }),
        );
      case F.FILE:
        if (kind === pb.FileKind.STAT)
          return this.reply(
            ws,
            encodeFrame({ family: F.FILE, kind: pb.FileKind.RESULT, ...hdr }, pb.FileResultSchema, {
              result: { case: "stat", value: { size: BigInt(this.opts.name.length), mode: 0o644 } },
            }),
          );
        return this.reply(
          ws,
          encodeFrame({ family: F.FILE, kind: pb.FileKind.RESULT, ...hdr }, pb.FileResultSchema, {
            error: "ENOSYS",
          }),
        );
      case F.OUTGOING_TCP:
      case F.OUTGOING_UDP:
        if (kind === pb.OutgoingKind.CONNECT)
          return this.reply(
            ws,
            encodeFrame({ family, kind: pb.OutgoingKind.CONNECT_RESULT, ...hdr }, pb.ConnectResultSchema, {
              localAddress: "10.0.0.9",
              localPort: 50000,
            }),
          );
        return;
      case F.SUBSCRIPTION: {
        const rh = { family: F.SUBSCRIPTION, kind: pb.SubscriptionKind.RESULT, ...hdr };
        if (kind === pb.SubscriptionKind.UNSUBSCRIBE) {
          this.subscriptions.delete(connectionId);
          return this.reply(ws, encodeFrame(rh, pb.SubscriptionResultSchema, { ok: true }));
        }
        if (this.refuseSubscriptions !== undefined)
          return this.reply(
            ws,
            encodeFrame({ ...rh, flags: FLAG_ERROR }, pb.SubscriptionResultSchema, {
              ok: false,
              error: this.refuseSubscriptions,
            }),
          );
        this.subscriptions.set(connectionId, { port: f.as(pb.SubscribeSchema).port, kind });
        return this.reply(ws, encodeFrame(rh, pb.SubscriptionResultSchema, { ok: true }));
      }
      case F.TRAFFIC:
        if (kind === pb.TrafficKind.CLOSE) this.connections.delete(connectionId);
        return;
    }
  }
}
