// Time as a dependency. Credential renewal is scheduled against a Clock so tests can
// move time forward (a token "near expiry" without waiting ten minutes) while every
// API call stays real. `systemClock` is the production clock.

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms` of this clock's time, or rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const t = setTimeout(
        () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      const onAbort = () => {
        clearTimeout(t);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

interface Sleeper {
  at: number;
  resolve: () => void;
}

/** A clock that moves only when told to. For tests. */
export class ManualClock implements Clock {
  private t: number;
  private sleepers: Sleeper[] = [];
  private readonly waiters: Array<{ n: number; resolve: () => void }> = [];

  constructor(startMs: number = Date.now()) {
    this.t = startMs;
  }

  now(): number {
    return this.t;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const s: Sleeper = { at: this.t + Math.max(0, ms), resolve };
      const onAbort = () => {
        this.sleepers = this.sleepers.filter((x) => x !== s);
        reject(signal?.reason);
      };
      s.resolve = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.sleepers.push(s);
      this.notify();
    });
  }

  /** Number of pending sleeps. */
  pending(): number {
    return this.sleepers.length;
  }

  /** Resolves once at least `n` sleeps are pending (something is waiting on this clock). */
  whenSleeping(n = 1): Promise<void> {
    if (this.sleepers.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  /** Earliest pending wake-up time, if any. */
  nextWakeAt(): number | undefined {
    return this.sleepers.reduce<number | undefined>(
      (m, s) => (m === undefined || s.at < m ? s.at : m),
      undefined,
    );
  }

  /** Moves time forward by `ms`, waking every sleeper that is due. */
  advance(ms: number): void {
    this.set(this.t + ms);
  }

  /** Moves time to `ms` since the epoch (never backwards). */
  set(ms: number): void {
    this.t = Math.max(this.t, ms);
    const due = this.sleepers.filter((s) => s.at <= this.t);
    this.sleepers = this.sleepers.filter((s) => s.at > this.t);
    for (const s of due) s.resolve();
  }

  private notify(): void {
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i]!;
      if (this.sleepers.length >= w.n) {
        this.waiters.splice(i, 1);
        w.resolve();
      }
    }
  }
}
