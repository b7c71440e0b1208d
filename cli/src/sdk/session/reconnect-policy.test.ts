// The router connection's retry policy with fake timers: reconnects after 1, 2, 4, 8, 8 s
// for a bounded number of tries, the first connect at once and then from 250 ms until its
// deadline; fatal errors stop both at once, a server's Retry-After stretches a wait.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { backoffDelay } from "../../../../lib/backoff.js";
import {
  connectWithBackoff,
  reconnectPolicy,
  reconnectWithBackoff,
  type RetryInfo,
} from "./reconnect-policy.js";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("reconnect policy", () => {
  it("doubles from 1 s and caps at 8 s, 6 attempts by default", () => {
    const p = reconnectPolicy();
    expect([0, 1, 2, 3, 4, 5].map((n) => backoffDelay(p.backoff, n))).toEqual([
      1000, 2000, 4000, 8000, 8000, 8000,
    ]);
    expect(p.maxAttempts).toBe(6);
  });

  it("validates its options, naming the field", () => {
    expect(() => reconnectPolicy({ initialMs: 0 })).toThrow(/initialMs/);
    expect(() => reconnectPolicy({ initialMs: 5000, maxMs: 1000 })).toThrow(/maxMs/);
    expect(() => reconnectPolicy({ maxAttempts: Number.NaN })).toThrow(/maxAttempts/);
    expect(() => reconnectPolicy({ maxAttempts: 0 })).toThrow(
      expect.objectContaining({ code: "SWITCHYARD_INVALID_OPTION" }),
    );
  });

  it("reconnects at 1, 3, 7, 15 s and succeeds on the fourth try", async () => {
    const at: number[] = [];
    const start = Date.now();
    const p = reconnectWithBackoff(reconnectPolicy(), {
      attempt: async (n) => {
        at.push(Date.now() - start);
        if (n < 3) throw new Error(`down ${n}`);
        return "up";
      },
      isFatal: () => false,
    });
    await vi.advanceTimersByTimeAsync(999);
    expect(at).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(at).toEqual([1000]);
    await vi.advanceTimersByTimeAsync(14_000);
    await expect(p).resolves.toBe("up");
    expect(at).toEqual([1000, 3000, 7000, 15_000]);
  });

  it("gives up after maxAttempts with the last error", async () => {
    let tries = 0;
    const retries: RetryInfo[] = [];
    const p = reconnectWithBackoff(reconnectPolicy({ maxAttempts: 3 }), {
      attempt: async () => {
        tries++;
        throw new Error(`refused ${tries}`);
      },
      isFatal: () => false,
      onRetry: (r) => retries.push(r),
    });
    const outcome = expect(p).rejects.toThrow("refused 3");
    await vi.advanceTimersByTimeAsync(7000);
    await outcome;
    expect(tries).toBe(3);
    expect(retries.map((r) => r.delayMs)).toEqual([1000, 2000, 4000]);
    expect(retries.map((r) => r.attempt)).toEqual([0, 1, 2]);
    expect(retries[0]!.error).toBeUndefined();
  });

  it("stops at once on a fatal error", async () => {
    let tries = 0;
    const p = reconnectWithBackoff(reconnectPolicy(), {
      attempt: async () => {
        tries++;
        throw Object.assign(new Error("session gone"), { fatal: true });
      },
      isFatal: (e) => (e as { fatal?: boolean }).fatal === true,
    });
    const outcome = expect(p).rejects.toThrow("session gone");
    await vi.advanceTimersByTimeAsync(1000);
    await outcome;
    expect(tries).toBe(1);
  });

  it("waits longer when the router sends Retry-After", async () => {
    const waits: number[] = [];
    const p = reconnectWithBackoff(reconnectPolicy({ maxAttempts: 2 }), {
      attempt: async (n) => {
        if (n === 0) throw Object.assign(new Error("503"), { retryAfterMs: 5000 });
        return n;
      },
      isFatal: () => false,
      onRetry: ({ delayMs }) => waits.push(delayMs),
    });
    await vi.advanceTimersByTimeAsync(6000);
    await expect(p).resolves.toBe(1);
    expect(waits).toEqual([1000, 5000]);
  });

  it("can be aborted while waiting", async () => {
    const ac = new AbortController();
    const p = reconnectWithBackoff(reconnectPolicy(), {
      attempt: async () => 1,
      isFatal: () => false,
      signal: ac.signal,
    });
    const outcome = expect(p).rejects.toThrow("stop");
    ac.abort(new Error("stop"));
    await outcome;
  });
});

describe("first connect", () => {
  const giveUp = (last: unknown) => new Error(`gave up: ${(last as Error).message}`);

  it("tries at once, then from 250 ms doubling up to maxMs, until its deadline", async () => {
    const at: number[] = [];
    const start = Date.now();
    const p = connectWithBackoff(reconnectPolicy(), {
      timeoutMs: 10_000,
      attempt: async (n) => {
        at.push(Date.now() - start);
        throw new Error(`down ${n}`);
      },
      isFatal: () => false,
      giveUp,
    });
    const outcome = expect(p).rejects.toThrow(/^gave up: down 5$/);
    await vi.advanceTimersByTimeAsync(10_000);
    await outcome;
    expect(at).toEqual([0, 250, 750, 1750, 3750, 7750]);
  });

  it("never waits longer than maxMs, even for its first retry", async () => {
    const waits: number[] = [];
    const p = connectWithBackoff(reconnectPolicy({ initialMs: 10, maxMs: 20 }), {
      timeoutMs: 100,
      attempt: async (n) => {
        if (n < 2) throw new Error("not yet");
        return n;
      },
      isFatal: () => false,
      onRetry: ({ delayMs }) => waits.push(delayMs),
      giveUp,
    });
    await vi.advanceTimersByTimeAsync(40);
    await expect(p).resolves.toBe(2);
    expect(waits).toEqual([20, 20]);
  });

  it("throws a fatal error as it is, and honours Retry-After before that", async () => {
    const at: number[] = [];
    const start = Date.now();
    const p = connectWithBackoff(reconnectPolicy(), {
      timeoutMs: 60_000,
      attempt: async (n) => {
        at.push(Date.now() - start);
        if (n === 0) throw Object.assign(new Error("creating"), { retryAfterMs: 2000 });
        throw Object.assign(new Error("unauthorized"), { fatal: true });
      },
      isFatal: (e) => (e as { fatal?: boolean }).fatal === true,
      giveUp,
    });
    const outcome = expect(p).rejects.toThrow(/^unauthorized$/);
    await vi.advanceTimersByTimeAsync(2000);
    await outcome;
    expect(at).toEqual([0, 2000]);
  });

  it("gives up when its signal aborts", async () => {
    const ac = new AbortController();
    const p = connectWithBackoff(reconnectPolicy(), {
      timeoutMs: 60_000,
      signal: ac.signal,
      attempt: async () => {
        throw new Error("refused");
      },
      isFatal: () => false,
      giveUp,
    });
    const outcome = expect(p).rejects.toThrow("gave up: refused");
    await vi.advanceTimersByTimeAsync(100);
    ac.abort();
    await outcome;
  });
});
