// The hand-off between a stream's protocol logic (which decides when to push) and the
// gRPC handler's response generator (which writes). The protocol keeps at most one push
// outstanding, so the outbox holds at most one message; close/fail end the stream.

export class ResponseOutbox<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: (() => void) | undefined;
  private done = false;
  private error: unknown = undefined;

  push(item: T): void {
    if (this.done) return;
    this.items.push(item);
    this.wake();
  }

  /** Ends the stream normally once queued items are written. */
  close(): void {
    this.done = true;
    this.wake();
  }

  /** Ends the stream with `err` (a ConnectError becomes the gRPC status); queued items are dropped. */
  fail(err: unknown): void {
    if (this.done && this.error !== undefined) return;
    this.done = true;
    this.error = err ?? new Error("stream failed");
    this.items.length = 0;
    this.wake();
  }

  get closed(): boolean {
    return this.done;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.error !== undefined) throw this.error;
      const next = this.items.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.done) return;
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}
