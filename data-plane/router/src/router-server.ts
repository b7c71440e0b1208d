// The router's network face: the public HTTP(S) session port carrying
//   - the WebSocket endpoint /v1/sessions/{id}, authenticated in the upgrade handler
//     (401 without a secret, 404 for an unknown session and for a wrong secret alike, 503 +
//     Retry-After while the session is being created or before the first routing table) so
//     nothing is upgraded that should not be;
//   - /healthz and /readyz (probes and load balancers); every other path is 404;
// and, when `admin` is given, the admin listener (admin-server.ts: /metrics, /debug/*).
// It owns the routing table, the session registry and the metrics of one router.
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import { type WebSocket, WebSocketServer } from "ws";
import { checkBackoff } from "../../../lib/backoff.js";
import { integerIn, OptionError, positive } from "../../../lib/option-error.js";
import { ErrorCode } from "../../../proto/error-codes.js";
import { DEFAULT_MAX_PAYLOAD_BYTES, HEADER_BYTES } from "../../../proto/frame-codec.js";
import { SessionState, type SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import { CHANNEL_PREFIX_BYTES, parseMuxPath } from "../../../proto/mux-protocol.js";
import { bearerSecret, secretMatches } from "../../../proto/session-auth.js";
import { parseSessionPath, writeRefusal, type Refusal } from "../../../proto/session-endpoint.js";
import { AdminServer, json, listenOn, text, type AdminListen } from "./admin-server.js";
import { CloseCode, type SessionLimits } from "./routed-session.js";
import { RouterMetrics } from "./router-metrics.js";
import { RoutingTable } from "./routing-table.js";
import { MuxConnection } from "./mux-connection.js";
import { MuxPool } from "./mux-pool.js";
import { SessionRegistry } from "./session-registry.js";
import { WsSessionSocket } from "./session-socket.js";

export interface RouterServerOptions {
  /** Listen address; default "0.0.0.0". */
  host?: string;
  /** Listen port; 0 picks a free one. Default 8080. */
  port?: number;
  /** PEM certificate and key: serve wss:// and https://. */
  tls?: { certPem: string; keyPem: string };
  limits?: Partial<SessionLimits>;
  /** Seconds a client should wait before retrying a session that is being created. Default 2. */
  retryAfterSeconds?: number;
  logger: Logger;
  /** An existing table (e.g. fed by the RouteDiscovery client); a new one otherwise. */
  table?: RoutingTable;
  /** Where /metrics and /debug/* are served (plain HTTP); absent: no admin listener. */
  admin?: AdminListen;
  /**
   * Carry sessions to upstreams their route marks `mux` (member gateways) on one shared
   * connection per gateway. Default true; false dials every upstream per session.
   */
  upstreamMux?: boolean;
}

/**
 * What an unknown session and a wrong secret are both answered with, byte for byte: which
 * sessions a router serves is not for a caller without the secret to find out.
 */
const NO_SUCH_SESSION = {
  status: 404,
  code: ErrorCode.SESSION_NOT_FOUND,
  message:
    "no session with this id and secret on this router: it ended, was never created, or the secret is not its own",
} as const;

/**
 * Compared against when the session is unknown, so that answer costs the same hash and
 * constant-time comparison as a wrong secret.
 */
const UNKNOWN_SESSION_HASH = "0".repeat(64);

export const defaultLimits: SessionLimits = {
  maxPayloadBytes: DEFAULT_MAX_PAYLOAD_BYTES,
  flow: { highWaterBytes: 1024 * 1024, lowWaterBytes: 256 * 1024, hardLimitBytes: 8 * 1024 * 1024 },
  mergeTimeoutMs: 10_000,
  wsPingIntervalMs: 30_000,
  backoff: { initialMs: 250, maxMs: 10_000 },
  connectTimeoutMs: 10_000,
  unmasked: false,
  maxConnections: 65_536,
  maxSubscriptions: 1_024,
  maxPendingMerges: 1_024,
};

export function resolveLimits(partial: Partial<SessionLimits> = {}): SessionLimits {
  const l: SessionLimits = {
    ...defaultLimits,
    ...partial,
    flow: { ...defaultLimits.flow, ...partial.flow },
    backoff: { ...defaultLimits.backoff, ...partial.backoff },
  };
  for (const k of [
    "maxPayloadBytes",
    "mergeTimeoutMs",
    "wsPingIntervalMs",
    "connectTimeoutMs",
    "maxConnections",
    "maxSubscriptions",
    "maxPendingMerges",
  ] as const)
    positive(`limits.${k}`, l[k], NaN);
  positive("limits.flow.highWaterBytes", l.flow.highWaterBytes, NaN);
  positive("limits.flow.lowWaterBytes", l.flow.lowWaterBytes, NaN);
  if (l.flow.lowWaterBytes > l.flow.highWaterBytes || l.flow.hardLimitBytes < l.flow.highWaterBytes)
    throw new OptionError("limits.flow", "must satisfy lowWaterBytes <= highWaterBytes <= hardLimitBytes");
  checkBackoff(l.backoff, "limits.backoff");
  return l;
}

export class RouterServer {
  readonly table: RoutingTable;
  readonly metrics: RouterMetrics;
  readonly sessions: SessionRegistry;
  readonly limits: SessionLimits;
  private readonly server: Server;
  private readonly admin: AdminServer | undefined;
  private readonly wss: WebSocketServer;
  /** Multiplexed connections: every message is a session frame behind a channel prefix. */
  private readonly muxWss: WebSocketServer;
  private readonly log: Logger;
  private readonly retryAfter: number;
  private readonly muxPool: MuxPool | undefined;
  private readonly accepted = new Set<MuxConnection>();

  constructor(private readonly opts: RouterServerOptions) {
    integerIn("port", opts.port, 8080, 0, 65535);
    this.retryAfter = positive("retryAfterSeconds", opts.retryAfterSeconds, 2);
    this.limits = resolveLimits(opts.limits);
    this.log = opts.logger;
    this.table = opts.table ?? new RoutingTable();
    this.metrics = new RouterMetrics({
      activeSessions: () => this.sessions.size,
      upstreamLinks: () => this.linkCounts(),
      bufferedBytes: () => this.buffered(),
      table: () => ({ sessions: this.table.size, updatedAtSeconds: this.table.updatedAt / 1000 }),
      mux: () => this.muxStats(),
    });
    // One coarse sweep, fine enough to keep ping intervals below a second honest.
    const sweepMs = Math.min(1000, this.limits.wsPingIntervalMs / 4);
    this.muxPool =
      opts.upstreamMux === false
        ? undefined
        : new MuxPool({
            pingIntervalMs: this.limits.wsPingIntervalMs,
            connectTimeoutMs: this.limits.connectTimeoutMs,
            maxPayloadBytes: this.limits.maxPayloadBytes,
            unmasked: this.limits.unmasked,
            log: this.log,
          });
    this.sessions = new SessionRegistry(
      this.table,
      this.limits,
      this.metrics,
      this.log,
      sweepMs,
      this.muxPool,
    );
    const upgrades = (maxPayload: number) =>
      new WebSocketServer({ noServer: true, perMessageDeflate: false, skipUTF8Validation: true, maxPayload });
    // Frames up to 4× the limit get a precise protocol error; beyond that ws closes (1009).
    this.wss = upgrades(this.limits.maxPayloadBytes * 4 + HEADER_BYTES);
    this.muxWss = upgrades(this.limits.maxPayloadBytes * 4 + HEADER_BYTES + CHANNEL_PREFIX_BYTES);
    const handler = (req: IncomingMessage, res: ServerResponse) => this.http(req, res);
    this.server = opts.tls
      ? createHttpsServer({ cert: opts.tls.certPem, key: opts.tls.keyPem }, handler)
      : createHttpServer(handler);
    this.server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.upgrade(req, socket as Socket, head),
    );
    this.admin = opts.admin
      ? new AdminServer(
          { metrics: this.metrics, table: this.table, sessions: this.sessions, logger: this.log },
          opts.admin,
        )
      : undefined;
  }

  /**
   * Starts listening (the admin listener first, so that once the session port answers,
   * /metrics does too); resolves with the session port's address. Logs "router listening"
   * with both addresses (adminAddress/adminPort when there is an admin listener).
   */
  async listen(): Promise<AddressInfo> {
    const admin = await this.admin?.listen();
    try {
      await listenOn(
        this.server,
        this.opts.host ?? "0.0.0.0",
        this.opts.port ?? 8080,
        "session listener",
        "--listen",
      );
    } catch (err) {
      await this.admin?.close();
      throw err;
    }
    const addr = this.server.address() as AddressInfo;
    this.log.info(
      {
        address: addr.address,
        port: addr.port,
        tls: !!this.opts.tls,
        ...(admin ? { adminAddress: admin.address, adminPort: admin.port } : {}),
      },
      "router listening",
    );
    return addr;
  }

  /** The admin listener's address once listening; undefined without one. */
  get adminAddress(): AddressInfo | undefined {
    return this.admin?.address();
  }

  /** Runs until `signal` aborts, then closes every session and the listener. */
  async start(signal: AbortSignal): Promise<void> {
    if (!this.server.listening) await this.listen();
    if (signal.aborted) return this.close();
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    await this.close();
  }

  async close(): Promise<void> {
    this.sessions.close();
    for (const c of [...this.accepted]) c.close(1001, "router shutting down");
    for (const c of this.wss.clients) c.terminate();
    for (const c of this.muxWss.clients) c.terminate();
    await Promise.all([
      new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        this.server.closeAllConnections?.();
      }),
      this.admin?.close(),
    ]);
  }

  private upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on("error", () => {});
    const sessionId = parseSessionPath(req.url);
    const muxSessionId = sessionId === undefined ? parseMuxPath(req.url) : undefined;
    if (sessionId === undefined && muxSessionId === undefined)
      return writeRefusal(
        socket,
        404,
        ErrorCode.NOT_FOUND,
        `no WebSocket endpoint at ${(req.url ?? "").split("?")[0]}; use /v1/sessions/{id}`,
      );
    const id = (sessionId ?? muxSessionId)!;
    const secret = this.table.loaded ? bearerSecret(req.headers) : undefined;
    const auth = this.authenticate(id, secret);
    // A multiplexed connection only needs a secret the router knows; each channel is then
    // authenticated on its own (and may be refused while its session is being created).
    if ("status" in auth && !(muxSessionId !== undefined && auth.code === ErrorCode.SESSION_CREATING))
      return writeRefusal(
        socket,
        auth.status,
        auth.code,
        auth.message,
        auth.retryAfterMs !== undefined ? auth.retryAfterMs / 1000 : undefined,
      );
    const route = "route" in auth ? auth.route : undefined;
    (muxSessionId !== undefined ? this.muxWss : this.wss).handleUpgrade(req, socket, head, (ws) => {
      ws.binaryType = "nodebuffer";
      if (muxSessionId !== undefined) return this.acceptMux(ws, socket);
      // The route may have changed while the handshake was in flight.
      const current = this.table.get(id);
      if (
        !current ||
        current.clientKeyHash !== route!.clientKeyHash ||
        current.state !== SessionState.READY
      ) {
        ws.close(CloseCode.SessionRemoved, "session changed during connect");
        return;
      }
      this.sessions.attach(current, new WsSessionSocket(ws, socket));
    });
  }

  /**
   * Who may attach to `sessionId` with `secret`: its route, or the refusal (401 without a
   * secret, the same 404 for an unknown session and a wrong secret, 503 while the router has
   * no table or the session is being created).
   */
  private authenticate(sessionId: string, secret: string | undefined): { route: SessionRoute } | Refusal {
    if (!this.table.loaded)
      return {
        status: 503,
        code: ErrorCode.ROUTER_NOT_READY,
        message: "router has no routing table yet; retry shortly",
        retryAfterMs: this.retryAfter * 1000,
      };
    if (secret === undefined) {
      this.metrics.event("auth_failed");
      return {
        status: 401,
        code: ErrorCode.UNAUTHENTICATED,
        message: "send the session secret as 'Authorization: Bearer <secret>'",
      };
    }
    const route = this.table.get(sessionId);
    // Both refusals below do the same work and give the same answer; only the metrics (on
    // the admin port) and the log tell them apart.
    if (!secretMatches(secret, route?.clientKeyHash ?? UNKNOWN_SESSION_HASH) || !route) {
      const reason = route ? "wrong_secret" : "unknown_session";
      this.metrics.event(route ? "auth_failed" : "session_not_found");
      this.log.info({ session: sessionId, reason }, "session refused");
      return { ...NO_SUCH_SESSION };
    }
    if (route.state !== SessionState.READY) {
      this.metrics.event("session_creating");
      return {
        status: 503,
        code: ErrorCode.SESSION_CREATING,
        message: `session ${sessionId} is being created; retry`,
        retryAfterMs: this.retryAfter * 1000,
      };
    }
    return { route };
  }

  /** A Primary router's multiplexed connection: every channel is a session's client. */
  private acceptMux(ws: WebSocket, socket: Socket): void {
    const conn = new MuxConnection(ws, socket, {
      side: "gateway",
      pingIntervalMs: this.limits.wsPingIntervalMs,
      idleCloseMs: 2 * this.limits.wsPingIntervalMs,
      log: this.log,
      accept: (open, channel) => {
        const auth = this.authenticate(open.sessionId, open.secret);
        if ("status" in auth) return auth;
        this.sessions.attach(auth.route, channel);
        return undefined;
      },
      onClosed: (c) => this.accepted.delete(c),
    });
    this.accepted.add(conn);
  }

  /** Multiplexed connections: dialled to gateways, and accepted from Primary routers. */
  muxStats(): {
    dialled: { connections: number; channels: number };
    accepted: { connections: number; channels: number };
  } {
    let channels = 0;
    for (const c of this.accepted) channels += c.channelCount;
    return {
      dialled: this.muxPool?.stats() ?? { connections: 0, channels: 0 },
      accepted: { connections: this.accepted.size, channels },
    };
  }

  /** The session port's plain HTTP: probes only; metrics and debug views are on the admin port. */
  private http(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? "").split("?")[0];
    switch (path) {
      case "/healthz":
        return text(res, 200, "ok\n");
      case "/readyz":
        return this.table.loaded ? text(res, 200, "ok\n") : text(res, 503, "no routing table yet\n");
      default:
        return json(res, 404, { code: ErrorCode.NOT_FOUND, message: `no handler for ${path}` });
    }
  }

  private *linkCounts(): Iterable<{ cluster: string; state: string; count: number }> {
    const counts = new Map<string, number>();
    for (const s of this.sessions.values())
      for (const l of s.upstreamLinks()) {
        const k = `${l.opts.counters.cluster}\u0000${l.state}`;
        counts.set(k, (counts.get(k) ?? 0) + 1);
      }
    for (const [k, count] of counts) {
      const [cluster, state] = k.split("\u0000") as [string, string];
      yield { cluster, state, count };
    }
  }

  private buffered(): { client: number; upstream: number } {
    let client = 0;
    let upstream = 0;
    for (const s of this.sessions.values()) {
      client += s.clientBufferedBytes;
      for (const l of s.upstreamLinks()) upstream += l.bufferedBytes;
    }
    return { client, upstream };
  }
}
