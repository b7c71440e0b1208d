// The watch events of a controller's own writes. A reconcile that writes (a finalizer, its
// status) and goes on in the same pass has already acted on what it wrote; the watch event
// of that write would only wake it again to find nothing to do — a GET and a pass per write,
// several per object as it is created. The reconciler's client reports what each of its
// writes returned (a patch made against the resourceVersion it read, so every change by
// anyone else came before it, with an event of its own), and the predicate lets those update
// events through no more: each is matched once, within `windowMs` of the write (an event
// that arrived before the write's answer leaves an entry that a later resync must not match).
// Writes by anyone else, resyncs, adds and deletes all wake the controller as before.
import type { KubernetesObject } from "@kubernetes/client-node";
import { nonNegative } from "../../../lib/option-error.js";
import type { EventPredicate } from "./controller.js";
import type { InformerEvent } from "./resource-informer.js";

/** Own writes remembered per object at most (a pass writes two or three). */
const PER_OBJECT = 4;

export class OwnWrites {
  /** Object key → what our writes returned (resourceVersion, when), not yet seen as events. */
  readonly #written = new Map<string, Array<{ rv: string; at: number }>>();
  readonly #windowMs: number;
  readonly #now: () => number;
  /** Events skipped as our own. */
  skipped = 0;

  constructor(options: { windowMs?: number; now?: () => number } = {}) {
    this.#windowMs = nonNegative("windowMs", options.windowMs, 10_000);
    this.#now = options.now ?? Date.now;
  }

  /** Notes what one of our writes returned. */
  record(written: KubernetesObject): void {
    const rv = written.metadata?.resourceVersion;
    if (!rv) return;
    const key = keyOf(written);
    const kept = this.#fresh(key);
    kept.push({ rv, at: this.#now() });
    this.#written.set(key, kept.slice(-PER_OBJECT));
  }

  /** EventPredicate: false (do not wake) for the update event of one of our own writes, once. */
  readonly notOwn: EventPredicate<KubernetesObject> = (obj: KubernetesObject, event: InformerEvent) => {
    const key = keyOf(obj);
    if (event === "delete") {
      this.#written.delete(key);
      return true;
    }
    if (!this.#written.has(key)) return true;
    const kept = this.#fresh(key);
    const at = event === "update" ? kept.findIndex((w) => w.rv === obj.metadata?.resourceVersion) : -1;
    if (at >= 0) kept.splice(at, 1);
    if (kept.length > 0) this.#written.set(key, kept);
    else this.#written.delete(key);
    if (at < 0) return true;
    this.skipped++;
    return false;
  };

  /** Objects with own writes not yet seen as events. */
  get size(): number {
    return this.#written.size;
  }

  #fresh(key: string): Array<{ rv: string; at: number }> {
    const now = this.#now();
    return (this.#written.get(key) ?? []).filter((w) => now - w.at < this.#windowMs);
  }
}

function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}
