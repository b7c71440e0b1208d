// One error for every invalid option, flag or setting of every component: it names the
// option, what was wrong and (in the message) what would be right, and carries one stable
// code so callers and tests match on `code`, not on the message. The validators below
// are the checks options actually need; each returns the value (or its default) so a
// constructor reads `this.maxMs = positiveMs("maxMs", o.maxMs, 8000)`.

export const INVALID_OPTION = "SWITCHYARD_INVALID_OPTION";

export class OptionError extends Error {
  readonly code = INVALID_OPTION;
  constructor(
    /** The option as the user wrote it: a flag (`--listen`), a field path (`backoff.maxMs`). */
    readonly option: string,
    /** What is wrong with it and what to give instead. */
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(`${option}: ${problem}`, options);
    this.name = "OptionError";
  }
}

const show = (v: unknown): string => (typeof v === "string" ? JSON.stringify(v) : String(v));

/** A finite number > 0 (a duration in ms, a size); `fallback` when undefined. */
export function positive(option: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0)
    throw new OptionError(option, `must be a positive number, got ${show(v)}`);
  return v;
}

/** A finite number ≥ 0; `fallback` when undefined. */
export function nonNegative(option: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0)
    throw new OptionError(option, `must be a number ≥ 0, got ${show(v)}`);
  return v;
}

/** An integer in [min, max]; `fallback` when undefined. */
export function integerIn(
  option: string,
  value: number | undefined,
  fallback: number,
  min: number,
  max = Number.MAX_SAFE_INTEGER,
): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < min || v > max)
    throw new OptionError(option, `must be an integer from ${min} to ${max}, got ${show(v)}`);
  return v;
}

/** A number in [0, 1]; `fallback` when undefined. */
export function fraction(option: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (typeof v !== "number" || !(v >= 0 && v <= 1))
    throw new OptionError(option, `must be a number from 0 to 1, got ${show(v)}`);
  return v;
}

/** `value` ≥ `min`, where `min` is another option (named in the message). */
export function atLeast(option: string, value: number, minOption: string, min: number): number {
  if (!(value >= min)) throw new OptionError(option, `must be ≥ ${minOption} (${min}), got ${show(value)}`);
  return value;
}

/** One of `allowed`; `fallback` when undefined. */
export function oneOf<T extends string>(
  option: string,
  value: string | undefined,
  allowed: readonly T[],
  fallback?: T,
): T {
  const v = value ?? fallback;
  if (v === undefined || !(allowed as readonly string[]).includes(v))
    throw new OptionError(option, `must be one of ${allowed.join(", ")}, got ${show(v)}`);
  return v as T;
}

/** A non-empty string. */
export function required(option: string, value: string | undefined): string {
  if (typeof value !== "string" || value.trim() === "")
    throw new OptionError(option, "is required and must not be empty");
  return value;
}
