// Connections and requests waiting for a held steal (its session lost its connection and
// may come back, see port-subscriptions.ts): each is left paused, unread, until the port's
// subscriptions change, then dispatched again — to the session when the steal was renewed,
// on to the app when it was dropped, or held once more while it stays held.
import type { PortSubscriptions } from "./port-subscriptions.js";

/** What can wait unread: a client socket or a request. */
export interface Holdable {
  pause(): unknown;
  resume(): unknown;
}

export class HeldSteals {
  /** Retries of what waits, run on the port's next change. */
  private waiting: Array<() => void> = [];
  private readonly unwatch: () => void;

  constructor(
    subscriptions: PortSubscriptions,
    /** The port number the subscriptions name. */
    port: number,
  ) {
    this.unwatch = subscriptions.onChange((changed) => {
      if (changed !== port || this.waiting.length === 0) return;
      const retry = this.waiting;
      this.waiting = [];
      for (const r of retry) r();
    });
  }

  /** How many connections and requests wait now. */
  get count(): number {
    return this.waiting.length;
  }

  /**
   * Leaves `stream` paused (unread) until the port's subscriptions change, then runs
   * `dispatch` again (true: held again); once dispatched somewhere the stream reads on.
   */
  hold(stream: Holdable, dispatch: () => boolean): void {
    stream.pause();
    this.waiting.push(() => {
      if (!dispatch()) stream.resume();
    });
  }

  /** Forgets what waits and stops watching (the proxy closes). */
  close(): void {
    this.unwatch();
    this.waiting = [];
  }
}
