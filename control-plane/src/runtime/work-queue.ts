// A de-duplicating work queue after client-go's workqueue: a key waits at most once;
// a key being processed is never handed to a second worker, and if it is added
// meanwhile it is processed again once done. Delayed adds (requeueAfter) and per-key
// exponential backoff (rate-limited adds) are timers that end in a plain add.
import { backoffDelay, type BackoffPolicy } from "../../../lib/backoff.js";
import { atLeast, positive } from "../../../lib/option-error.js";

export interface BackoffOptions {
  /** Delay after the first failure, ms (default 100). Doubles per consecutive failure of the key. */
  baseMs?: number;
  /** Upper bound of the delay, ms (default 60 000). */
  maxMs?: number;
}

export class WorkQueue {
  readonly #backoff: BackoffPolicy;
  readonly #queue: string[] = [];
  /** Keys waiting to be processed (in #queue, or to be re-queued when their processing ends). */
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  #waiters: Array<(key: string | undefined) => void> = [];
  #shutDown = false;

  constructor(backoff: BackoffOptions = {}) {
    const initialMs = positive("backoff.baseMs", backoff.baseMs, 100);
    const maxMs = atLeast(
      "backoff.maxMs",
      positive("backoff.maxMs", backoff.maxMs, 60_000),
      "backoff.baseMs",
      initialMs,
    );
    this.#backoff = { initialMs, maxMs };
  }

  /** Keys waiting (not counting those being processed or delayed). */
  get length(): number {
    return this.#queue.length;
  }

  get processing(): number {
    return this.#processing.size;
  }

  get shuttingDown(): boolean {
    return this.#shutDown;
  }

  add(key: string): void {
    if (this.#shutDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    if (this.#processing.has(key)) return; // re-queued by done()
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#dirty.delete(key);
      this.#processing.add(key);
      waiter(key);
    } else {
      this.#queue.push(key);
    }
  }

  /** Adds `key` after `delayMs`; of several pending delays for one key the earliest wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.#shutDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const pending = this.#timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref?.();
    this.#timers.set(key, { at, timer });
  }

  /** Adds `key` after its backoff delay, and counts a failure for it. Returns the delay used. */
  addRateLimited(key: string, overrideMs?: number): number {
    const failures = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, failures);
    const delay = overrideMs ?? this.backoffFor(failures);
    this.addAfter(key, delay);
    return delay;
  }

  /** Backoff delay after `failures` consecutive failures. */
  backoffFor(failures: number): number {
    return backoffDelay(this.#backoff, failures - 1);
  }

  /** Forgets `key`'s failures: its next failure starts again at the base delay. */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /** Next key to process, or undefined once shut down. The caller must call done(key). */
  get(): Promise<string | undefined> {
    if (this.#shutDown) return Promise.resolve(undefined);
    const key = this.#queue.shift();
    if (key !== undefined) {
      this.#dirty.delete(key);
      this.#processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  done(key: string): void {
    this.#processing.delete(key);
    if (this.#dirty.has(key)) {
      this.#dirty.delete(key);
      this.add(key);
    }
  }

  /** Stops handing out keys: pending get()s resolve undefined, timers are dropped. */
  shutDown(): void {
    this.#shutDown = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    this.#queue.length = 0;
    this.#dirty.clear();
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w(undefined);
  }
}
