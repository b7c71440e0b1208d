// The seam between the control-plane process and its features (sessions, agents, branching,
// queues, the admission webhook, …). A feature declares its flags (feature-flags.ts), the
// roles it runs in, whether its options turn it on, and what it runs: work every replica
// serves for the process's life, and leader-only work, one leadership term at a time. The
// runtime runs what a feature returns: it owns the leadership terms (leadership-terms.ts)
// and names every running part so a stop that hangs says where (lib/stop-deadline.ts). A
// feature never reads the process's options; what it needs from other features it declares
// in its `Needs` and the process layer passes in.
import { untilAborted } from "../../../lib/abortable-sleep.js";
import type { StopDeadline } from "../../../lib/stop-deadline.js";
import type { FeatureFlags } from "./feature-flags.js";
import type { LeadershipTerms, TermWork } from "./leadership-terms.js";
import { playsRole, type ControlPlaneMode, type ProcessRole } from "./process-mode.js";

/** What a feature runs once started. */
export interface RunningFeature {
  /** Work of every replica for the process's life; resolves once stopped after `signal` aborts. */
  serve?(signal: AbortSignal): Promise<void>;
  /** Leader-only work: one leadership term (never two at once). */
  lead?: TermWork;
  /**
   * On stop the process waits for this feature's last term to end (the queue splitters
   * forward what they received); other terms end with the process.
   */
  finishTermOnStop?: boolean;
}

export interface Feature<O, Needs, Exposes extends object = object> {
  /** Names its parts in logs and in the stop deadline's list. */
  readonly name: string;
  /** The roles it runs in (a process in `both` mode plays both). */
  readonly runsIn: readonly ProcessRole[];
  readonly flags: FeatureFlags<O>;
  /** Whether its options turn it on (an opt-in flag); default: wherever it runs. */
  enabled?(options: O): boolean;
  /** Builds it: what it runs, and what it offers other features. */
  start(options: O, needs: Needs): RunningFeature & Exposes;
}

/** Whether a process in `mode` with these options runs `feature`. */
export function featureRuns<O>(
  feature: Pick<Feature<O, never>, "runsIn" | "enabled">,
  mode: ControlPlaneMode,
  options: O,
): boolean {
  return feature.runsIn.some((role) => playsRole(mode, role)) && (feature.enabled?.(options) ?? true);
}

/** Where a started feature's parts run: the process's signal, its terms and its stop deadline. */
export interface FeatureRuntime {
  signal: AbortSignal;
  terms: LeadershipTerms;
  stopping: StopDeadline;
}

/**
 * Runs started features, each under its name: every leader work is registered before any
 * serving work starts (a serving part may hold the Lease, and no term may start before every
 * work is known). Returns what the process waits for before it exits.
 */
export function runFeatures(
  started: ReadonlyArray<readonly [string, RunningFeature]>,
  rt: FeatureRuntime,
): Promise<void>[] {
  const parts: Promise<void>[] = [];
  for (const [name, f] of started) {
    if (!f.lead) continue;
    rt.terms.add(name, f.lead);
    if (f.finishTermOnStop) {
      const lastTerm = untilAborted(rt.signal).then(() => rt.terms.ended(name));
      parts.push(rt.stopping.track(`${name} (last term)`, lastTerm));
    }
  }
  for (const [name, f] of started) if (f.serve) parts.push(rt.stopping.track(name, f.serve(rt.signal)));
  return parts;
}
