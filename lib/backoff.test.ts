import { describe, expect, it } from "vitest";
import { Backoff, backoffDelay, checkBackoff, retry } from "./backoff.js";
import { OptionError } from "./option-error.js";

describe("backoff", () => {
  it("doubles from initialMs and caps at maxMs", () => {
    const b = new Backoff({ initialMs: 100, maxMs: 1000 });
    expect([1, 2, 3, 4, 5, 6].map(() => b.next())).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(b.failures).toBe(6);
    b.reset();
    expect(b.next()).toBe(100);
  });

  it("spreads each delay by ±jitter", () => {
    const low = new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.2 }, () => 0);
    const high = new Backoff({ initialMs: 1000, maxMs: 1000, jitter: 0.2 }, () => 1);
    expect(low.next()).toBe(800);
    expect(high.next()).toBe(1200);
  });

  it("honours a multiplier and survives huge attempt numbers", () => {
    expect(backoffDelay({ initialMs: 10, maxMs: 10_000, multiplier: 3 }, 2)).toBe(90);
    expect(backoffDelay({ initialMs: 10, maxMs: 10_000 }, 10_000)).toBe(10_000);
  });

  it("names the bad field", () => {
    expect(() => checkBackoff({ initialMs: 0, maxMs: 10 }, "reconnect")).toThrow(/reconnect\.initialMs/);
    expect(() => checkBackoff({ initialMs: 10, maxMs: 5 })).toThrow(
      /backoff\.maxMs: must be ≥ backoff\.initialMs/,
    );
    expect(() => checkBackoff({ initialMs: 10, maxMs: 50, jitter: 2 })).toThrow(OptionError);
    expect(() => checkBackoff({ initialMs: 10, maxMs: 50, multiplier: 0.5 })).toThrow(/multiplier/);
  });
});

describe("retry", () => {
  const policy = { initialMs: 1, maxMs: 2 };

  it("returns the first success and reports each retry", async () => {
    const seen: number[] = [];
    const r = await retry({
      policy,
      maxAttempts: 5,
      attempt: async (n) => {
        if (n < 2) throw new Error(`fail ${n}`);
        return n;
      },
      isFatal: () => false,
      onRetry: ({ attempt }) => seen.push(attempt),
    });
    expect(r).toBe(2);
    expect(seen).toEqual([1, 2]);
  });

  it("stops at once on a fatal error and gives the last error when tries run out", async () => {
    let calls = 0;
    const fatal = new Error("fatal");
    await expect(
      retry({
        policy,
        maxAttempts: 5,
        attempt: async () => (calls++, Promise.reject(fatal)),
        isFatal: (e) => e === fatal,
      }),
    ).rejects.toBe(fatal);
    expect(calls).toBe(1);
    await expect(
      retry({
        policy,
        maxAttempts: 3,
        attempt: async (n) => Promise.reject(new Error(`e${n}`)),
        isFatal: () => false,
      }),
    ).rejects.toThrow("e2");
  });

  it("waits a larger server-suggested delay and ends on abort", async () => {
    const ac = new AbortController();
    const started = Date.now();
    const p = retry({
      policy,
      maxAttempts: 3,
      attempt: async () => Promise.reject(new Error("busy")),
      isFatal: () => false,
      suggestedDelayMs: () => 10_000,
      signal: ac.signal,
    });
    setTimeout(() => ac.abort(new Error("stopped")), 20);
    await expect(p).rejects.toThrow("stopped");
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
