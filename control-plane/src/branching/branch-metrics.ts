// Prometheus metrics of the branching controllers: branches made (by kind and copy method,
// with the time it took), failures by reason, expiries, and branches by phase read from the
// informer caches at scrape. Labels are bounded: two kinds, a handful of methods, phases and
// reasons; never a branch, database or namespace name.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { BranchDatabase, BranchKind } from "../../../proto/api/v1alpha1/index.js";

export class BranchMetrics {
  readonly registry: Registry;
  readonly #made: Histogram<"kind" | "method">;
  readonly #failed: Counter<"kind" | "reason">;
  readonly #expired: Counter<"kind">;
  #branches: () => Array<{ kind: BranchKind; items: readonly BranchDatabase[] }> = () => [];

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    this.#made = new Histogram({
      name: "switchyard_branch_provision_seconds",
      help: "Time from starting to make a database branch to its being ready, by kind and copy method (clone, template, stream).",
      labelNames: ["kind", "method"],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180],
      registers: [registry],
    });
    this.#failed = new Counter({
      name: "switchyard_branch_provision_errors_total",
      help: "Failed attempts to make a database branch, by kind and reason (the CR's condition reason).",
      labelNames: ["kind", "reason"],
      registers: [registry],
    });
    this.#expired = new Counter({
      name: "switchyard_branch_expired_total",
      help: "Database branches deleted because no session used them within their TTL, by kind.",
      labelNames: ["kind"],
      registers: [registry],
    });
    const branches = () => this.#branches();
    new Gauge({
      name: "switchyard_branches",
      help: "Database branch CRs in this cluster, by kind and phase.",
      labelNames: ["kind", "phase"],
      registers: [registry],
      collect() {
        this.reset();
        for (const { kind, items } of branches()) {
          const counts = new Map<string, number>();
          for (const b of items) {
            const phase = b.status?.phase ?? "Pending";
            counts.set(phase, (counts.get(phase) ?? 0) + 1);
          }
          for (const [phase, n] of counts) this.set({ kind, phase }, n);
        }
      },
    });
  }

  /** Where the branches-by-phase gauge reads from (the controllers' informer caches). */
  observe(source: () => Array<{ kind: BranchKind; items: readonly BranchDatabase[] }>): void {
    this.#branches = source;
  }

  made(kind: BranchKind, method: string, seconds: number): void {
    this.#made.observe({ kind, method }, seconds);
  }

  failed(kind: BranchKind, reason: string): void {
    this.#failed.inc({ kind, reason });
  }

  expired(kind: BranchKind): void {
    this.#expired.inc({ kind });
  }
}
