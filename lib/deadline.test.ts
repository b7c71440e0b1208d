import { describe, expect, it } from "vitest";
import { DeadlineExceededError, withDeadline } from "./deadline.js";

describe("withDeadline", () => {
  it("answers with the promise when it settles first", async () => {
    expect(await withDeadline(Promise.resolve(7), 1_000)).toBe(7);
    await expect(withDeadline(Promise.reject(new Error("refused")), 1_000)).rejects.toThrow("refused");
  });

  it("rejects with a coded error naming the deadline when the promise never settles", async () => {
    const err = await withDeadline(new Promise(() => {}), 20).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeadlineExceededError);
    expect((err as DeadlineExceededError).code).toBe("SWITCHYARD_DEADLINE_EXCEEDED");
    expect((err as Error).message).toBe("no answer within 20 ms");
  });
});
