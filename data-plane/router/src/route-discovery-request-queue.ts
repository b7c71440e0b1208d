// The request side of one RouteDiscovery stream: ACKs, NACKs and live-session reports are
// pushed here from callbacks and drained by the gRPC call as an AsyncIterable.

export class RouteDiscoveryRequestQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: (() => void) | undefined;
  private done = false;

  push(item: T): void {
    if (this.done) return;
    this.items.push(item);
    this.wake();
  }

  /** Ends the request stream (half-close) after what is queued. */
  close(): void {
    this.done = true;
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
