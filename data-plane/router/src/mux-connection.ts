// One multiplexed connection between a Primary router (the dialer) and a member gateway
// router (proto/mux.proto): the channels it carries, channel 0's control messages, the
// connection's own liveness (WebSocket pings; a pong answers every channel that asked) and
// its end, which ends every channel as a lost WebSocket would. Writes of all channels
// within one I/O phase leave in one write (lib/coalesced-writes.ts).
import type { Socket } from "node:net";
import type { Logger } from "pino";
import WebSocket from "ws";
import { coalesceWrites } from "../../../lib/coalesced-writes.js";
import { PeerLiveness } from "../../../lib/peer-liveness.js";
import type { MuxOpen } from "../../../proto/gen/mux_pb.js";
import {
  channelMessage,
  CHANNEL_PREFIX_BYTES,
  closeMessage,
  decodeControl,
  messageChannel,
  MuxControlType,
  MuxProtocolError,
  openMessage,
  refusedMessage,
  windowMessage,
} from "../../../proto/mux-protocol.js";
import type { Refusal } from "../../../proto/session-endpoint.js";
import { MuxChannel, type ChannelTransport } from "./mux-channel.js";

/** A connection whose unsent bytes pass this (credit bounds every channel) is not read: dropped. */
const CONNECTION_HARD_LIMIT_BYTES = 64 * 1024 * 1024;

export interface MuxConnectionOptions {
  side: "dialer" | "gateway";
  /** WebSocket ping period; a peer silent for two of them is dropped. Milliseconds. */
  pingIntervalMs: number;
  /** A connection without channels for this long is closed. Milliseconds. */
  idleCloseMs: number;
  log: Logger;
  /**
   * Gateway: a channel the dialer opened. Attach it to its session and return undefined,
   * or return why not (the refusal a /v1/sessions/{id} upgrade would have had).
   */
  accept?: (open: MuxOpen, channel: MuxChannel) => Refusal | undefined;
  /** The connection ended (every channel has ended with it). */
  onClosed?: (c: MuxConnection) => void;
}

export class MuxConnection implements ChannelTransport {
  private readonly channels = new Map<number, MuxChannel>();
  /** Dialer: secrets of channels whose OPEN waits for the connection. */
  private readonly secrets = new Map<number, string>();
  private raw: Socket | undefined;
  private readonly liveness: PeerLiveness;
  private readonly pongWaiters = new Set<MuxChannel>();
  private pingOutstanding = false;
  private lastPingAt = Date.now();
  private idleSince = Date.now();
  private nextChannel = 1;
  private lastOpened = 0;
  private readonly timer: NodeJS.Timeout;
  closed = false;
  /** Frames that arrived on a channel no longer open (closed or refused meanwhile). */
  droppedFrames = 0;

  constructor(
    readonly ws: WebSocket,
    raw: Socket | undefined,
    private readonly opts: MuxConnectionOptions,
  ) {
    this.liveness = new PeerLiveness(2 * opts.pingIntervalMs);
    if (raw) this.useRaw(raw);
    else ws.on("upgrade", (res) => this.useRaw(res.socket as Socket));
    ws.on("open", () => this.opened());
    ws.on("message", (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    ws.on("pong", () => this.onPong());
    ws.on("ping", () => this.liveness.heard());
    ws.on("error", (err) => this.end(err.message));
    ws.on("close", (code, reason) =>
      this.end(`connection closed (${code}${reason.length ? ` ${reason.toString()}` : ""})`),
    );
    this.timer = setInterval(() => this.tick(), Math.min(1000, opts.pingIntervalMs / 4));
    this.timer.unref();
  }

  private useRaw(raw: Socket): void {
    this.raw = raw;
    raw.on("drain", () => this.liveness.heard());
  }

  get ready(): boolean {
    return !this.closed && this.ws.readyState === WebSocket.OPEN;
  }

  get channelCount(): number {
    return this.channels.size;
  }

  /** Dialer: a channel for `sessionId`; its frames may be sent once it emits `open`. */
  open(sessionId: string, secret: string): MuxChannel {
    const id = this.nextChannel++;
    const channel = new MuxChannel(id, sessionId, this);
    if (this.closed) {
      channel.end(1006, "gateway connection lost", new Error("gateway connection lost"));
      return channel;
    }
    this.channels.set(id, channel);
    // The secret travels only inside the (TLS) connection, never in a log.
    this.secrets.set(id, secret);
    if (this.ready) this.sendOpen(channel);
    return channel;
  }

  private sendOpen(channel: MuxChannel): void {
    this.ws.send(
      openMessage({
        channel: channel.id,
        sessionId: channel.sessionId,
        secret: this.secrets.get(channel.id) ?? "",
      }),
    );
    this.secrets.delete(channel.id);
    channel.markOpen();
    channel.flushOutbox();
  }

  private opened(): void {
    this.liveness.heard();
    this.coalesce();
    for (const c of this.channels.values()) this.sendOpen(c);
  }

  // ------------------------------------------------------------ ChannelTransport

  write(channel: number, frame: Buffer): void {
    if (!this.ready) return;
    if (this.ws.bufferedAmount > CONNECTION_HARD_LIMIT_BYTES) {
      this.fail(`the peer did not read ${CONNECTION_HARD_LIMIT_BYTES} queued bytes`);
      return;
    }
    coalesceWrites(this.raw);
    this.ws.send(channelMessage(channel, frame));
  }

  credit(channel: number, bytes: number): void {
    if (!this.ready) return;
    coalesceWrites(this.raw);
    this.ws.send(windowMessage(channel, bytes));
  }

  closeChannel(channel: number, code: number, reason: string): void {
    const c = this.channels.get(channel);
    if (!c) return;
    this.forget(c);
    if (this.ready) {
      coalesceWrites(this.raw);
      this.ws.send(closeMessage({ channel, code, reason: reason.slice(0, 120) }));
    }
  }

  pingFor(channel: MuxChannel): void {
    this.pongWaiters.add(channel);
    if (this.pingOutstanding || !this.ready) return;
    this.pingOutstanding = true;
    this.lastPingAt = Date.now();
    this.ws.ping();
  }

  coalesce(): void {
    coalesceWrites(this.raw);
  }

  // ------------------------------------------------------------ what arrives

  private onMessage(data: Buffer, isBinary: boolean): void {
    this.liveness.heard();
    if (!isBinary) return this.protocolError("a text message; every message is binary");
    try {
      const id = messageChannel(data);
      if (id !== 0) {
        const c = this.channels.get(id);
        if (c) c.deliver(data.subarray(CHANNEL_PREFIX_BYTES));
        else this.droppedFrames++;
        return;
      }
      this.control(data);
    } catch (err) {
      if (err instanceof MuxProtocolError) return this.protocolError(err.message);
      throw err;
    }
  }

  private control(data: Buffer): void {
    const ctl = decodeControl(data);
    switch (ctl.type) {
      case MuxControlType.OPEN:
        return this.peerOpened(ctl.msg);
      case MuxControlType.REFUSED: {
        if (this.opts.side !== "dialer") throw new MuxProtocolError("REFUSED sent to a gateway");
        const c = this.channels.get(ctl.msg.channel);
        if (!c) return;
        this.forget(c);
        const why = `${ctl.msg.status} ${ctl.msg.code}: ${ctl.msg.message}`;
        return c.end(1008, why, new Error(`gateway refused the session: ${why}`));
      }
      case MuxControlType.CLOSE: {
        const c = this.channels.get(ctl.msg.channel);
        if (!c) return;
        this.forget(c);
        return c.end(ctl.msg.code, ctl.msg.reason);
      }
      case MuxControlType.WINDOW:
        return this.channels.get(ctl.msg.channel)?.credited(ctl.msg.bytes);
    }
  }

  private peerOpened(open: MuxOpen): void {
    if (this.opts.side !== "gateway" || !this.opts.accept)
      throw new MuxProtocolError("OPEN sent to a dialer");
    if (open.channel <= this.lastOpened)
      throw new MuxProtocolError(`channel ${open.channel} opened after ${this.lastOpened}: ids must grow`);
    this.lastOpened = open.channel;
    const channel = new MuxChannel(open.channel, open.sessionId, this);
    channel.markOpen();
    this.channels.set(open.channel, channel);
    const refusal = this.opts.accept(open, channel);
    if (!refusal) return;
    this.forget(channel);
    channel.end(1008, refusal.message);
    this.coalesce();
    this.ws.send(
      refusedMessage({
        channel: open.channel,
        status: refusal.status,
        code: refusal.code,
        message: refusal.message,
        retryAfterMs: refusal.retryAfterMs ?? 0,
      }),
    );
  }

  private onPong(): void {
    this.liveness.heard();
    this.pingOutstanding = false;
    const waiting = [...this.pongWaiters];
    this.pongWaiters.clear();
    for (const c of waiting) c.emit("pong");
  }

  private forget(c: MuxChannel): void {
    this.channels.delete(c.id);
    this.secrets.delete(c.id);
    this.pongWaiters.delete(c);
    if (this.channels.size === 0) this.idleSince = Date.now();
  }

  // ------------------------------------------------------------ the connection's end

  private tick(): void {
    if (this.closed) return;
    const now = Date.now();
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (this.liveness.expired(now))
      return this.fail(
        `no WebSocket pong (nor any message) within ${this.liveness.describeAllowedSilence()}`,
      );
    if (this.channels.size === 0 && now - this.idleSince >= this.opts.idleCloseMs)
      return this.close(1000, "idle");
    if (now - this.lastPingAt >= this.opts.pingIntervalMs) {
      this.lastPingAt = now;
      this.pingOutstanding = true;
      this.ws.ping();
    }
  }

  private protocolError(message: string): void {
    this.opts.log.warn({ side: this.opts.side, error: message }, "multiplexed connection: protocol error");
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1002, message.slice(0, 120));
    this.end(`protocol error: ${message}`);
  }

  /** Drops the connection: every channel ends as a lost WebSocket. */
  fail(reason: string): void {
    this.ws.terminate();
    this.end(reason);
  }

  /** Closes for good (router shutdown). */
  close(code: number, reason: string): void {
    if (this.closed) return;
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(code, reason);
    else this.ws.terminate();
    this.end(reason);
  }

  private end(reason: string): void {
    const first = !this.closed;
    this.closed = true;
    clearInterval(this.timer);
    const channels = [...this.channels.values()];
    this.channels.clear();
    this.secrets.clear();
    this.pongWaiters.clear();
    for (const c of channels)
      c.end(1006, `gateway connection lost: ${reason}`, new Error(`gateway connection lost: ${reason}`));
    if (first) {
      this.ws.removeAllListeners();
      this.ws.on("error", () => {});
      if (this.opts.side === "dialer" || channels.length > 0)
        this.opts.log.info(
          { side: this.opts.side, channels: channels.length, reason },
          "multiplexed connection ended",
        );
      this.opts.onClosed?.(this);
    }
  }
}
