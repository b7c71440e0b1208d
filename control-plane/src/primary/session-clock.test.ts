import { describe, expect, it } from "vitest";
import { childRenewal, sessionClock, type ClockedSession } from "./session-clock.js";

const T0 = Date.parse("2030-01-01T00:00:00Z");
const iso = (ms: number) => new Date(ms).toISOString();
const intervals = { heartbeatIntervalMs: 10_000 };

function session(o: { createdAt?: number; connectedAt?: number; ttlSeconds?: number } = {}): ClockedSession {
  return {
    metadata: { creationTimestamp: iso(o.createdAt ?? T0) },
    spec: o.ttlSeconds === undefined ? {} : { ttlSeconds: o.ttlSeconds },
    ...(o.connectedAt === undefined ? {} : { status: { connectedTimestamp: iso(o.connectedAt) } }),
  };
}

describe("sessionClock", () => {
  it("counts a fresh session's TTL from its creation (default 60 s)", () => {
    const d = sessionClock(session(), T0 + 20_000, false, intervals);
    expect(d).toMatchObject({ expired: false, ttlMs: 60_000, heartbeat: undefined, untilExpiryMs: 40_050 });
    // Not live: wake at the next child renewal (a third of the TTL) or at expiry, whichever is first.
    expect(d.expired === false && d.requeueAfterMs).toBe(20_000);
  });

  it("expires a session with no heartbeat within the TTL", () => {
    expect(sessionClock(session({ ttlSeconds: 30 }), T0 + 30_001, false, intervals)).toEqual({
      expired: true,
      ttlMs: 30_000,
    });
    expect(sessionClock(session({ ttlSeconds: 30 }), T0 + 30_000, false, intervals).expired).toBe(false);
  });

  it("counts from the last heartbeat when it is newer than the creation", () => {
    const d = sessionClock(session({ connectedAt: T0 + 50_000 }), T0 + 100_000, false, intervals);
    expect(d).toMatchObject({ expired: false, untilExpiryMs: 10_050, requeueAfterMs: 10_050 });
  });

  it("never expires a live session, and writes a heartbeat once the interval has passed", () => {
    const stale = sessionClock(session({ connectedAt: T0 }), T0 + 600_000, true, intervals);
    expect(stale).toMatchObject({ expired: false, heartbeat: iso(T0 + 600_000), untilExpiryMs: 60_050 });
    expect(stale.expired === false && stale.requeueAfterMs).toBe(10_000);
    const recent = sessionClock(session({ connectedAt: T0 }), T0 + 9_999, true, intervals);
    expect(recent).toMatchObject({ expired: false, heartbeat: undefined });
  });

  it("writes the first heartbeat of a live session at once", () => {
    const d = sessionClock(session(), T0 + 1, true, intervals);
    expect(d).toMatchObject({ expired: false, heartbeat: iso(T0 + 1) });
  });

  it("renews children every third of the TTL, at least every second, unless told otherwise", () => {
    const short = sessionClock(session({ ttlSeconds: 2 }), T0, false, intervals);
    expect(short.expired === false && short.childRenewMs).toBe(1_000);
    const fixed = sessionClock(session(), T0, false, { ...intervals, childRenewIntervalMs: 5_000 });
    expect(fixed).toMatchObject({ childRenewMs: 5_000, requeueAfterMs: 5_000 });
  });
});

describe("childRenewal", () => {
  const child = (createdAt: number, renewedAt?: number) => ({
    metadata: { creationTimestamp: iso(createdAt) },
    ...(renewedAt === undefined ? {} : { status: { renewedAt: iso(renewedAt) } }),
  });

  it("counts a fresh child from its creation", () => {
    expect(childRenewal(child(T0), T0 + 19_999, 20_000)).toBeUndefined();
    expect(childRenewal(child(T0), T0 + 20_000, 20_000)).toBe(iso(T0 + 20_000));
  });

  it("counts from the last renewal once there is one", () => {
    expect(childRenewal(child(T0, T0 + 30_000), T0 + 40_000, 20_000)).toBeUndefined();
    expect(childRenewal(child(T0, T0 + 30_000), T0 + 50_000, 20_000)).toBe(iso(T0 + 50_000));
  });
});
