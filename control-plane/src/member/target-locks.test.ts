import { describe, expect, it } from "vitest";
import { TargetLocks } from "./target-locks.js";

describe("TargetLocks", () => {
  it("runs work on one target one at a time, in order, and other targets freely", async () => {
    const locks = new TargetLocks();
    const log: string[] = [];
    let releaseFirst!: () => void;
    const first = locks.with("a", async () => {
      log.push("a1 start");
      await new Promise<void>((r) => (releaseFirst = r));
      log.push("a1 end");
    });
    const second = locks.with("a", async () => {
      log.push("a2");
    });
    const other = locks.with("b", async () => {
      log.push("b");
    });
    await other;
    await new Promise((r) => setImmediate(r));
    expect(log).toEqual(["a1 start", "b"]);
    releaseFirst();
    await Promise.all([first, second]);
    expect(log).toEqual(["a1 start", "b", "a1 end", "a2"]);
    expect(locks.size).toBe(0);
  });

  it("releases the lock when the work throws", async () => {
    const locks = new TargetLocks();
    await expect(locks.with("a", () => Promise.reject(new Error("x")))).rejects.toThrow("x");
    expect(await locks.with("a", async () => 1)).toBe(1);
  });
});
