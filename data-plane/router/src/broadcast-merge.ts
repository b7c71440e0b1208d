// One in-flight broadcast (a ping or a subscription change) waiting for every live
// upstream's answer, and the single merged reply it turns into (DESIGN §5: one pong per
// ping with per-cluster health; one subscription result, success only when every live
// upstream agreed, otherwise an error naming the clusters).
import { create, toBinary } from "@bufbuild/protobuf";
import {
  FrameFamily,
  HealthState,
  PingKind,
  PongSchema,
  SubscriptionKind,
  SubscriptionResultSchema,
} from "../../../proto/gen/session_pb.js";
import {
  decodePayload,
  encodeFrame,
  encodeRaw,
  FLAG_ERROR,
  HEADER_BYTES,
} from "../../../proto/frame-codec.js";
import type { UpstreamLink } from "./upstream-link.js";

export interface UpstreamAnswer {
  cluster: string;
  state: HealthState;
  rttMicros: number;
  /** Refusal or failure text; empty when it agreed. */
  error: string;
}

export class BroadcastMerge {
  readonly startedAt = performance.now();
  readonly startedMs = Date.now();
  readonly waiting = new Set<UpstreamLink>();
  /**
   * Per upstream it was sent to: the count of that link's ups under which the request
   * reaches it (the current one when open; the next when queued before a first connect).
   */
  readonly reachedUp = new Map<UpstreamLink, number>();
  readonly answers: UpstreamAnswer[] = [];

  /**
   * @param request the client's frame (kept for its ping payload or, on success, to record
   *   the subscription); the router does not modify it after broadcasting.
   */
  constructor(
    readonly family: number,
    readonly kind: number,
    readonly requestId: number,
    readonly request: Buffer,
  ) {}

  /** Records `link`'s answer; returns true when nobody is left to wait for. */
  answer(link: UpstreamLink, reply: Buffer): boolean {
    if (!this.waiting.delete(link)) return false;
    const rttMicros = Math.round((performance.now() - this.startedAt) * 1000);
    let error = "";
    if ((reply[2]! & FLAG_ERROR) !== 0) {
      // Refusals are rare and small: decoding them here keeps the merged error precise.
      try {
        error = decodePayload(reply, SubscriptionResultSchema).error || "refused";
      } catch {
        error = "refused";
      }
    }
    this.answers.push({ cluster: link.cluster, state: HealthState.OK, rttMicros, error });
    return this.waiting.size === 0;
  }

  /** Records that `link` will not answer (down, removed, or timed out); true when done. */
  giveUp(link: UpstreamLink, state: HealthState, error: string): boolean {
    if (!this.waiting.delete(link)) return false;
    this.answers.push({ cluster: link.cluster, state, rttMicros: 0, error });
    return this.waiting.size === 0;
  }

  /** Records an upstream that was not live when the broadcast went out. */
  skipped(cluster: string, error: string): void {
    this.answers.push({ cluster, state: HealthState.DOWN, rttMicros: 0, error });
  }

  /** True for a subscription change that every answering upstream accepted. */
  get succeeded(): boolean {
    if (this.family !== FrameFamily.SUBSCRIPTION) return true;
    // Upstreams that are down do not vote: they get the subscription when they return.
    const answered = this.answers.filter((a) => a.state !== HealthState.DOWN);
    return answered.length > 0 && answered.every((a) => a.state === HealthState.OK && a.error === "");
  }

  /** The one reply for the client. */
  reply(): Buffer {
    const sorted = [...this.answers].sort((a, b) =>
      a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0,
    );
    if (this.family === FrameFamily.PING) {
      // Ping and Pong share field 1 (sent_at_micros): prefixing the client's ping payload
      // echoes it without decoding, and protobuf merges concatenated messages.
      const clusters = toBinary(PongSchema, create(PongSchema, { clusters: sorted }));
      const ping = this.request.subarray(HEADER_BYTES);
      const payload = Buffer.allocUnsafe(ping.length + clusters.length);
      payload.set(ping, 0);
      payload.set(clusters, ping.length);
      return encodeRaw({ family: FrameFamily.PING, kind: PingKind.PONG, requestId: this.requestId }, payload);
    }
    const subscriptionId = this.request.readUInt32BE(8);
    const header = {
      family: FrameFamily.SUBSCRIPTION,
      kind: SubscriptionKind.RESULT,
      requestId: this.requestId,
      connectionId: subscriptionId,
    };
    if (this.succeeded) return encodeFrame(header, SubscriptionResultSchema, { ok: true });
    const failed = sorted.filter(
      (a) => a.state !== HealthState.DOWN && !(a.state === HealthState.OK && a.error === ""),
    );
    const why = failed
      .map((a) => `${a.cluster}: ${a.error || HealthState[a.state]!.toLowerCase()}`)
      .join("; ");
    return encodeFrame({ ...header, flags: FLAG_ERROR }, SubscriptionResultSchema, {
      ok: false,
      error: failed.length > 0 ? `not accepted by every cluster (${why})` : "no upstream is connected",
      refusedClusters: failed.map((a) => a.cluster),
    });
  }
}
