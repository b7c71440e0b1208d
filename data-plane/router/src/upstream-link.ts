// One session's WebSocket to one upstream (a workload gateway router or an agent).
// Owns the connection lifecycle: dial with the upstream's secret, Hello/HelloAck
// version negotiation, a bounded queue while connecting, reconnect with jittered
// exponential backoff, liveness (WebSocket pings on the router's coarse sweep; see
// `sweep`), and send-side high-water marks. It knows nothing about routing or the
// session's state (connection ids, subscriptions): frames and link events go up to
// RoutedSession.
import type { Logger } from "pino";
import { Backoff } from "../../../lib/backoff.js";
import { PeerLiveness } from "../../../lib/peer-liveness.js";
import {
  CloseSchema,
  ControlKind,
  FrameFamily,
  HelloAckSchema,
  HelloSchema,
  ProtocolErrorSchema,
} from "../../../proto/gen/session_pb.js";
import { decodePayload, encodeFrame, HEADER_BYTES } from "../../../proto/frame-codec.js";
import { PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN } from "../../../proto/frame-version.js";
import type { MuxPool } from "./mux-pool.js";
import type { TrafficCounters } from "./router-metrics.js";
import { dialUpstream } from "./upstream-dial.js";
import { WsSessionSocket, type SessionSocket } from "./session-socket.js";

export type LinkState = "connecting" | "open" | "down" | "closed";

export interface FlowLimits {
  /** Pause the sending side once this many bytes are queued toward a peer. Bytes; default 1 MiB. */
  highWaterBytes: number;
  /** Resume paused senders once the queue drained below this. Bytes; default 256 KiB. */
  lowWaterBytes: number;
  /** A peer whose queue exceeds this despite backpressure is too slow and is disconnected. Bytes; default 8 MiB. */
  hardLimitBytes: number;
}

export interface UpstreamLinkOptions {
  sessionId: string;
  cluster: string;
  url: string;
  secret: string;
  caPem: string;
  /**
   * Name a wss:// upstream's certificate is verified against (SNI and hostname check)
   * instead of the URL's host; "" = the URL's host. Agents are dialled by pod IP, which no
   * certificate issued in advance can name.
   */
  serverName: string;
  isDefault: boolean;
  limits: FlowLimits;
  /** Largest payload accepted; the WebSocket itself closes above 4× this. Bytes. */
  maxPayloadBytes: number;
  /** First reconnect delay and its cap. Milliseconds. */
  backoff: { initialMs: number; maxMs: number };
  /** WebSocket handshake timeout. Milliseconds. */
  connectTimeoutMs: number;
  /** WebSocket ping period; an upstream silent for two of them is dropped (see `sweep`). Milliseconds. */
  pingIntervalMs: number;
  /** Send unmasked client frames (a zero mask): saves a copy per frame; only for trusted paths. */
  unmasked: boolean;
  /**
   * The upstream is a gateway router serving /v1/mux: ride the pool's shared connection to
   * it (a channel) instead of a WebSocket of this link's own. Ignored without `muxPool`.
   */
  mux: boolean;
  muxPool?: MuxPool;
  counters: TrafficCounters;
  log: Logger;
}

export interface LinkEvents {
  /** A frame from the upstream (not yet validated). */
  frame(link: UpstreamLink, data: Buffer, isBinary: boolean): void;
  /** Hello completed: the link carries frames. `reconnected` is false for the first time. */
  up(link: UpstreamLink, reconnected: boolean): void;
  /**
   * The link was lost (or never came up); a retry is scheduled in `retryInMs`. `unsent` are
   * the frames queued while it first connected, which it never delivered (empty once it was up).
   */
  down(link: UpstreamLink, error: string, retryInMs: number, unsent: Buffer[]): void;
  /** The upstream's send queue drained below the low-water mark. */
  drained(link: UpstreamLink): void;
}

/** Outcome of `send`. */
export const enum Sent {
  Ok = 0,
  /** Sent, and the queue is now above the high-water mark: pause the source. */
  Congested = 1,
  /** Not sent: the link is down, closed, or over its hard limit. */
  Rejected = 2,
}

export class UpstreamLink {
  readonly cluster: string;
  readonly isDefault: boolean;
  state: LinkState = "connecting";
  lastError = "";
  /** This link's reading is paused because the client is congested. */
  readingPaused = false;

  private ws: SessionSocket | undefined;
  private queue: Buffer[] = [];
  private queuedBytes = 0;
  private readonly backoff: Backoff;
  private upCount = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private lastPingAt = 0;
  /** The current connection's peer (replaced on every dial). */
  private liveness: PeerLiveness;

  constructor(
    readonly opts: UpstreamLinkOptions,
    private readonly events: LinkEvents,
  ) {
    this.cluster = opts.cluster;
    this.isDefault = opts.isDefault;
    this.backoff = new Backoff({ ...opts.backoff, multiplier: 2 });
    this.liveness = new PeerLiveness(2 * opts.pingIntervalMs);
  }

  /** Bytes queued toward the upstream (WebSocket buffer, or the pre-hello queue). */
  get bufferedBytes(): number {
    return this.ws && this.state === "open" ? this.ws.bufferedAmount : this.queuedBytes;
  }

  /** Rides a multiplexed gateway connection (for tests and /debug). */
  get multiplexed(): boolean {
    return this.ws !== undefined && !(this.ws instanceof WsSessionSocket);
  }

  /** How many times the link came up (hello answered); 0 until the first. */
  get ups(): number {
    return this.upCount;
  }

  /** Open, or still connecting for the first time (frames queue): counts as live for merges. */
  get live(): boolean {
    return this.state === "open" || (this.state === "connecting" && this.upCount === 0);
  }

  get congested(): boolean {
    return this.bufferedBytes > this.opts.limits.highWaterBytes;
  }

  connect(): void {
    if (this.state === "closed") return;
    this.state = "connecting";
    const o = this.opts;
    const ws =
      (o.mux &&
        o.muxPool?.open({ url: o.url, secret: o.secret, caPem: o.caPem, serverName: o.serverName })) ||
      this.dial();
    this.ws = ws;
    const liveness = new PeerLiveness(2 * o.pingIntervalMs);
    this.liveness = liveness;
    ws.on("drain", () => {
      // Our bytes moved on: the upstream reads them, so it lives.
      liveness.heard();
      if (this.ws === ws && ws.bufferedAmount <= o.limits.lowWaterBytes) this.events.drained(this);
    });
    ws.on("open", () => {
      ws.send(
        encodeFrame({ family: FrameFamily.CONTROL, kind: ControlKind.HELLO }, HelloSchema, {
          minVersion: PROTOCOL_VERSION_MIN,
          maxVersion: PROTOCOL_VERSION_MAX,
          peer: "switchyard-router",
        }),
      );
      this.lastPingAt = Date.now();
    });
    ws.on("message", (data: Buffer, isBinary) => {
      liveness.heard();
      if (
        this.state === "connecting" &&
        isBinary &&
        data.length >= HEADER_BYTES &&
        data[0] === FrameFamily.CONTROL
      ) {
        if (data[1] === ControlKind.HELLO_ACK) return this.helloAcked(data);
        if (data[1] === ControlKind.ERROR) {
          let msg = "refused the hello";
          try {
            const e = decodePayload(data, ProtocolErrorSchema);
            msg = `${e.code}: ${e.message}`;
          } catch {
            // keep the generic message
          }
          return this.fail(msg);
        }
      }
      const c = this.opts.counters;
      const f = data[0]! & 15;
      c.fromUpstreamFrames[f]!++;
      c.fromUpstreamBytes[f]! += data.length;
      this.events.frame(this, data, isBinary);
    });
    ws.on("pong", () => liveness.heard());
    // An upstream that cannot read us (its own downstream is full) pings to say it is busy.
    ws.on("ping", () => liveness.heard());
    ws.on("error", (err) => this.fail(err.message));
    ws.on("close", (code, reason) =>
      this.fail(`connection closed (${code}${reason.length ? ` ${reason.toString()}` : ""})`),
    );
  }

  /** A WebSocket of this link's own. */
  private dial(): SessionSocket {
    const o = this.opts;
    return new WsSessionSocket(
      dialUpstream({
        url: o.url,
        secret: o.secret,
        caPem: o.caPem,
        serverName: o.serverName,
        maxPayload: o.maxPayloadBytes * 4 + HEADER_BYTES,
        connectTimeoutMs: o.connectTimeoutMs,
        unmasked: o.unmasked,
      }),
    );
  }

  private helloAcked(data: Buffer): void {
    let version = 0;
    try {
      version = decodePayload(data, HelloAckSchema).version;
    } catch {
      // handled below
    }
    if (version < PROTOCOL_VERSION_MIN || version > PROTOCOL_VERSION_MAX) {
      this.fail(`upstream answered hello with unsupported protocol version ${version}`);
      return;
    }
    const reconnected = this.upCount > 0;
    this.state = "open";
    this.upCount++;
    this.backoff.reset();
    this.lastError = "";
    const q = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    for (const buf of q) this.ws!.send(buf);
    this.events.up(this, reconnected);
  }

  /**
   * Sends a frame the caller will not modify afterwards (a broadcast passes the same
   * Buffer to every link: ws copies it while masking, or sends it as-is when unmasked).
   */
  send(buf: Buffer): Sent {
    const c = this.opts.counters;
    const f = buf[0]! & 15;
    if (this.state === "open") {
      const ws = this.ws!;
      if (ws.bufferedAmount > this.opts.limits.hardLimitBytes) return Sent.Rejected;
      ws.coalesce();
      ws.send(buf);
      c.toUpstreamFrames[f]!++;
      c.toUpstreamBytes[f]! += buf.length;
      return ws.bufferedAmount > this.opts.limits.highWaterBytes ? Sent.Congested : Sent.Ok;
    }
    if (this.state === "connecting" && this.upCount === 0) {
      if (this.queuedBytes + buf.length > this.opts.limits.hardLimitBytes) return Sent.Rejected;
      this.queue.push(buf);
      this.queuedBytes += buf.length;
      c.toUpstreamFrames[f]!++;
      c.toUpstreamBytes[f]! += buf.length;
      return this.queuedBytes > this.opts.limits.highWaterBytes ? Sent.Congested : Sent.Ok;
    }
    return Sent.Rejected;
  }

  pauseReading(): void {
    if (!this.readingPaused && this.ws) {
      this.readingPaused = true;
      this.ws.pause();
      this.liveness.pause();
    }
  }

  resumeReading(): void {
    if (this.readingPaused) {
      this.readingPaused = false;
      this.ws?.resume();
      this.liveness.resume();
    }
  }

  /**
   * Called by the router's coarse sweep: a WebSocket ping every `pingIntervalMs`; the
   * upstream is dead once nothing (a pong, a frame, its own ping, a drain of our writes)
   * came from it for two intervals while the router read it. While the router does not
   * read it (the client is congested), its pongs wait unread: that silence does not count,
   * up to 10× (lib/peer-liveness.ts).
   */
  sweep(now: number): void {
    if (this.state !== "open") return;
    if (this.liveness.expired(now)) {
      const paused = this.liveness.paused ? " while the router could not read it" : "";
      this.fail(
        `no WebSocket pong (nor any frame) within ${this.liveness.describeAllowedSilence()}${paused}`,
      );
      return;
    }
    if (now - this.lastPingAt < this.opts.pingIntervalMs) return;
    this.lastPingAt = now;
    this.ws!.ping();
  }

  /** Drops the connection and schedules a reconnect (the upstream is slow, silent or misbehaving). */
  fail(error: string): void {
    if (this.state === "closed" || this.state === "down") return;
    const ws = this.ws;
    this.ws = undefined;
    ws?.removeAllListeners();
    ws?.on("error", () => {});
    ws?.terminate();
    this.state = "down";
    this.lastError = error;
    this.readingPaused = false;
    const unsent = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    // Half of each delay is random ("equal jitter"): the sessions of an upstream that
    // vanished do not return in lockstep, and none waits longer than the policy's delay.
    const base = this.backoff.next();
    const retryInMs = Math.round(base / 2 + (Math.random() * base) / 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.opts.counters.reconnects++;
      this.connect();
    }, retryInMs);
    this.retryTimer.unref();
    this.opts.log.warn({ cluster: this.cluster, error, retryInMs }, "upstream link down");
    this.events.down(this, error, retryInMs, unsent);
  }

  /**
   * Closes for good. With `farewell`, the agent is first told the session ended (a Close
   * frame), so it drops the session's subscriptions at once; without, it sees a lost
   * connection and holds them for a while in case the session comes back elsewhere.
   */
  close(farewell?: string): void {
    if (this.state === "closed") return;
    if (farewell !== undefined && this.state === "open" && this.ws?.isOpen)
      this.ws.send(
        encodeFrame({ family: FrameFamily.CONTROL, kind: ControlKind.CLOSE }, CloseSchema, {
          reason: farewell,
        }),
      );
    this.state = "closed";
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const ws = this.ws;
    this.ws = undefined;
    this.queue = [];
    this.queuedBytes = 0;
    if (ws) {
      ws.removeAllListeners();
      ws.on("error", () => {});
      if (ws.isOpen) ws.close(1000, "session closed");
      else ws.terminate();
    }
  }
}
