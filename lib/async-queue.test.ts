import { describe, expect, it } from "vitest";
import { AsyncQueue } from "./async-queue.js";

async function drain<T>(q: AsyncQueue<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of q) out.push(x);
  return out;
}

describe("AsyncQueue", () => {
  it("hands items pushed before and while iterating to the consumer, in order", async () => {
    const q = new AsyncQueue<number>();
    q.push(1);
    const done = drain(q);
    await Promise.resolve();
    q.push(2);
    setTimeout(() => (q.push(3), q.close(), q.push(4)), 5);
    expect(await done).toEqual([1, 2, 3]);
    expect(q.closed).toBe(true);
  });

  it("fail ends the iteration with the error and drops what was queued", async () => {
    const q = new AsyncQueue<number>();
    q.push(1);
    const boom = new Error("boom");
    q.fail(boom);
    expect(q.length).toBe(0);
    await expect(drain(q)).rejects.toBe(boom);
  });

  it("keeps falsy items", async () => {
    const q = new AsyncQueue<number | string>();
    q.push(0);
    q.push("");
    q.close();
    expect(await drain(q)).toEqual([0, ""]);
  });
});
