// Whether the peer at the other end of one socket still lives, judged only on the time we
// were listening to it. Anything the peer sends (a frame, a WebSocket ping or pong) is
// proof of life. While we ourselves have paused reading — our own downstream is slow and
// backpressure stopped the socket — whatever the peer sends sits unread in our socket, so
// its silence then is no evidence of death: the deadline is suspended, and it restarts
// when reading resumes (a dead peer is then found within the timeout, once the backlog is
// read). A peer that stays silent while we stay paused is still given up after
// PAUSED_SILENCE_FACTOR times the timeout, so a dead peer never holds resources forever.
// The caller owns the clock (its coarse sweep), which keeps this free of timers; `heard`
// only sets a flag (it runs for every frame), and the next look at the clock dates it, so
// a peer is judged at most one sweep late.

/** How many timeouts a peer may stay silent while we do not read it. */
export const PAUSED_SILENCE_FACTOR = 10;

export class PeerLiveness {
  #heardAt: number;
  /** Something arrived since the clock was last read. */
  #heardSinceCheck = false;
  #pausedAt: number | undefined;

  /** `timeoutMs`: how long the peer may stay silent while we read it, ms. */
  constructor(
    readonly timeoutMs: number,
    now = Date.now(),
  ) {
    this.#heardAt = now;
  }

  /** The peer showed it lives (anything arrived from it). Cheap enough for every frame. */
  heard(): void {
    this.#heardSinceCheck = true;
  }

  /** We stopped reading the peer (backpressure); extra calls are ignored. */
  pause(now = Date.now()): void {
    this.#settle(now);
    this.#pausedAt ??= now;
  }

  /** We read the peer again: its deadline restarts now. */
  resume(now = Date.now()): void {
    if (this.#pausedAt === undefined) return;
    this.#pausedAt = undefined;
    this.#heardSinceCheck = true;
    this.#settle(now);
  }

  get paused(): boolean {
    return this.#pausedAt !== undefined;
  }

  /** How long the peer may stay silent right now, ms: the timeout, or the ceiling while paused. */
  get allowedSilenceMs(): number {
    return this.#pausedAt === undefined ? this.timeoutMs : this.timeoutMs * PAUSED_SILENCE_FACTOR;
  }

  /** `allowedSilenceMs` for a message: "60 s", or "300 ms" below 10 s. */
  describeAllowedSilence(): string {
    const ms = this.allowedSilenceMs;
    return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms)} ms`;
  }

  /** True once the peer has been silent longer than it may be. */
  expired(now = Date.now()): boolean {
    this.#settle(now);
    return now - this.#heardAt > this.allowedSilenceMs;
  }

  /** Dates what was heard since the clock was last read. */
  #settle(now: number): void {
    if (!this.#heardSinceCheck) return;
    this.#heardSinceCheck = false;
    if (now > this.#heardAt) this.#heardAt = now;
  }
}
