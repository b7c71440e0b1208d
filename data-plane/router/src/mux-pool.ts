// The Primary router's multiplexed connections to member gateways: one per gateway (origin,
// CA and server name), dialled when the first session needs it and shared by every session
// whose route marks that upstream `mux`; closed after a while without channels. A gateway
// that does not serve /v1/mux (an older router: 404 SWITCHYARD_NOT_FOUND) is dialled per
// session for a minute, then asked again.
import type { IncomingMessage } from "node:http";
import type { Logger } from "pino";
import { ErrorCode } from "../../../proto/error-codes.js";
import { HEADER_BYTES } from "../../../proto/frame-codec.js";
import { CHANNEL_PREFIX_BYTES, muxTarget, muxUrl } from "../../../proto/mux-protocol.js";
import { parseRefusal } from "../../../proto/session-endpoint.js";
import type { MuxChannel } from "./mux-channel.js";
import { MuxConnection } from "./mux-connection.js";
import { dialUpstream } from "./upstream-dial.js";

/** How long a gateway without /v1/mux is dialled per session before it is asked again. */
const UNSUPPORTED_RECHECK_MS = 60_000;

export interface MuxPoolOptions {
  pingIntervalMs: number;
  connectTimeoutMs: number;
  maxPayloadBytes: number;
  /** Send unmasked frames (trusted networks only). */
  unmasked: boolean;
  /** Close a connection without channels after this long. Milliseconds; default 30 000. */
  idleCloseMs?: number;
  log: Logger;
}

export interface MuxDial {
  url: string;
  secret: string;
  caPem: string;
  serverName: string;
}

export class MuxPool {
  private readonly conns = new Map<string, MuxConnection>();
  private readonly unsupportedUntil = new Map<string, number>();
  /** Connections dialled since start (for tests and /debug). */
  dialled = 0;

  constructor(private readonly opts: MuxPoolOptions) {}

  /**
   * A channel for the session at `d.url` on that gateway's shared connection, or undefined
   * when it must be dialled on its own (not a session URL, or a gateway without /v1/mux).
   */
  open(d: MuxDial): MuxChannel | undefined {
    const target = muxTarget(d.url);
    if (!target) return undefined;
    const key = `${target.origin}\u0000${d.serverName}\u0000${d.caPem}`;
    if ((this.unsupportedUntil.get(key) ?? 0) > Date.now()) return undefined;
    let conn = this.conns.get(key);
    if (!conn || conn.closed) {
      conn = this.dial(key, target.origin, target.sessionId, d);
      this.conns.set(key, conn);
    }
    return conn.open(target.sessionId, d.secret);
  }

  private dial(key: string, origin: string, sessionId: string, d: MuxDial): MuxConnection {
    const o = this.opts;
    this.dialled++;
    const ws = dialUpstream({
      url: muxUrl(origin, sessionId),
      secret: d.secret,
      caPem: d.caPem,
      serverName: d.serverName,
      maxPayload: o.maxPayloadBytes * 4 + HEADER_BYTES + CHANNEL_PREFIX_BYTES,
      connectTimeoutMs: o.connectTimeoutMs,
      unmasked: o.unmasked,
    });
    const conn = new MuxConnection(ws, undefined, {
      side: "dialer",
      pingIntervalMs: o.pingIntervalMs,
      idleCloseMs: o.idleCloseMs ?? 30_000,
      log: o.log,
      onClosed: (c) => {
        if (this.conns.get(key) === c) this.conns.delete(key);
      },
    });
    ws.on("unexpected-response", (req, res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (b: Buffer) => {
        if ((size += b.length) <= 4096) chunks.push(b);
      });
      res.on("error", () => {});
      res.on("end", () => {
        const r = parseRefusal(
          res.statusCode ?? 0,
          Buffer.concat(chunks).toString(),
          res.headers["retry-after"],
        );
        if (r.status === 404 && r.code === ErrorCode.NOT_FOUND) {
          this.unsupportedUntil.set(key, Date.now() + UNSUPPORTED_RECHECK_MS);
          o.log.info({ gateway: origin }, "gateway serves no multiplexed connection; dialling per session");
        }
        req.destroy();
        conn.fail(
          `gateway refused the multiplexed connection: ${r.status} ${r.code || "(no code)"}: ${r.message}`,
        );
      });
    });
    return conn;
  }

  /** Open connections and the channels they carry. */
  stats(): { connections: number; channels: number } {
    let channels = 0;
    for (const c of this.conns.values()) channels += c.channelCount;
    return { connections: this.conns.size, channels };
  }

  close(): void {
    for (const c of [...this.conns.values()]) c.close(1001, "router shutting down");
    this.conns.clear();
  }
}
