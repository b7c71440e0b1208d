// Flow control between one session's WebSocket and the sockets it feeds, both ways,
// so a slow peer never makes the agent buffer without bound:
// - toward the peer: every data frame checks the WebSocket's bufferedAmount; above the
//   high-water mark the source (a TCP socket, a stolen client) is paused, and all paused
//   sources resume when the socket drains below the low-water mark. A peer whose queue
//   still passes the hard limit (replies are not pausable) is dropped as too slow.
// - from the peer: when a local socket's write buffer is full, reading the WebSocket
//   stops until that socket drains. The protocol has no per-stream windows, so this
//   blocks the session's other streams for that time — bounded memory over fairness.
//   The session's liveness is told (the peer's silence is no evidence while unread).
import type { Socket } from "node:net";
import type { WebSocket } from "ws";
import { coalesceWrites } from "../../../lib/coalesced-writes.js";
import type { PeerLiveness } from "../../../lib/peer-liveness.js";

export interface FlowLimits {
  /** Pause sources once this many bytes are queued toward the peer. Bytes; default 1 MiB. */
  highWaterBytes: number;
  /** Resume paused sources once the queue drained below this. Bytes; default 256 KiB. */
  lowWaterBytes: number;
  /** Drop a peer whose queue exceeds this. Bytes; default 16 MiB. */
  hardLimitBytes: number;
}

/** How long mirror copies may wait to leave together (see coalesceWrites). */
const MIRROR_FLUSH_MS = 2;

export const DEFAULT_FLOW_LIMITS: FlowLimits = {
  highWaterBytes: 1024 * 1024,
  lowWaterBytes: 256 * 1024,
  hardLimitBytes: 16 * 1024 * 1024,
};

export interface Pausable {
  pause(): void;
  resume(): void;
}

export class SessionFlow {
  private readonly paused = new Set<Pausable>();
  private blockedWrites = 0;
  private readingPaused = false;
  private dead = false;
  /** Largest bufferedAmount seen (for tests and the backpressure measurement). */
  maxBufferedBytes = 0;

  constructor(
    private readonly ws: WebSocket,
    private readonly raw: Socket,
    private readonly limits: FlowLimits,
    private readonly onTooSlow: () => void,
    private readonly onPause: () => void,
    /** Told when reading the peer stops and starts again. */
    private readonly liveness?: PeerLiveness,
  ) {
    raw.on("drain", () => this.drained());
  }

  /** Reading the peer is paused because a local writer is full. */
  get readingBlocked(): boolean {
    return this.readingPaused;
  }

  get bufferedBytes(): number {
    return this.ws.bufferedAmount;
  }

  get congested(): boolean {
    return this.ws.bufferedAmount > this.limits.highWaterBytes;
  }

  /**
   * Sends a frame; false when the peer's queue is now above the high-water mark. A `lazy`
   * frame (a mirror copy: nobody waits for it) may wait up to 2 ms to leave with others.
   */
  send(buf: Buffer, lazy = false): boolean {
    if (this.dead || this.ws.readyState !== this.ws.OPEN) return false;
    coalesceWrites(this.raw, lazy ? MIRROR_FLUSH_MS : undefined);
    this.ws.send(buf);
    const queued = this.ws.bufferedAmount;
    if (queued > this.maxBufferedBytes) this.maxBufferedBytes = queued;
    if (queued > this.limits.hardLimitBytes) {
      this.dead = true;
      this.onTooSlow();
      return false;
    }
    return queued <= this.limits.highWaterBytes;
  }

  /** Pauses `source` until the peer's queue drains below the low-water mark. */
  pauseSource(source: Pausable): void {
    if (this.paused.has(source)) return;
    this.paused.add(source);
    this.onPause();
    source.pause();
  }

  /** A source that ended no longer needs resuming. */
  forget(source: Pausable): void {
    this.paused.delete(source);
  }

  private drained(): void {
    if (this.paused.size === 0 || this.ws.bufferedAmount > this.limits.lowWaterBytes) return;
    const sources = [...this.paused];
    this.paused.clear();
    for (const s of sources) s.resume();
  }

  /**
   * A local writer refused more data: stop reading the peer until `wait` calls its
   * callback (the writer drained or closed). Extra calls of the callback are ignored.
   */
  blockUntil(wait: (release: () => void) => void): void {
    this.blockedWrites++;
    if (!this.readingPaused) {
      this.readingPaused = true;
      this.ws.pause();
      this.liveness?.pause();
    }
    let done = false;
    wait(() => {
      if (done) return;
      done = true;
      this.blockedWrites--;
      if (this.blockedWrites === 0 && this.readingPaused) {
        this.readingPaused = false;
        this.ws.resume();
        this.liveness?.resume();
      }
    });
  }

  /** Releases everything (the session ended). */
  close(): void {
    this.dead = true;
    this.paused.clear();
  }
}
