import { ApiException } from "@kubernetes/client-node";
import { afterEach, describe, expect, it, vi } from "vitest";
import { OptionError } from "../../../lib/option-error.js";
import { Controller, ControllerStartedError, type Reconciler } from "./controller.js";
import { ControllerMetrics } from "./controller-metrics.js";
import type { ObjectKey } from "./object-key.js";
import type { InformerHandler, ResourceInformer } from "./resource-informer.js";
import { TerminalReconcileError, TransientReconcileError, withContext } from "./reconcile-errors.js";

afterEach(() => {
  vi.useRealTimers();
});

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Waits until `cond` holds, letting timers and promises run (fake or real time). */
async function until(cond: () => boolean, fake = false): Promise<void> {
  for (let i = 0; i < 2000 && !cond(); i++) {
    if (fake) await vi.advanceTimersByTimeAsync(10);
    else await new Promise((r) => setImmediate(r));
  }
  expect(cond()).toBe(true);
}

describe("Controller", () => {
  it("reconciles what a shared informer listed before the controller attached", async () => {
    // An informer that already listed (started and synced by someone else): its adds are gone.
    const cached = [
      { metadata: { namespace: "ns", name: "early" } },
      { metadata: { namespace: "ns", name: "skipped" } },
    ];
    const handlers = new Set<InformerHandler<(typeof cached)[number]>>();
    const informer = {
      what: "things",
      subscribe: (h: InformerHandler<(typeof cached)[number]>) => (handlers.add(h), () => handlers.delete(h)),
      list: () => cached,
      start: async (signal: AbortSignal) =>
        new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true })),
      waitForSync: async () => {},
    } as unknown as ResourceInformer<(typeof cached)[number]>;
    const seen: string[] = [];
    const c = new Controller({
      name: "t",
      reconciler: { reconcile: async (key) => void seen.push(key.name) },
    }).watch(informer, { predicates: [(o) => o.metadata.name !== "skipped"] });
    const ac = new AbortController();
    const run = c.start(ac.signal);
    await until(() => seen.length === 1);
    expect(seen).toEqual(["early"]);
    // Later events still arrive through the subscription.
    for (const h of handlers) h("update", { metadata: { namespace: "ns", name: "late" } });
    await until(() => seen.length === 2);
    expect(seen).toEqual(["early", "late"]);
    ac.abort();
    await run;
    expect(handlers.size).toBe(0);
  });

  it("validates its options", () => {
    const reconciler = { reconcile: async () => {} };
    expect(() => new Controller({ name: "Bad Name", reconciler })).toThrow(OptionError);
    expect(() => new Controller({ name: "x", reconciler, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => new Controller({ name: "x", reconciler: {} as Reconciler })).toThrow(/reconcile/);
  });

  it("reconciles enqueued keys and never runs one key twice at once", async () => {
    const calls: string[] = [];
    let inFlight = 0;
    let maxSameKey = 0;
    const gate = deferred();
    const reconciler: Reconciler = {
      async reconcile(key) {
        calls.push(`${key.namespace}/${key.name}`);
        inFlight++;
        maxSameKey = Math.max(maxSameKey, inFlight);
        await gate.promise;
        inFlight--;
      },
    };
    const c = new Controller({ name: "t", reconciler, concurrency: 4 });
    const ac = new AbortController();
    const run = c.start(ac.signal);
    c.enqueue({ namespace: "ns", name: "a" });
    await until(() => calls.length === 1);
    c.enqueue({ namespace: "ns", name: "a" });
    c.enqueue({ namespace: "ns", name: "a" });
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual(["ns/a"]); // held while in flight
    gate.resolve();
    await until(() => calls.length === 2); // merged re-runs: exactly one more
    await new Promise((r) => setImmediate(r));
    expect(calls).toEqual(["ns/a", "ns/a"]);
    expect(maxSameKey).toBe(1);
    ac.abort();
    await run;
  });

  it("bounds concurrency across keys", async () => {
    let inFlight = 0;
    let peak = 0;
    let done = 0;
    const gates: Array<() => void> = [];
    const reconciler: Reconciler = {
      async reconcile() {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await new Promise<void>((r) => gates.push(r));
        inFlight--;
        done++;
      },
    };
    const c = new Controller({ name: "t", reconciler, concurrency: 3 });
    const ac = new AbortController();
    const run = c.start(ac.signal);
    for (let i = 0; i < 10; i++) c.enqueue({ name: `k${i}` });
    await until(() => inFlight === 3);
    expect(c.queueLength).toBe(7);
    while (done < 10) {
      await until(() => gates.length > 0);
      gates.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    expect(peak).toBe(3);
    ac.abort();
    await run;
  });

  it("retries transient errors with growing backoff and resets after success", async () => {
    vi.useFakeTimers();
    const times: number[] = [];
    let fail = 3;
    const reconciler: Reconciler = {
      async reconcile() {
        times.push(Date.now());
        if (fail-- > 0) throw new Error("boom");
      },
    };
    const metrics = new ControllerMetrics();
    const c = new Controller({ name: "t", reconciler, backoff: { baseMs: 100, maxMs: 10_000 }, metrics });
    const ac = new AbortController();
    const run = c.start(ac.signal);
    c.enqueue({ name: "a" });
    await until(() => times.length === 4, true);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(gaps[0]).toBeGreaterThanOrEqual(100);
    expect(gaps[0]).toBeLessThan(200);
    expect(gaps[1]).toBeGreaterThanOrEqual(200);
    expect(gaps[1]).toBeLessThan(400);
    expect(gaps[2]).toBeGreaterThanOrEqual(400);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/switchyard_reconcile_errors_total\{controller="t",kind="transient"\} 3/);
    expect(text).toMatch(/switchyard_reconcile_duration_seconds_count\{controller="t",result="success"\} 1/);
    ac.abort();
    await run;
  });

  it("honours requeueAfterMs", async () => {
    vi.useFakeTimers();
    const times: number[] = [];
    const reconciler: Reconciler = {
      async reconcile() {
        times.push(Date.now());
        return times.length < 3 ? { requeueAfterMs: 5000 } : undefined;
      },
    };
    const c = new Controller({ name: "t", reconciler });
    const ac = new AbortController();
    const run = c.start(ac.signal);
    c.enqueue({ name: "a" });
    await until(() => times.length === 3, true);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(5000);
    expect(times[2]! - times[1]!).toBeGreaterThanOrEqual(5000);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(times.length).toBe(3);
    ac.abort();
    await run;
  });

  it("records terminal errors once and does not retry them", async () => {
    vi.useFakeTimers();
    let calls = 0;
    const recorded: Array<{ key: ObjectKey; reason: string }> = [];
    const reconciler: Reconciler = {
      async reconcile() {
        calls++;
        throw withContext("failed to resolve target", new TerminalReconcileError("InvalidTarget", "bad"));
      },
      async onTerminalError(key, err) {
        recorded.push({ key, reason: err.reason });
      },
    };
    const c = new Controller({ name: "t", reconciler });
    const ac = new AbortController();
    const run = c.start(ac.signal);
    c.enqueue({ namespace: "n", name: "a" });
    await until(() => recorded.length === 1, true);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(calls).toBe(1);
    expect(recorded).toEqual([{ key: { namespace: "n", name: "a" }, reason: "InvalidTarget" }]);
    ac.abort();
    await run;
  });

  it("retries conflicts at once, then backs off when they persist", async () => {
    // setImmediate stays real so `until` can let promises run without moving the clock.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const times: number[] = [];
    const reconciler: Reconciler = {
      async reconcile() {
        times.push(Date.now());
        throw new ApiException(409, "Conflict", "the object has been modified", {});
      },
    };
    const c = new Controller({
      name: "t",
      reconciler,
      maxImmediateConflicts: 2,
      backoff: { baseMs: 1000, maxMs: 1000 },
    });
    const ac = new AbortController();
    const run = c.start(ac.signal);
    c.enqueue({ name: "a" });
    await until(() => times.length === 3);
    expect(times[2]! - times[0]!).toBe(0); // two immediate retries, no time passed
    await new Promise((r) => setImmediate(r));
    expect(times.length).toBe(3); // third conflict → backoff
    await vi.advanceTimersByTimeAsync(1000);
    expect(times.length).toBe(4);
    ac.abort();
    await run;
  });

  it("abort passes the signal to in-flight reconciles, waits for them, and does not retry", async () => {
    let sawAbort = false;
    let calls = 0;
    const reconciler: Reconciler = {
      async reconcile(_key, signal) {
        calls++;
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => resolve(), { once: true }),
        );
        sawAbort = signal.aborted;
        throw new TransientReconcileError("interrupted");
      },
    };
    const c = new Controller({ name: "t", reconciler });
    const ac = new AbortController();
    const run = c.start(ac.signal);
    c.enqueue({ name: "a" });
    c.enqueue({ name: "b" });
    await until(() => calls === 2);
    ac.abort();
    await run;
    expect(sawAbort).toBe(true);
    expect(calls).toBe(2);
    await expect(c.start(new AbortController().signal)).rejects.toThrow(ControllerStartedError);
  });
});
