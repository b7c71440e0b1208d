// Serialises work on one target inside this process: two sessions on the same
// Deployment reconcile on different queue keys, and "the last session ended → restore
// the template" must not interleave with "a new session → patch it in". One member
// control plane acts per cluster, so an in-process lock is enough.

export class TargetLocks {
  readonly #tails = new Map<string, Promise<void>>();

  async with<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(id) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((r) => (release = r));
    const tail = previous.then(() => current);
    this.#tails.set(id, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.#tails.get(id) === tail) this.#tails.delete(id);
    }
  }

  get size(): number {
    return this.#tails.size;
  }
}
