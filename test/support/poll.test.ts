import { describe, expect, it } from "vitest";
import { describeError, eventually, PollTimeoutError } from "./poll.js";

describe("eventually", () => {
  it("resolves with the first value that is neither undefined nor false", async () => {
    const seen: unknown[] = [undefined, false, 0];
    let calls = 0;
    const v = await eventually("a value", () => seen[calls++], { intervalMs: 1 });
    expect(v).toBe(0);
    expect(calls).toBe(3);
  });

  it("counts a throwing probe as not yet", async () => {
    let calls = 0;
    const v = await eventually(
      "a recovered probe",
      async () => {
        if (++calls < 3) throw new Error("not up");
        return "up";
      },
      { intervalMs: 1 },
    );
    expect(v).toBe("up");
  });

  it("names what it waited for and the latest failure, with its causes, on timeout", async () => {
    const err = await eventually(
      "the thing",
      () => {
        throw new Error("fetch failed", { cause: new Error("ECONNREFUSED") });
      },
      { timeoutMs: 30, intervalMs: 5 },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PollTimeoutError);
    expect((err as PollTimeoutError).code).toBe("SWITCHYARD_TEST_POLL_TIMEOUT");
    expect((err as Error).message).toMatch(
      /^timed out waiting for the thing \(30 ms\): Error: fetch failed <- Error: ECONNREFUSED$/,
    );
  });

  it("forgets a failure when a later attempt merely was not ready", async () => {
    let calls = 0;
    const err = await eventually(
      "the thing",
      () => {
        if (++calls === 1) throw new Error("first");
        return undefined;
      },
      { timeoutMs: 20, intervalMs: 5 },
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe("timed out waiting for the thing (20 ms)");
  });

  it("stops at once when giveUp returns an error", async () => {
    const gone = new Error("the process exited");
    const t0 = Date.now();
    await expect(
      eventually("never", () => undefined, { timeoutMs: 10_000, intervalMs: 1, giveUp: () => gone }),
    ).rejects.toBe(gone);
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

describe("describeError", () => {
  it("follows the cause chain, outermost first", () => {
    expect(describeError(new Error("a", { cause: new Error("b", { cause: "c" }) }))).toBe(
      "Error: a <- Error: b <- c",
    );
    expect(describeError("plain")).toBe("plain");
  });
});
