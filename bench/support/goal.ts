// The one place a bench decides whether a goal is met and prints its line:
//   GOAL <name> <value><unit> <op><target><unit> met|missed
// The decision is made on the measured value as it is, never on the rounded figure the line
// shows (0.796 is not ">= 0.8" because it prints as 0.80). A goal is missed, too, when its
// value could not be measured (printed "n/a"), or when a condition the measurement itself
// depends on failed (`requires`: k6's thresholds, a run that lost requests); the line then
// says why after the verdict.
export type GoalOp = "<=" | ">=" | "==";

export interface Goal {
  name: string;
  /** undefined or NaN: not measured (missed). */
  value: number | undefined;
  op: GoalOp;
  target: number;
  /** Printed after the value and the target: "x", "ms", "s", "%", "MiB", "KiB", "pts" or "". */
  unit?: string;
  /** Decimals the line shows (default 2); of the target, as written (default: as the number prints). */
  digits?: number;
  targetDigits?: number;
  /** Conditions of a valid measurement; a false one makes the goal missed, named on the line. */
  requires?: Record<string, boolean>;
}

export interface GoalVerdict {
  name: string;
  value: number | undefined;
  target: string;
  met: boolean;
  /** Why a goal whose value meets the target is still missed. */
  failed: string[];
  line: string;
}

const holds = (value: number, op: GoalOp, target: number): boolean =>
  op === "<=" ? value <= target : op === ">=" ? value >= target : value === target;

export function decideGoal(g: Goal): GoalVerdict {
  const unit = g.unit ?? "";
  const measured = g.value !== undefined && Number.isFinite(g.value);
  const failed = Object.entries(g.requires ?? {})
    .filter(([, ok]) => !ok)
    .map(([what]) => what);
  const met = measured && holds(g.value!, g.op, g.target) && failed.length === 0;
  const shown = measured ? `${g.value!.toFixed(g.digits ?? 2)}${unit}` : "n/a";
  const target = `${g.op}${g.targetDigits === undefined ? g.target : g.target.toFixed(g.targetDigits)}${unit}`;
  const why = failed.length > 0 ? ` (${failed.join(", ")} failed)` : "";
  return {
    name: g.name,
    value: g.value,
    target,
    met,
    failed,
    line: `GOAL ${g.name} ${shown} ${target} ${met ? "met" : "missed"}${why}`,
  };
}

/** Decides every goal and prints their lines, in order; returns the verdicts (for the results file). */
export function printGoals(goals: Goal[], log: (line: string) => void = console.log): GoalVerdict[] {
  const verdicts = goals.map(decideGoal);
  for (const v of verdicts) log(v.line);
  return verdicts;
}
