// Reconnect delays for the RouteDiscovery client: exponential with jitter, so a fleet of
// routers that lost the control plane at the same moment does not reconnect in lockstep.
import { RouteDiscoveryConfigError } from "./route-discovery-errors.js";

export interface ReconnectBackoffOptions {
  /** First delay, ms (default 250). */
  initialMs?: number;
  /** Largest delay, ms (default 10 000). */
  maxMs?: number;
  /** Growth per consecutive failure (default 2). */
  multiplier?: number;
  /** Fraction of each delay randomised, 0-1 (default 0.2: delay × [0.8, 1.2]). */
  jitter?: number;
}

export class ReconnectBackoff {
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly multiplier: number;
  private readonly jitter: number;
  private attempt = 0;

  constructor(
    opts: ReconnectBackoffOptions = {},
    private readonly random: () => number = Math.random,
  ) {
    this.initialMs = opts.initialMs ?? 250;
    this.maxMs = opts.maxMs ?? 10_000;
    this.multiplier = opts.multiplier ?? 2;
    this.jitter = opts.jitter ?? 0.2;
    if (!(this.initialMs > 0)) throw new RouteDiscoveryConfigError("backoff.initialMs", "must be > 0 ms");
    if (!(this.maxMs >= this.initialMs))
      throw new RouteDiscoveryConfigError("backoff.maxMs", "must be >= initialMs");
    if (!(this.multiplier >= 1)) throw new RouteDiscoveryConfigError("backoff.multiplier", "must be >= 1");
    if (!(this.jitter >= 0 && this.jitter <= 1))
      throw new RouteDiscoveryConfigError("backoff.jitter", "must be 0-1");
  }

  /** The delay before the next attempt, growing with each call until reset(). */
  next(): number {
    const base = Math.min(this.maxMs, this.initialMs * this.multiplier ** this.attempt);
    this.attempt++;
    const spread = base * this.jitter * (2 * this.random() - 1);
    return Math.max(0, Math.round(base + spread));
  }

  reset(): void {
    this.attempt = 0;
  }
}
