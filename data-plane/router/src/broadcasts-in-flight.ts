// The broadcasts of one session still waiting for answers, keyed by the client's request
// id. Each completes exactly once — when every upstream it waits for answered, gave up
// (lost or removed) or timed out on the router's coarse sweep — and is then handed to
// `finished`, which sends the one merged reply.
import { FrameFamily, HealthState, PingKind, SubscriptionKind } from "../../../proto/gen/session_pb.js";
import type { BroadcastMerge } from "./broadcast-merge.js";
import type { RouterMetrics } from "./router-metrics.js";
import type { UpstreamLink } from "./upstream-link.js";

export class BroadcastsInFlight {
  private readonly merges = new Map<number, BroadcastMerge>();

  constructor(
    /** A broadcast not fully answered after this is completed with TIMEOUT entries. Milliseconds. */
    private readonly mergeTimeoutMs: number,
    private readonly metrics: RouterMetrics,
    private readonly finished: (merge: BroadcastMerge) => void,
  ) {}

  get size(): number {
    return this.merges.size;
  }

  has(requestId: number): boolean {
    return this.merges.has(requestId);
  }

  get(requestId: number): BroadcastMerge | undefined {
    return this.merges.get(requestId);
  }

  add(merge: BroadcastMerge): void {
    this.merges.set(merge.requestId, merge);
  }

  /** Completes `merge`: it leaves the set and its reply goes out. */
  finish(merge: BroadcastMerge): void {
    this.merges.delete(merge.requestId);
    this.metrics.fanoutLatency.observe(
      { family: merge.family === FrameFamily.PING ? "ping" : "subscription" },
      (performance.now() - merge.startedAt) / 1000,
    );
    this.finished(merge);
  }

  /**
   * Records `answer` (a pong or a subscription result) from `link`; false when no
   * broadcast `requestId` waits for that kind of answer from `link`.
   */
  answer(link: UpstreamLink, requestId: number, answer: Buffer): boolean {
    const merge = this.merges.get(requestId);
    if (!merge || !merge.waiting.has(link)) return false;
    const expected = merge.family === FrameFamily.PING ? PingKind.PONG : SubscriptionKind.RESULT;
    if (answer[1] !== expected) return false;
    if (merge.answer(link, answer)) this.finish(merge);
    return true;
  }

  /** `link` will answer nothing more (lost or removed): it counts as DOWN everywhere it was awaited. */
  upstreamGone(link: UpstreamLink, error: string): void {
    for (const merge of [...this.merges.values()])
      if (merge.giveUp(link, HealthState.DOWN, error)) this.finish(merge);
  }

  /** The coarse sweep: completes broadcasts older than the merge timeout. */
  sweep(now: number): void {
    for (const merge of [...this.merges.values()]) {
      if (now - merge.startedMs < this.mergeTimeoutMs) continue;
      this.metrics.event("merge_timeout");
      for (const link of [...merge.waiting])
        merge.giveUp(link, HealthState.TIMEOUT, `no answer within ${this.mergeTimeoutMs} ms`);
      this.finish(merge);
    }
  }

  clear(): void {
    this.merges.clear();
  }
}
