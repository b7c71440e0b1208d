// The subscriptions a session holds, so an upstream that comes back (a reconnect, or an
// agent added to the route mid-session) is given them again. An upstream forgets a
// session's subscriptions when it loses the session; the client must not have to notice.
// Replays carry router-owned request ids (top bit set), so their results are consumed
// here and never mistaken for answers to the client's own requests.

/** Request ids the router originates have the top bit set; clients number from 1 upward. */
const INTERNAL_REQUEST_BIT = 0x80000000;
const MAX_INTERNAL_REQUEST = 0x7fffffff;

export class SubscriptionReplay<U> {
  /** Subscription id → the accepted MIRROR/STEAL frame. */
  private readonly accepted = new Map<number, Buffer>();
  /** Per upstream: request ids of replays whose result has not come back. */
  private readonly pending = new Map<U, Set<number>>();
  private nextRequest = 1;

  /** Subscriptions held. */
  get size(): number {
    return this.accepted.size;
  }

  has(subscriptionId: number): boolean {
    return this.accepted.has(subscriptionId);
  }

  /** Every upstream accepted `frame` (a MIRROR/STEAL request): replay it from now on. */
  accept(subscriptionId: number, frame: Buffer): void {
    // Copy: a received frame may be a view into a larger socket chunk that would stay alive with it.
    this.accepted.set(subscriptionId, Buffer.from(frame));
  }

  /** The client unsubscribed. */
  remove(subscriptionId: number): void {
    this.accepted.delete(subscriptionId);
  }

  /**
   * The frames to send to `upstream` now that it is up: copies of the accepted ones with
   * fresh router-owned request ids, each awaited by `consume`.
   */
  replayFor(upstream: U): Buffer[] {
    return [...this.accepted.values()].map((frame) => this.resend(upstream, frame));
  }

  /**
   * A copy of `frame` (a subscription change) for `upstream` alone, with a fresh router-owned
   * request id awaited by `consume`: for an upstream that came up while the change was in
   * flight, so neither its replay nor the broadcast carried it.
   */
  resend(upstream: U, frame: Buffer): Buffer {
    let waiting = this.pending.get(upstream);
    if (!waiting) this.pending.set(upstream, (waiting = new Set()));
    const copy = Buffer.from(frame);
    const requestId = (INTERNAL_REQUEST_BIT | this.nextRequest++) >>> 0;
    if (this.nextRequest > MAX_INTERNAL_REQUEST) this.nextRequest = 1;
    copy.writeUInt32BE(requestId, 4);
    waiting.add(requestId);
    return copy;
  }

  /** True when `requestId` answers a replay sent to `upstream` (the reply is then consumed). */
  consume(upstream: U, requestId: number): boolean {
    return this.pending.get(upstream)?.delete(requestId) ?? false;
  }

  /** `upstream` was lost or removed: results of replays sent to it will not come. */
  forget(upstream: U): void {
    this.pending.delete(upstream);
  }

  clear(): void {
    this.accepted.clear();
    this.pending.clear();
  }
}
