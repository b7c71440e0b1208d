import { afterEach, describe, expect, it, vi } from "vitest";
import { OptionError } from "../../../lib/option-error.js";
import { WorkQueue } from "./work-queue.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("WorkQueue", () => {
  it("de-duplicates keys that wait", async () => {
    const q = new WorkQueue();
    q.add("a");
    q.add("b");
    q.add("a");
    expect(q.length).toBe(2);
    expect(await q.get()).toBe("a");
    expect(await q.get()).toBe("b");
    expect(q.length).toBe(0);
  });

  it("never hands a key in processing to a second worker, and re-runs it once after done", async () => {
    const q = new WorkQueue();
    q.add("a");
    const k = await q.get();
    expect(k).toBe("a");
    q.add("a");
    q.add("a");
    expect(q.length).toBe(0); // held until done
    let second: string | undefined;
    void q.get().then((x) => (second = x));
    await Promise.resolve();
    expect(second).toBeUndefined();
    q.done("a");
    await Promise.resolve();
    expect(second).toBe("a");
    q.done("a");
    expect(q.length).toBe(0);
  });

  it("hands keys to waiting workers", async () => {
    const q = new WorkQueue();
    const got = q.get();
    q.add("x");
    expect(await got).toBe("x");
    expect(q.processing).toBe(1);
  });

  it("backs off exponentially per key, capped, and forget resets", () => {
    vi.useFakeTimers();
    const q = new WorkQueue({ baseMs: 100, maxMs: 1000 });
    expect(q.addRateLimited("a")).toBe(100);
    expect(q.addRateLimited("a")).toBe(200);
    expect(q.addRateLimited("a")).toBe(400);
    expect(q.addRateLimited("a")).toBe(800);
    expect(q.addRateLimited("a")).toBe(1000);
    expect(q.addRateLimited("b")).toBe(100);
    q.forget("a");
    expect(q.addRateLimited("a")).toBe(100);
  });

  it("adds delayed keys when their time comes; the earliest delay wins", async () => {
    vi.useFakeTimers();
    const q = new WorkQueue();
    q.addAfter("a", 1000);
    q.addAfter("a", 300);
    q.addAfter("a", 5000);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(299);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(1);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe("a");
    q.done("a");
    vi.advanceTimersByTime(10_000);
    expect(q.length).toBe(0); // the later delays were dropped
  });

  it("rate-limited adds honour an override delay", () => {
    vi.useFakeTimers();
    const q = new WorkQueue({ baseMs: 100 });
    expect(q.addRateLimited("a", 2500)).toBe(2500);
    vi.advanceTimersByTime(2499);
    expect(q.length).toBe(0);
    vi.advanceTimersByTime(1);
    expect(q.length).toBe(1);
  });

  it("shutDown resolves waiting workers and drops timers", async () => {
    vi.useFakeTimers();
    const q = new WorkQueue();
    const waiting = q.get();
    q.addAfter("late", 100);
    q.shutDown();
    expect(await waiting).toBeUndefined();
    vi.advanceTimersByTime(1000);
    expect(q.length).toBe(0);
    q.add("z");
    expect(await q.get()).toBeUndefined();
  });

  it("rejects bad backoff options naming them", () => {
    expect(() => new WorkQueue({ baseMs: 0 })).toThrow(OptionError);
    expect(() => new WorkQueue({ baseMs: 100, maxMs: 50 })).toThrow(/maxMs/);
  });
});
