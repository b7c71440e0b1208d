// The session's one live router connection: dials (Hello included) with the reconnect
// policy, hands every later frame to the session, sends frames with write coalescing and
// send-buffer backpressure, and when the socket drops dials the routers again —
// rotating through the URLs it was given, starting with the next one (the router it lost
// is likely the one that died). It owns the connection state; what was in flight on a
// dropped socket is the session's to fail (`dropped`), and a reconnect that gives up
// ends in `lost` exactly once.
// Liveness: a WebSocket ping every quarter of `livenessTimeoutMs`; a router from which
// nothing came (no frame, ping, pong, nor a drain of our writes) for that long while we
// read it is dead: the socket is dropped and the routers dialled again. While the session
// holds reading (a local program is slow), the router's answers wait unread: that silence
// does not count, up to 10× (lib/peer-liveness.ts), and the pings tell the router that we
// are busy, not dead.
import type { Socket } from "node:net";
import type WebSocket from "ws";
import { PeerLiveness } from "../../../../lib/peer-liveness.js";
import * as pb from "../../../../proto/gen/session_pb.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import { coalesceWrites } from "../../../../lib/coalesced-writes.js";
import { CliError, CliErrorCode, hasCliCode } from "../cli-errors.js";
import type { FrameSink, InboundHold } from "./frame-sink.js";
import {
  connectWithBackoff,
  reconnectWithBackoff,
  type ReconnectPolicy,
  type RetryInfo,
} from "./reconnect-policy.js";
import { dialRouter, isFatalDialError, type DialedRouter, type DialOptions } from "./router-dial.js";

const EMPTY = Buffer.alloc(0);

export type ConnectionState = "idle" | "open" | "reconnecting" | "lost" | "closed";

export interface RouterConnectionOptions {
  sessionId: string;
  secret: string;
  /** Session URLs, in the order the first connect tries them. */
  urls: string[];
  policy: ReconnectPolicy;
  dial: DialOptions;
  /** How long the first connect keeps retrying, ms. */
  connectTimeoutMs: number;
  /** How long the first connect retries a 404 (route not pushed yet), ms. */
  notFoundGraceMs: number;
  /** Send buffer size above which writers wait, bytes. */
  highWaterBytes: number;
  /** A router silent this long while we read it is dropped, ms; 0 turns liveness off. */
  livenessTimeoutMs: number;
}

/** What the connection tells the session. */
export interface RouterConnectionHandlers {
  /** A frame after the Hello exchange. */
  frame(data: Buffer): void;
  /** Everything in flight must fail with `err`: the socket dropped, or the session was closed or lost. */
  dropped(err: CliError): void;
  reconnecting(info: { attempt: number; delayMs: number; error: string }): void;
  /** Reading the router stopped (true) or started again (false): replies wait unread meanwhile. */
  inboundHeld(held: boolean): void;
  /** Connected again (state is open); the session re-subscribes. */
  reconnected(url: string): void;
  lost(err: CliError): void;
}

export class RouterConnection implements FrameSink, InboundHold {
  #state: ConnectionState = "idle";
  #ws: WebSocket | undefined;
  #socket: Socket | undefined;
  #url = "";
  #urlIndex = 0;
  #lostError: CliError | undefined;
  #writableWaiters: Array<() => void> = [];
  /** Holds on reading the current socket (holdInbound). */
  #holds = 0;
  /** The current socket's router, and the sweep that pings it and checks it. */
  #liveness: PeerLiveness | undefined;
  #livenessTimer: NodeJS.Timeout | undefined;
  /** Why the socket was dropped when the router went silent. */
  #silenceReason: string | undefined;
  /** Aborts a reconnect's wait when the session is closed meanwhile. */
  readonly #closing = new AbortController();

  constructor(
    private readonly o: RouterConnectionOptions,
    private readonly on: RouterConnectionHandlers,
  ) {}

  get state(): ConnectionState {
    return this.#state;
  }

  get url(): string {
    return this.#url;
  }

  get lostError(): CliError | undefined {
    return this.#lostError;
  }

  /**
   * Connects. Routers answering 503 (session still being set up) or not reachable are
   * retried until connectTimeoutMs; 404/401 fail at once, except a 404 within
   * notFoundGraceMs of the start.
   */
  async connect(signal?: AbortSignal): Promise<void> {
    if (this.#state !== "idle")
      throw new CliError(CliErrorCode.INVALID_OPTION, "connect() was already called");
    const { urls } = this.o;
    const started = Date.now();
    await connectWithBackoff(this.o.policy, {
      timeoutMs: this.o.connectTimeoutMs,
      ...(signal ? { signal } : {}),
      attempt: async (n) => {
        const d = await dialRouter(urls[n % urls.length]!, this.o.secret, this.o.dial);
        this.#attach(d, urls[n % urls.length]!, n % urls.length);
      },
      // A session that just became Ready may not have reached every router's table yet:
      // a 404 right after creation is retried for a short while, later it is final.
      isFatal: (err) =>
        isFatalDialError(err) &&
        !(hasCliCode(err, CliErrorCode.SESSION_NOT_FOUND) && Date.now() - started < this.o.notFoundGraceMs),
      giveUp: (lastError) =>
        new CliError(
          CliErrorCode.ROUTER_UNAVAILABLE,
          `could not connect to session ${this.o.sessionId} within ${Math.round(this.o.connectTimeoutMs / 1000)} s: ` +
            `${(lastError as Error)?.message ?? "no router answered"}. Check the router endpoint (--router) and \`switchyard status\`.`,
          { cause: lastError },
        ),
    });
  }

  /** Says goodbye to the router and ends the connection for good. */
  close(reason: string): void {
    if (this.#state === "closed") return;
    const ws = this.#ws;
    if (ws && ws.readyState === ws.OPEN) {
      ws.send(
        encodeFrame({ family: pb.FrameFamily.CONTROL, kind: pb.ControlKind.CLOSE }, pb.CloseSchema, {
          reason,
        }),
      );
      ws.close(1000, "client closed");
    }
    this.#state = "closed";
    this.#closing.abort();
    this.#unwatch();
    this.on.dropped(new CliError(CliErrorCode.CLOSED, "the session client was closed"));
  }

  /** The error a request gets while there is no open connection. */
  notConnected(): CliError {
    if (this.#state === "lost" && this.#lostError) return this.#lostError;
    return new CliError(
      CliErrorCode.DISCONNECTED,
      this.#state === "reconnecting"
        ? `session ${this.o.sessionId} is reconnecting to a router; retry in a moment`
        : `session ${this.o.sessionId} is not connected`,
    );
  }

  // ---- FrameSink ----

  send(frame: Buffer): boolean {
    const ws = this.#ws;
    if (this.#state !== "open" || !ws || ws.readyState !== ws.OPEN) return false;
    coalesceWrites(this.#socket);
    // No callback per frame (a closure and a completion call each): writers that wait
    // are checked again once the queue reached the kernel (whenWritable).
    ws.send(frame);
    return true;
  }

  whenWritable(cb: () => void): void {
    const ws = this.#ws;
    if (!ws || ws.bufferedAmount < this.o.highWaterBytes) return cb();
    this.#writableWaiters.push(cb);
    if (this.#writableWaiters.length === 1) this.#checkWhenFlushed();
  }

  /**
   * Checks the waiting writers again once everything queued so far reached the kernel: an
   * empty write's callback comes after every earlier write's. Without a socket, the next
   * reconnect or close releases them (releaseWriters).
   */
  #checkWhenFlushed(): void {
    const socket = this.#socket;
    if (socket && !socket.destroyed) socket.write(EMPTY, () => this.#flushWritable());
  }

  holdInbound(until: (release: () => void) => void): void {
    const ws = this.#ws;
    if (!ws) return until(() => {});
    if (this.#holds++ === 0) {
      ws.pause();
      this.#liveness?.pause();
      this.on.inboundHeld(true);
    }
    let released = false;
    until(() => {
      if (released) return;
      released = true;
      // A hold of a socket that is gone ended with it.
      if (this.#ws === ws && --this.#holds === 0) {
        ws.resume();
        this.#liveness?.resume();
        this.on.inboundHeld(false);
      }
    });
  }

  /** Releases every writer waiting for buffer space (after in-flight work failed). */
  releaseWriters(): void {
    for (const cb of this.#writableWaiters.splice(0)) cb();
  }

  #flushWritable(): void {
    if (this.#writableWaiters.length === 0) return;
    if ((this.#ws?.bufferedAmount ?? 0) >= this.o.highWaterBytes) return this.#checkWhenFlushed();
    this.releaseWriters();
  }

  // ---- the socket ----

  #attach(d: DialedRouter, url: string, index: number): void {
    this.#ws = d.ws;
    this.#holds = 0;
    this.#socket = d.socket;
    this.#url = url;
    this.#urlIndex = index;
    this.#state = "open";
    const ws = d.ws;
    ws.on("error", () => {
      // 'close' follows and drives the reconnect.
    });
    ws.on("close", () => {
      if (this.#ws === ws) this.#onDisconnect();
    });
    const liveness = this.#watch(d);
    d.takeOver((data) => {
      liveness?.heard();
      this.on.frame(data);
    });
  }

  /** Starts the liveness sweep of a new socket (none when liveness is off). */
  #watch(d: DialedRouter): PeerLiveness | undefined {
    this.#unwatch();
    const timeoutMs = this.o.livenessTimeoutMs;
    if (timeoutMs <= 0) return undefined;
    const { ws } = d;
    const liveness = new PeerLiveness(timeoutMs);
    this.#liveness = liveness;
    ws.on("ping", () => liveness.heard());
    ws.on("pong", () => liveness.heard());
    // Our bytes moved on: the router reads them, so it lives.
    d.socket?.on("drain", () => liveness.heard());
    // A quarter of the timeout: the router hears us in time, and its pongs (which wait
    // while it cannot write to us) stay far below the 60 pending at which ws drops us.
    this.#livenessTimer = setInterval(() => {
      if (this.#ws !== ws || ws.readyState !== ws.OPEN) return;
      if (!liveness.expired()) return ws.ping();
      const unread = liveness.paused ? " while this session could not read it" : "";
      this.#silenceReason = `router ${this.#url} sent nothing (no frame, no pong) for ${liveness.describeAllowedSilence()}${unread}`;
      ws.terminate();
    }, timeoutMs / 4);
    this.#livenessTimer.unref();
    return liveness;
  }

  #unwatch(): void {
    clearInterval(this.#livenessTimer);
    this.#livenessTimer = undefined;
    this.#liveness = undefined;
  }

  #onDisconnect(): void {
    if (this.#state !== "open") return;
    this.#state = "reconnecting";
    this.#ws = undefined;
    this.#unwatch();
    if (this.#holds > 0) {
      this.#holds = 0;
      this.on.inboundHeld(false);
    }
    const why = this.#silenceReason ?? `the connection to router ${this.#url} was lost`;
    this.#silenceReason = undefined;
    this.on.dropped(new CliError(CliErrorCode.DISCONNECTED, `${why}; reconnecting`));
    const { urls } = this.o;
    reconnectWithBackoff(this.o.policy, {
      signal: this.#closing.signal,
      attempt: async (n) => {
        const index = (this.#urlIndex + 1 + n) % urls.length;
        const d = await dialRouter(urls[index]!, this.o.secret, this.o.dial);
        if (this.#state !== "reconnecting") {
          d.ws.terminate();
          throw new CliError(CliErrorCode.CLOSED, "closed while reconnecting");
        }
        this.#attach(d, urls[index]!, index);
      },
      isFatal: (err) => isFatalDialError(err) || hasCliCode(err, CliErrorCode.CLOSED),
      onRetry: ({ attempt, delayMs, error }: RetryInfo) =>
        this.on.reconnecting({
          attempt: attempt + 1,
          delayMs,
          error: (error as Error | undefined)?.message ?? "connection lost",
        }),
    }).then(
      () => this.on.reconnected(this.#url),
      (err: unknown) => {
        if (this.#state === "closed") return;
        const gone = hasCliCode(err, CliErrorCode.SESSION_NOT_FOUND);
        this.#lose(
          new CliError(
            CliErrorCode.SESSION_LOST,
            gone
              ? `session ${this.o.sessionId} is gone: ${(err as Error).message}`
              : `lost session ${this.o.sessionId}: no router could be reached after ${this.o.policy.maxAttempts} attempts (last error: ${(err as Error)?.message ?? "unknown"})`,
            { cause: err },
          ),
        );
      },
    );
  }

  #lose(err: CliError): void {
    if (this.#state === "lost" || this.#state === "closed") return;
    this.#state = "lost";
    this.#lostError = err;
    this.on.dropped(err);
    this.on.lost(err);
  }
}
