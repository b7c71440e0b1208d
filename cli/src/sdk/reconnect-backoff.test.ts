// Reconnect backoff with fake timers: 1, 2, 4, 8, 8 s, bounded tries, fatal errors stop
// at once, a server's Retry-After stretches a wait.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { backoffDelay, resolveBackoff, retryWithBackoff } from "./reconnect-backoff.js";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("reconnect backoff", () => {
  it("doubles from 1 s and caps at 8 s", () => {
    const o = resolveBackoff();
    expect([0, 1, 2, 3, 4, 5].map((n) => backoffDelay(o, n))).toEqual([1000, 2000, 4000, 8000, 8000, 8000]);
  });

  it("validates its options", () => {
    expect(() => resolveBackoff({ initialMs: 0 })).toThrow(/initialMs/);
    expect(() => resolveBackoff({ initialMs: 5000, maxMs: 1000 })).toThrow(/maxMs/);
    expect(() => resolveBackoff({ maxAttempts: Number.NaN })).toThrow(/maxAttempts/);
  });

  it("attempts at 1, 3, 7, 15 s and succeeds on the fourth try", async () => {
    const at: number[] = [];
    const start = Date.now();
    const p = retryWithBackoff(resolveBackoff(), {
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
    const retries: number[] = [];
    const p = retryWithBackoff(resolveBackoff({ maxAttempts: 3 }), {
      attempt: async () => {
        tries++;
        throw new Error(`refused ${tries}`);
      },
      isFatal: () => false,
      onRetry: ({ delayMs }) => retries.push(delayMs),
    });
    const outcome = expect(p).rejects.toThrow("refused 3");
    await vi.advanceTimersByTimeAsync(7000);
    await outcome;
    expect(tries).toBe(3);
    expect(retries).toEqual([1000, 2000, 4000]);
  });

  it("stops at once on a fatal error", async () => {
    let tries = 0;
    const p = retryWithBackoff(resolveBackoff(), {
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

  it("waits longer when the server suggests it", async () => {
    const waits: number[] = [];
    const p = retryWithBackoff(resolveBackoff({ maxAttempts: 2 }), {
      attempt: async (n) => {
        if (n === 0) throw Object.assign(new Error("503"), { retryAfterMs: 5000 });
        return n;
      },
      isFatal: () => false,
      suggestedDelayMs: (e) => (e as { retryAfterMs?: number } | undefined)?.retryAfterMs,
      onRetry: ({ delayMs }) => waits.push(delayMs),
    });
    await vi.advanceTimersByTimeAsync(6000);
    await expect(p).resolves.toBe(1);
    expect(waits).toEqual([1000, 5000]);
  });

  it("can be aborted while waiting", async () => {
    const ac = new AbortController();
    const p = retryWithBackoff(resolveBackoff(), {
      attempt: async () => 1,
      isFatal: () => false,
      signal: ac.signal,
    });
    const outcome = expect(p).rejects.toThrow("stop");
    ac.abort(new Error("stop"));
    await outcome;
  });
});
