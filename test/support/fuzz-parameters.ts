// The fast-check parameters every fuzz suite runs with: one seed per run, taken from
// SWITCHYARD_FUZZ_SEED when set (to replay a failure), fixed under CI, or drawn once per process, printed
// with the failure by fast-check itself ("seed: …, path: …") and by `describeSeed`, and a
// bounded number of runs so each file finishes in about a minute on 2 cores.
// SWITCHYARD_FUZZ_RUNS scales every suite's runs (e.g. 10 for a long local soak).
import type fc from "fast-check";

const fromEnv = process.env.SWITCHYARD_FUZZ_SEED ? Number(process.env.SWITCHYARD_FUZZ_SEED) : NaN;
/**
 * Under CI a fixed seed: a red build is then the change's doing and replays exactly, not a new
 * draw (new draws are for local runs and soaks, `SWITCHYARD_FUZZ_RUNS`).
 */
export const CI_FUZZ_SEED = 20261123;
/** The seed of this process's fuzz runs. */
export const FUZZ_SEED = Number.isSafeInteger(fromEnv)
  ? fromEnv
  : process.env.CI
    ? CI_FUZZ_SEED
    : Math.floor(Math.random() * 2 ** 31);
const scale = Number(process.env.SWITCHYARD_FUZZ_RUNS);

/** `{ seed, numRuns }` for `fc.assert`; `numRuns` is this suite's bound, scaled by SWITCHYARD_FUZZ_RUNS. */
export function fuzzParameters<T>(numRuns: number, extra: fc.Parameters<T> = {}): fc.Parameters<T> {
  const runs = Number.isFinite(scale) && scale > 0 ? Math.max(1, Math.round(numRuns * scale)) : numRuns;
  return { seed: FUZZ_SEED, numRuns: runs, ...extra };
}

/** The line to put in a failure message so the run can be replayed. */
export function describeSeed(): string {
  return `replay with SWITCHYARD_FUZZ_SEED=${FUZZ_SEED}`;
}
