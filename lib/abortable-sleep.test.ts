import { describe, expect, it } from "vitest";
import { sleep, untilAborted } from "./abortable-sleep.js";

describe("sleep", () => {
  it("resolves true after the whole time", async () => {
    expect(await sleep(5)).toBe(true);
  });

  it("resolves false at once when aborted before or during", async () => {
    const ac = new AbortController();
    ac.abort();
    expect(await sleep(60_000, ac.signal)).toBe(false);
    const ac2 = new AbortController();
    const started = Date.now();
    setTimeout(() => ac2.abort(), 5);
    expect(await sleep(60_000, ac2.signal)).toBe(false);
    expect(Date.now() - started).toBeLessThan(5_000);
    await untilAborted(ac2.signal);
  });
});
