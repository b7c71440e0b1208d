// What the last successful ensure of a target gave (its agent secret and its agents), kept
// for a short time: many sessions share a target, and a burst of their reconciles (the
// informer's resync re-delivers every session at once) then costs one Secret read and one
// agent health check per target, not one per session under the target's lock. An entry is
// used only for the ready pods it was made for, and is forgotten when an agent stops on its
// own (the provisioner's watch), when the agents are released, and when an ensure fails.
import type { V1Pod } from "@kubernetes/client-node";
import { nonNegative } from "../../../lib/option-error.js";
import type { AgentEndpoint } from "./agent-provisioner.js";
import type { AgentSecret } from "./agent-secret-store.js";

export interface EnsuredTarget {
  secret: AgentSecret;
  agents: AgentEndpoint[];
}

/** Default time an ensure's result stands for the next reconciles of the same target, ms (0: never). */
export const ENSURED_FRESH_MS = 5000;

/** The ready pods an ensure saw, as one string: pods replaced, added or gone change it. */
function podsKey(pods: readonly V1Pod[]): string {
  return pods
    .map((p) => `${p.metadata?.uid ?? p.metadata?.name}@${p.status?.podIP ?? ""}`)
    .sort()
    .join(",");
}

export class EnsuredTargets {
  readonly #entries = new Map<string, { at: number; pods: string; value: EnsuredTarget }>();
  readonly #freshMs: number;
  readonly #now: () => number;

  constructor(freshMs?: number, now: () => number = Date.now) {
    this.#freshMs = nonNegative("ensuredFreshMs", freshMs, ENSURED_FRESH_MS);
    this.#now = now;
  }

  /** The target's last result, when it is fresh and was made for exactly these ready pods. */
  get(id: string, readyPods: readonly V1Pod[]): EnsuredTarget | undefined {
    const e = this.#entries.get(id);
    if (!e) return undefined;
    if (this.#now() - e.at >= this.#freshMs || e.pods !== podsKey(readyPods)) {
      this.#entries.delete(id);
      return undefined;
    }
    return e.value;
  }

  set(id: string, readyPods: readonly V1Pod[], value: EnsuredTarget): void {
    this.#entries.set(id, { at: this.#now(), pods: podsKey(readyPods), value });
  }

  forget(id: string): void {
    this.#entries.delete(id);
  }

  get size(): number {
    return this.#entries.size;
  }
}
