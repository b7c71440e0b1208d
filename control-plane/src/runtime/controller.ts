// A controller: a work queue of object keys fed by informer events (through mapping
// functions, e.g. pod → the sessions that target it), drained by a bounded number of
// workers that call one Reconciler. The reconciler is level-triggered: it gets only a
// key and reads the state itself, so dropped, merged or repeated events are harmless.
// Error kinds decide what happens next (see reconcile-errors.ts).
import { setMaxListeners } from "node:events";
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { integerIn, OptionError } from "../../../lib/option-error.js";
import { ControllerMetrics } from "./controller-metrics.js";
import { keyOf, keyString, parseKeyString, type ObjectKey } from "./object-key.js";
import { reconcileErrorKind, TerminalReconcileError, TransientReconcileError } from "./reconcile-errors.js";
import type { InformerEvent, ResourceInformer } from "./resource-informer.js";
import { WorkQueue, type BackoffOptions } from "./work-queue.js";

export type ReconcileResult = { requeueAfterMs?: number } | void;

export interface Reconciler {
  /** Moves the object named by `key` one step toward its desired state. NotFound means nothing to do. */
  reconcile(key: ObjectKey, signal: AbortSignal): Promise<ReconcileResult>;
  /** Records a terminal failure (typically a condition on the object); not retried. */
  onTerminalError?(key: ObjectKey, error: TerminalReconcileError, signal: AbortSignal): Promise<void>;
}

/** Maps an informer event to the keys to reconcile; undefined/[] means none. */
export type KeyMapper<T> = (obj: T, event: InformerEvent) => ObjectKey | ObjectKey[] | undefined;
/** Decides whether an event should wake the controller at all. */
export type EventPredicate<T> = (obj: T, event: InformerEvent) => boolean;

export interface WatchOptions<T> {
  /** Default: the object's own key. */
  map?: KeyMapper<T>;
  /** All must pass. Default: every event. */
  predicates?: EventPredicate<T>[];
}

export interface ControllerOptions {
  /** Short name, used in logs and as the metrics label (e.g. "cluster-session"). */
  name: string;
  reconciler: Reconciler;
  /** Reconciles running at once, for different keys (default 4). */
  concurrency?: number;
  /** Per-key backoff after transient failures. */
  backoff?: BackoffOptions;
  /** Consecutive conflicts of one key retried at once before falling back to backoff (default 5). */
  maxImmediateConflicts?: number;
  logger?: Logger;
  /** Shared by the controllers of one process; default: a new one on its own Registry. */
  metrics?: ControllerMetrics;
}

export class ControllerStartedError extends Error {
  readonly code = "SWITCHYARD_CONTROLLER_STARTED";
  constructor(name: string) {
    super(`controller ${name} was already started; a Controller runs once — create a new one to run again`);
    this.name = "ControllerStartedError";
  }
}

interface Source {
  informer: ResourceInformer<KubernetesObject>;
  attach(): () => void;
}

export class Controller {
  readonly name: string;
  readonly metrics: ControllerMetrics;
  readonly #reconciler: Reconciler;
  readonly #concurrency: number;
  readonly #maxConflicts: number;
  readonly #queue: WorkQueue;
  readonly #logger: Logger | undefined;
  readonly #sources: Source[] = [];
  readonly #conflicts = new Map<string, number>();
  #started = false;

  constructor(options: ControllerOptions) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(options.name ?? "")) {
      throw new OptionError("name", `must be a DNS label such as "cluster-session", got "${options.name}"`);
    }
    if (typeof options.reconciler?.reconcile !== "function") {
      throw new OptionError("reconciler", "must have a reconcile(key, signal) method");
    }
    const concurrency = integerIn("concurrency", options.concurrency, 4, 1, 1000);
    const maxConflicts = integerIn("maxImmediateConflicts", options.maxImmediateConflicts, 5, 0);
    this.name = options.name;
    this.#reconciler = options.reconciler;
    this.#concurrency = concurrency;
    this.#maxConflicts = maxConflicts;
    this.#queue = new WorkQueue(options.backoff);
    this.#logger = options.logger?.child({ controller: options.name });
    this.metrics = options.metrics ?? new ControllerMetrics();
  }

  /** Queues `key` for reconcile (de-duplicated with keys already waiting). */
  enqueue(key: ObjectKey): void {
    this.#queue.add(keyString(key));
  }

  /** Queues `key` after `delayMs`. */
  enqueueAfter(key: ObjectKey, delayMs: number): void {
    this.#queue.addAfter(keyString(key), delayMs);
  }

  /** Keys waiting now (for tests and metrics). */
  get queueLength(): number {
    return this.#queue.length;
  }

  /**
   * Reconciles on the informer's events. The controller starts the informer (if not already
   * running) and waits for its first LIST before reconciling anything.
   */
  watch<T extends KubernetesObject>(informer: ResourceInformer<T>, options: WatchOptions<T> = {}): this {
    const map: KeyMapper<T> = options.map ?? ((obj) => keyOf(obj));
    const predicates = options.predicates ?? [];
    this.#sources.push({
      informer: informer as unknown as ResourceInformer<KubernetesObject>,
      attach: () => {
        const handler = (event: InformerEvent, obj: T) => {
          for (const p of predicates) if (!p(obj, event)) return;
          const keys = map(obj, event);
          if (keys === undefined) return;
          for (const k of Array.isArray(keys) ? keys : [keys]) this.enqueue(k);
        };
        const detach = informer.subscribe(handler);
        // A shared informer may have listed before this controller attached (a new leader's
        // warm cache, a controller that publishes from the cache first): those adds went to
        // nobody, so the cache is replayed as adds, as client-go does for a handler added to a
        // running informer. Without it an object nobody touches again waits for the resync.
        for (const obj of informer.list()) handler("add", obj);
        return detach;
      },
    });
    return this;
  }

  /** Runs until `signal` aborts; in-flight reconciles see the abort and are awaited. */
  async start(signal: AbortSignal): Promise<void> {
    if (this.#started) throw new ControllerStartedError(this.name);
    this.#started = true;
    if (signal.aborted) return;
    // One listener on the caller's signal; informers, sync waits and reconciles hang on ours.
    const inner = new AbortController();
    setMaxListeners(0, inner.signal);
    const onAbort = () => {
      this.#queue.shutDown();
      inner.abort(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    const detach = this.#sources.map((s) => s.attach());
    const informers = [...new Set(this.#sources.map((s) => s.informer))];
    const running = informers.map((i) => i.start(inner.signal));
    this.metrics.registerQueue(this.name, () => this.#queue.length);
    try {
      try {
        await Promise.all(informers.map((i) => i.waitForSync(inner.signal)));
      } catch {
        return; // aborted before the caches filled
      }
      this.#logger?.info({ informers: informers.map((i) => i.what) }, "caches synced; reconciling");
      const workers = Array.from({ length: this.#concurrency }, () => this.#worker(inner.signal));
      await Promise.all(workers);
    } finally {
      signal.removeEventListener("abort", onAbort);
      inner.abort();
      this.#queue.shutDown();
      for (const d of detach) d();
      this.metrics.unregisterQueue(this.name);
      await Promise.all(running);
    }
  }

  async #worker(signal: AbortSignal): Promise<void> {
    for (;;) {
      const key = await this.#queue.get();
      if (key === undefined) return;
      try {
        await this.#reconcileOne(key, signal);
      } finally {
        this.#queue.done(key);
      }
    }
  }

  async #reconcileOne(key: string, signal: AbortSignal): Promise<void> {
    const objectKey = parseKeyString(key);
    const t0 = performance.now();
    let result: ReconcileResult;
    try {
      result = await this.#reconciler.reconcile(objectKey, signal);
    } catch (err) {
      this.metrics.observe(this.name, "error", (performance.now() - t0) / 1000);
      if (signal.aborted) return; // shutting down: the next process picks it up from the API server
      await this.#handleError(key, objectKey, err, signal);
      return;
    }
    this.#conflicts.delete(key);
    this.#queue.forget(key);
    const after = result?.requeueAfterMs;
    this.metrics.observe(
      this.name,
      after !== undefined ? "requeue" : "success",
      (performance.now() - t0) / 1000,
    );
    if (after !== undefined && !signal.aborted) this.#queue.addAfter(key, Math.max(0, after));
  }

  async #handleError(key: string, objectKey: ObjectKey, err: unknown, signal: AbortSignal): Promise<void> {
    const kind = reconcileErrorKind(err);
    this.metrics.error(this.name, kind);
    const message = err instanceof Error ? err.message : String(err);
    if (kind === "conflict") {
      const n = (this.#conflicts.get(key) ?? 0) + 1;
      this.#conflicts.set(key, n);
      if (n <= this.#maxConflicts) {
        this.#logger?.debug({ key, err: message }, "conflict; retrying at once");
        this.#queue.add(key);
        return;
      }
      // A key that keeps conflicting is fighting another writer: back off.
    } else {
      this.#conflicts.delete(key);
    }
    if (kind === "terminal") {
      this.#queue.forget(key);
      this.#logger?.warn({ key, err: message }, "reconcile failed terminally; not retrying");
      const terminal =
        err instanceof TerminalReconcileError
          ? err
          : new TerminalReconcileError("ReconcileFailed", message, { cause: err });
      if (this.#reconciler.onTerminalError) {
        try {
          await this.#reconciler.onTerminalError(objectKey, terminal, signal);
        } catch (recordErr) {
          // Recording the condition is itself worth retrying: go through the whole reconcile again.
          this.#logger?.warn({ key, err: String(recordErr) }, "could not record terminal error; retrying");
          this.#queue.addRateLimited(key);
        }
      }
      return;
    }
    const override = err instanceof TransientReconcileError ? err.retryAfterMs : undefined;
    const delay = this.#queue.addRateLimited(key, override);
    this.#logger?.warn({ key, err: message, retryInMs: delay }, "reconcile failed; retrying");
  }
}
