// Leadership terms, owned once for the whole process. Each leader-only work registers here
// by name; when the replica starts leading (a LeaseElector's `onStartedLeading`), every work
// is called with that term's signal, which aborts when the term ends. A work's next term is
// called only after its previous term resolved — its informers stopped, its in-flight
// reconciles and forwards done — so two terms of one work never run at once. A term that
// fails is logged and does not end the others; the next term calls the work again.
import type { Logger } from "pino";

/** One leadership term of a leader-only work: runs until `leading` aborts, then drains. */
export type TermWork = (leading: AbortSignal) => Promise<void>;

interface Registered {
  name: string;
  work: TermWork;
  /** Resolves when the latest term called (or skipped) has ended. */
  last: Promise<void>;
}

export class LeadershipTerms {
  readonly #works = new Map<string, Registered>();
  readonly #logger: Logger;
  #terms = 0;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Registers a work by name, before the first term: every term calls it. */
  add(name: string, work: TermWork): void {
    if (this.#terms > 0) throw new Error(`leader work "${name}" registered after a term started`);
    if (this.#works.has(name)) throw new Error(`leader work "${name}" registered twice`);
    this.#works.set(name, { name, work, last: Promise.resolve() });
  }

  /** How many terms have started. */
  get terms(): number {
    return this.#terms;
  }

  /** Starts a term of every work; pass it as a LeaseElector's `onStartedLeading`. */
  readonly startTerm = (leading: AbortSignal): void => {
    this.#terms++;
    for (const r of this.#works.values()) {
      r.last = r.last.then(async () => {
        if (leading.aborted) return;
        try {
          await r.work(leading);
        } catch (err) {
          this.#logger.error({ work: r.name, err: (err as Error).message }, "leader work failed");
        }
      });
    }
  };

  /** Resolves once the named work's latest term has ended (at once when it never ran). */
  ended(name: string): Promise<void> {
    const r = this.#works.get(name);
    if (!r) throw new Error(`no leader work named "${name}"`);
    return r.last;
  }
}
