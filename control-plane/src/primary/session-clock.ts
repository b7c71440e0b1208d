// The clock of a MultiClusterSession (DESIGN §4 step 6): from the parent's timestamps,
// the time and whether a router reports a live client, it decides whether the session
// has expired, whether `status.connectedTimestamp` is due, how often children are
// renewed and when to look again. Pure — no I/O, no timers — so every heartbeat and TTL
// rule is a unit test with plain values, and the reconciler only acts on the decision.
import { TTL_SECONDS_DEFAULT } from "../../../proto/api/v1alpha1/index.js";

/** The parts of a parent the clock reads. */
export interface ClockedSession {
  metadata: { creationTimestamp?: Date | string };
  spec: { ttlSeconds?: number };
  status?: { connectedTimestamp?: string };
}

/** The parts of a child the renewal rule reads. */
export interface RenewedChild {
  metadata: { creationTimestamp?: Date | string };
  status?: { renewedAt?: string };
}

export interface SessionClockIntervals {
  /** How often connectedTimestamp is refreshed while a client is live, ms. */
  heartbeatIntervalMs: number;
  /** How often each child's status.renewedAt is refreshed, ms; undefined = a third of the TTL, at least 1 000. */
  childRenewIntervalMs?: number;
}

export type ClockDecision =
  /** No heartbeat (and no creation) within the TTL: delete the session. */
  | { expired: true; ttlMs: number }
  | {
      expired: false;
      ttlMs: number;
      /** connectedTimestamp to write in this reconcile, when a write is due. */
      heartbeat: string | undefined;
      /** Until the session would expire without another heartbeat, ms (+50 so a wake lands past the deadline). */
      untilExpiryMs: number;
      /** How often each child's renewedAt is refreshed, ms. */
      childRenewMs: number;
      /** When to reconcile again: the earliest of expiry, the next heartbeat write (while live), the next renewal. */
      requeueAfterMs: number;
    };

/** The decision for a session that has not expired. */
export type ActiveClock = Extract<ClockDecision, { expired: false }>;

/** Milliseconds since the epoch of a timestamp, 0 when absent or unreadable. */
const at = (t: Date | string | undefined): number => Date.parse(String(t ?? "")) || 0;

/** The clock's decision for `session` at `now`, given whether a router reports it live. */
export function sessionClock(
  session: ClockedSession,
  now: number,
  live: boolean,
  intervals: SessionClockIntervals,
): ClockDecision {
  const ttlMs = (session.spec.ttlSeconds ?? TTL_SECONDS_DEFAULT) * 1000;
  const connected = at(session.status?.connectedTimestamp);
  // A fresh session counts from its creation until its first heartbeat.
  let lastBeat = Math.max(connected, at(session.metadata.creationTimestamp));
  let heartbeat: string | undefined;
  if (live && now - connected >= intervals.heartbeatIntervalMs) {
    heartbeat = new Date(now).toISOString();
    lastBeat = now;
  }
  if (!live && now - lastBeat > ttlMs) return { expired: true, ttlMs };
  const untilExpiryMs = Math.max(0, lastBeat + ttlMs - now) + 50;
  const childRenewMs = intervals.childRenewIntervalMs ?? Math.max(1_000, ttlMs / 3);
  return {
    expired: false,
    ttlMs,
    heartbeat,
    untilExpiryMs,
    childRenewMs,
    requeueAfterMs: Math.min(
      untilExpiryMs,
      live ? intervals.heartbeatIntervalMs : untilExpiryMs,
      childRenewMs,
    ),
  };
}

/**
 * The renewedAt to write on a child now, or undefined when its last renewal is recent
 * enough. The member counts the TTL from renewedAt or, before the first renewal, from
 * the child's creation; so does this rule.
 */
export function childRenewal(child: RenewedChild, now: number, renewMs: number): string | undefined {
  const renewedAt = Math.max(at(child.status?.renewedAt), at(child.metadata.creationTimestamp));
  return now - renewedAt >= renewMs ? new Date(now).toISOString() : undefined;
}
