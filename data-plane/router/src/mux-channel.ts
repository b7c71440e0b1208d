// One session's channel on a multiplexed gateway connection (proto/mux.proto), as a
// SessionSocket: the session, its flow control and its upstream link use it exactly as a
// WebSocket of their own.
//
// Flow control is per channel and credit-based: at most MUX_INITIAL_WINDOW_BYTES of this
// channel's frames are in flight uncredited; beyond that frames wait here (`bufferedAmount`,
// which the session's high-water marks act on, as on a WebSocket's queue). The receiving
// side credits what it handed on, and stops crediting while the session paused this
// channel (its destination is congested): what still arrives waits here, at most one
// window. One slow session therefore stops only its own sender; the shared connection is
// never paused for it.
import { EventEmitter } from "node:events";
import { MUX_INITIAL_WINDOW_BYTES } from "../../../proto/mux-protocol.js";
import type { SessionSocket } from "./session-socket.js";

/** What a channel needs from its connection. */
export interface ChannelTransport {
  /** Writes a session frame on `channel` (prefix added by the transport). */
  write(channel: number, frame: Buffer): void;
  /** Credits the peer `bytes` more on `channel`. */
  credit(channel: number, bytes: number): void;
  /** Ends `channel` on the peer's side too and forgets it. */
  closeChannel(channel: number, code: number, reason: string): void;
  /** Asks for a connection-level pong on behalf of `channel`. */
  pingFor(channel: MuxChannel): void;
  coalesce(): void;
  /** The connection carries frames (dialer: the WebSocket is open). */
  readonly ready: boolean;
}

/** Credit is returned once this much was handed on (a quarter window: few WINDOW messages). */
const CREDIT_BATCH_BYTES = MUX_INITIAL_WINDOW_BYTES / 4;

export class MuxChannel extends EventEmitter implements SessionSocket {
  private sendCredit = MUX_INITIAL_WINDOW_BYTES;
  private readonly outbox: Buffer[] = [];
  private outboxBytes = 0;
  private readonly inbox: Buffer[] = [];
  private paused = false;
  private delivering = false;
  private consumed = 0;
  private ended = false;
  /** Set once the connection carries frames; `open` is emitted then. */
  private opened = false;

  constructor(
    readonly id: number,
    readonly sessionId: string,
    private readonly transport: ChannelTransport,
  ) {
    super();
  }

  get bufferedAmount(): number {
    return this.outboxBytes;
  }

  get isOpen(): boolean {
    return this.opened && !this.ended;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** The connection is up: frames may flow (emits `open` once). */
  markOpen(): void {
    if (this.opened || this.ended) return;
    this.opened = true;
    // Next tick: whoever asked for the channel has attached its listeners by then.
    process.nextTick(() => {
      if (!this.ended) this.emit("open");
    });
  }

  send(frame: Buffer): void {
    if (this.ended) return;
    if (this.outboxBytes === 0 && this.sendCredit > 0 && this.transport.ready) {
      this.sendCredit -= frame.length;
      this.transport.write(this.id, frame);
      return;
    }
    this.outbox.push(frame);
    this.outboxBytes += frame.length;
  }

  /** The peer credited `bytes`: frames waiting for credit leave; `drain` tells the session. */
  credited(bytes: number): void {
    if (this.ended) return;
    this.sendCredit += bytes;
    this.flushOutbox();
    this.emit("drain");
  }

  /** Sends what waits, as far as credit goes (also once the connection came up). */
  flushOutbox(): void {
    if (!this.transport.ready) return;
    while (this.outbox.length > 0 && this.sendCredit > 0) {
      const frame = this.outbox.shift()!;
      this.outboxBytes -= frame.length;
      this.sendCredit -= frame.length;
      this.transport.write(this.id, frame);
    }
  }

  /** A frame arrived on this channel (without its prefix). */
  deliver(frame: Buffer): void {
    if (this.ended) return;
    if (this.paused || this.delivering) {
      this.inbox.push(frame);
      if (!this.paused) this.drainInbox();
      return;
    }
    this.handOn(frame);
  }

  private handOn(frame: Buffer): void {
    this.consumed += frame.length;
    this.emit("message", frame, true);
    if (!this.paused && this.consumed >= CREDIT_BATCH_BYTES && !this.ended) {
      this.transport.credit(this.id, this.consumed);
      this.consumed = 0;
    }
  }

  private drainInbox(): void {
    if (this.delivering) return;
    this.delivering = true;
    try {
      while (!this.paused && !this.ended && this.inbox.length > 0) this.handOn(this.inbox.shift()!);
    } finally {
      this.delivering = false;
    }
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.drainInbox();
  }

  ping(): void {
    if (!this.ended) this.transport.pingFor(this);
  }

  coalesce(): void {
    this.transport.coalesce();
  }

  close(code: number, reason: string): void {
    if (this.ended) return;
    this.transport.closeChannel(this.id, code, reason);
    this.end(code, reason);
  }

  terminate(): void {
    this.close(1006, "terminated");
  }

  /**
   * The channel is over (closed by either side, refused, or its connection lost): queues
   * are dropped and `close` follows on the next tick, as a WebSocket's would.
   */
  end(code: number, reason: string, error?: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.outbox.length = 0;
    this.outboxBytes = 0;
    this.inbox.length = 0;
    process.nextTick(() => {
      if (error && this.listenerCount("error") > 0) this.emit("error", error);
      this.emit("close", code, Buffer.from(reason));
    });
  }
}
