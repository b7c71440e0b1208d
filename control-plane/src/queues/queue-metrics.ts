// Prometheus metrics of the queue splitters (DESIGN §8): messages read from original queues,
// forwarded by destination, left to the deployed consumers only, not forwarded or not deleted
// because of an error, the time of a batch from receive to delete, and the splitters running.
// Labels are bounded — `destination` is `target` (the deployed consumers' temporary queue) or
// `session` (a session's output queue), `stage` where an error happened — never a session,
// queue name or URL.
import { Counter, Gauge, Histogram, Registry } from "prom-client";

export type SplitDestination = "target" | "session";
/** Where a batch failed: reading the original, deciding, sending a forward, deleting the original. */
export type SplitErrorStage = "receive" | "decide" | "send" | "delete";

export class SplitterMetrics {
  readonly registry: Registry;
  readonly #read: Counter;
  readonly #forwarded: Counter<"destination">;
  readonly #unmatched: Counter;
  readonly #errors: Counter<"stage">;
  readonly #duration: Histogram;
  readonly #splitters: Gauge;

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    this.#read = new Counter({
      name: "switchyard_queue_messages_read_total",
      help: "Messages the queue splitters received from original queues.",
      registers: [registry],
    });
    this.#forwarded = new Counter({
      name: "switchyard_queue_messages_forwarded_total",
      help: "Messages the queue splitters forwarded, by destination (target: the deployed consumers' temporary queue, session: a session's output queue).",
      labelNames: ["destination"],
      registers: [registry],
    });
    this.#unmatched = new Counter({
      name: "switchyard_queue_messages_unmatched_total",
      help: "Messages no session's filter took: forwarded to the deployed consumers only.",
      registers: [registry],
    });
    this.#errors = new Counter({
      name: "switchyard_queue_forward_errors_total",
      help: "Messages a queue splitter could not move on (they come back after their visibility timeout; a delete error re-forwards one), by stage (receive counts failed polls).",
      labelNames: ["stage"],
      registers: [registry],
    });
    this.#duration = new Histogram({
      name: "switchyard_queue_forward_duration_seconds",
      help: "Time of one splitter batch from receiving it to deleting it from the original queue.",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    this.#splitters = new Gauge({
      name: "switchyard_queue_splitters",
      help: "Queue splitters running in this control plane.",
      registers: [registry],
    });
  }

  read(n: number): void {
    if (n > 0) this.#read.inc(n);
  }

  forwarded(destination: SplitDestination, n: number): void {
    if (n > 0) this.#forwarded.inc({ destination }, n);
  }

  unmatched(n: number): void {
    if (n > 0) this.#unmatched.inc(n);
  }

  errors(stage: SplitErrorStage, n: number): void {
    if (n > 0) this.#errors.inc({ stage }, n);
  }

  batchDone(seconds: number): void {
    this.#duration.observe(seconds);
  }

  splitterStarted(): void {
    this.#splitters.inc();
  }

  splitterStopped(): void {
    this.#splitters.dec();
  }
}
