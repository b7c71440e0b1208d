// Bounded memory for one session (README "Bounded memory"): every socket that queues past
// its high-water mark stops the socket that feeds it, and one past its hard limit is
// dropped. Upstream congested → stop reading the client (TCP backpressure to the client);
// client congested → stop reading the upstream that wrote. Reading resumes once the
// congested side drained. Only this session's sockets are paused: nothing waits globally.
// The paused socket's liveness is told: its peer's silence is no evidence while unread.
import type { PeerLiveness } from "../../../lib/peer-liveness.js";
import type { RouterMetrics } from "./router-metrics.js";
import type { SessionSocket } from "./session-socket.js";
import { Sent, type FlowLimits, type UpstreamLink } from "./upstream-link.js";

export class SessionFlowControl {
  /** Upstreams whose congestion paused the client. */
  private readonly blockedOn = new Set<UpstreamLink>();
  private clientPaused = false;

  constructor(
    private readonly client: SessionSocket,
    private readonly limits: FlowLimits,
    private readonly metrics: RouterMetrics,
    private readonly clientLiveness: PeerLiveness,
    /** The client's queue passed the hard limit: the session drops it. */
    private readonly clientTooSlow: () => void,
  ) {}

  /**
   * Sends `data` to `link`. A link now above its high-water mark pauses the client until
   * it drains; a link that is open yet over its hard limit (it stopped reading although
   * the client was paused) is failed and reconnects.
   */
  toUpstream(link: UpstreamLink, data: Buffer): Sent {
    const r = link.send(data);
    if (r === Sent.Congested) {
      this.blockedOn.add(link);
      if (!this.clientPaused) {
        this.clientPaused = true;
        this.client.pause();
        this.clientLiveness.pause();
        this.metrics.event("backpressure_pause_client");
      }
    } else if (r === Sent.Rejected && link.state === "open") {
      this.metrics.event("upstream_too_slow");
      link.fail(`upstream did not read ${this.limits.hardLimitBytes} queued bytes`);
    }
    return r;
  }

  /**
   * Sends a frame `link` produced to the client; pauses reading `link` while the client's
   * queue is above its high-water mark. A client past its hard limit is dropped instead.
   */
  toClient(link: UpstreamLink, data: Buffer): void {
    const client = this.client;
    if (client.bufferedAmount > this.limits.hardLimitBytes) {
      this.metrics.event("client_too_slow");
      this.clientTooSlow();
      return;
    }
    client.coalesce();
    client.send(data);
    if (client.bufferedAmount > this.limits.highWaterBytes && !link.readingPaused) {
      link.pauseReading();
      this.metrics.event("backpressure_pause_upstream");
    }
  }

  /** The client's socket drained: once below the low-water mark, read every upstream again. */
  clientDrained(links: Iterable<UpstreamLink>): void {
    if (this.client.bufferedAmount > this.limits.lowWaterBytes) return;
    for (const link of links) link.resumeReading();
  }

  /** `link` drained (or was lost): the client resumes when no other upstream holds it. */
  upstreamDrained(link: UpstreamLink): void {
    if (!this.blockedOn.delete(link)) return;
    this.resumeClientIfFree();
  }

  /** `link` left the route; call `resumeClientIfFree` once the route is reconciled. */
  upstreamRemoved(link: UpstreamLink): void {
    this.blockedOn.delete(link);
  }

  resumeClientIfFree(): void {
    if (this.blockedOn.size === 0 && this.clientPaused) {
      this.clientPaused = false;
      this.client.resume();
      this.clientLiveness.resume();
    }
  }

  clear(): void {
    this.blockedOn.clear();
  }
}
