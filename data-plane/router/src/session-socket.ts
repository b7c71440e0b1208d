// What a session's peer socket is to the router: the client's side or one upstream's side of
// one session. Either a WebSocket of its own (`WsSessionSocket`) or a channel of a
// multiplexed gateway connection (`MuxChannel`, mux-connection.ts); the session, its flow
// control and its upstream links see the same events either way.
import type { Socket } from "node:net";
import WebSocket from "ws";
import { coalesceWrites } from "../../../lib/coalesced-writes.js";

export interface SessionSocket {
  /** Bytes written and not yet handed to the peer's transport (queued, or awaiting credit). */
  readonly bufferedAmount: number;
  /** Frames may be sent. */
  readonly isOpen: boolean;
  send(frame: Buffer): void;
  /** Stops delivering `message` events until `resume` (the peer is held back). */
  pause(): void;
  resume(): void;
  /** Asks the peer for a sign of life; answered by a `pong` event. */
  ping(): void;
  close(code: number, reason: string): void;
  terminate(): void;
  /** Writes until the end of this I/O phase leave together (lib/coalesced-writes.ts). */
  coalesce(): void;
  on(event: "open" | "ping" | "pong" | "drain", listener: () => void): this;
  on(event: "message", listener: (data: Buffer, isBinary: boolean) => void): this;
  on(event: "close", listener: (code: number, reason: Buffer) => void): this;
  on(event: "error", listener: (err: Error) => void): this;
  removeAllListeners(): this;
}

/** A session peer on a WebSocket of its own; `drain` is the raw socket's (our bytes moved on). */
export class WsSessionSocket implements SessionSocket {
  private raw: Socket | undefined;
  private readonly drainListeners: (() => void)[] = [];
  private readonly onRawDrain = (): void => {
    for (const l of this.drainListeners) l();
  };

  constructor(
    readonly ws: WebSocket,
    raw?: Socket,
  ) {
    if (raw) this.useRaw(raw);
    // A dialled WebSocket gets its socket with the upgrade answer.
    else ws.on("upgrade", (res) => this.useRaw(res.socket as Socket));
  }

  private useRaw(raw: Socket): void {
    this.raw = raw;
    raw.on("drain", this.onRawDrain);
  }

  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  send(frame: Buffer): void {
    this.ws.send(frame);
  }

  pause(): void {
    this.ws.pause();
  }

  resume(): void {
    this.ws.resume();
  }

  ping(): void {
    this.ws.ping();
  }

  close(code: number, reason: string): void {
    this.ws.close(code, reason);
  }

  terminate(): void {
    this.ws.terminate();
  }

  coalesce(): void {
    coalesceWrites(this.raw);
  }

  on(event: string, listener: (...args: never[]) => void): this {
    if (event === "drain") this.drainListeners.push(listener as () => void);
    else this.ws.on(event, listener as (...args: unknown[]) => void);
    return this;
  }

  removeAllListeners(): this {
    this.ws.removeAllListeners();
    this.drainListeners.length = 0;
    this.raw?.off("drain", this.onRawDrain);
    return this;
  }
}
