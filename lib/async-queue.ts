// A queue that callbacks push into and one consumer drains with `for await`: the seam
// between event-driven code (a timer, a socket, a watch) and an API that wants an
// AsyncIterable (a streaming RPC's request or response side). Unbounded: callers that
// can outpace the consumer must bound what they push themselves.

export class AsyncQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #waiter: (() => void) | undefined;
  #done = false;
  #error: unknown = undefined;
  #failed = false;

  /** Adds an item; ignored once the queue is closed or failed. */
  push(item: T): void {
    if (this.#done) return;
    this.#items.push(item);
    this.#wake();
  }

  /** Ends the iteration normally once queued items are consumed. */
  close(): void {
    this.#done = true;
    this.#wake();
  }

  /** Ends the iteration with `err` at once; queued items are dropped. */
  fail(err: unknown): void {
    if (this.#failed) return;
    this.#done = true;
    this.#failed = true;
    this.#error = err ?? new Error("queue failed");
    this.#items.length = 0;
    this.#wake();
  }

  get closed(): boolean {
    return this.#done;
  }

  /** Items waiting to be consumed. */
  get length(): number {
    return this.#items.length;
  }

  #wake(): void {
    const w = this.#waiter;
    this.#waiter = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.#failed) throw this.#error;
      if (this.#items.length > 0) {
        yield this.#items.shift() as T;
        continue;
      }
      if (this.#done) return;
      await new Promise<void>((resolve) => (this.#waiter = resolve));
    }
  }
}
