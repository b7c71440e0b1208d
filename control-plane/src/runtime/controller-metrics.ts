// Prometheus metrics of the controllers in one process, on a per-instance Registry:
// reconcile duration by controller and result, errors by controller and kind, and
// queue depth read at scrape. Labels are the controller name (a handful per process),
// the result and the error kind — never an object name.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { ReconcileErrorKind } from "./reconcile-errors.js";

export type ReconcileOutcome = "success" | "requeue" | "error";

const ERROR_KINDS: readonly ReconcileErrorKind[] = ["transient", "terminal", "conflict"];

export class ControllerMetrics {
  readonly registry: Registry;
  readonly #duration: Histogram<"controller" | "result">;
  readonly #errors: Counter<"controller" | "kind">;
  readonly #depthSources = new Map<string, () => number>();

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    this.#duration = new Histogram({
      name: "switchyard_reconcile_duration_seconds",
      help: "Time one reconcile took, by controller and result.",
      labelNames: ["controller", "result"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
    this.#errors = new Counter({
      name: "switchyard_reconcile_errors_total",
      help: "Reconciles that ended in an error, by controller and error kind (transient, terminal, conflict).",
      labelNames: ["controller", "kind"],
      registers: [registry],
    });
    const depth = this.#depthSources;
    new Gauge({
      name: "switchyard_reconcile_queue_depth",
      help: "Keys waiting in a controller's work queue.",
      labelNames: ["controller"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [controller, read] of depth) this.set({ controller }, read());
      },
    });
  }

  /** @internal called by Controller */
  registerQueue(controller: string, depth: () => number): void {
    this.#depthSources.set(controller, depth);
    // Errors of a running controller are published from 0: "no errors" is a value, not a gap.
    for (const kind of ERROR_KINDS) this.#errors.inc({ controller, kind }, 0);
  }

  /** @internal called by Controller */
  unregisterQueue(controller: string): void {
    this.#depthSources.delete(controller);
  }

  observe(controller: string, result: ReconcileOutcome, seconds: number): void {
    this.#duration.observe({ controller, result }, seconds);
  }

  error(controller: string, kind: ReconcileErrorKind): void {
    this.#errors.inc({ controller, kind });
  }
}
