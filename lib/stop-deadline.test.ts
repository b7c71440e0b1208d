import { describe, expect, it } from "vitest";
import { StopDeadline } from "./stop-deadline.js";

describe("StopDeadline", () => {
  it("names the parts still running when the deadline after a stop passes", async () => {
    const d = new StopDeadline();
    let finish!: () => void;
    void d.track("quick", Promise.resolve());
    void d.track("stuck", new Promise<void>((r) => (finish = r)));
    const stop = new AbortController();
    const expired = new Promise<string[]>((resolve) => d.arm(stop.signal, 20, resolve));
    await Promise.resolve();
    stop.abort();
    expect(await expired).toEqual(["stuck"]);
    finish();
  });

  it("stays quiet when every part has stopped in time, and before any stop", async () => {
    const d = new StopDeadline();
    const calls: string[][] = [];
    const stop = new AbortController();
    void d.track("part", new Promise<void>((r) => stop.signal.addEventListener("abort", () => r())));
    d.arm(stop.signal, 20, (p) => calls.push(p));
    await new Promise((r) => setTimeout(r, 40));
    expect(calls).toEqual([]); // not stopped yet: no deadline
    stop.abort();
    await new Promise((r) => setTimeout(r, 60));
    expect(calls).toEqual([]);
    expect(d.pending()).toEqual([]);
  });
});
