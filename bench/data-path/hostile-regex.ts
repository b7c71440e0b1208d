// What a hostile filter regex costs an agent: each pattern that stalls a backtracking engine,
// matched by the filter engine every agent uses (proto/http-filter.ts, RE2) against inputs of
// 50 000 characters — three times Node's 16 KiB request-head limit — and, side by side,
// V8's own RegExp on the same pattern (in a worker thread, cut at its budget): the largest
// input it still answers within 200 ms (backtracking: the time grows exponentially). The figure the suites
// once asserted (each match well under a second) lives here.
import { performance } from "node:perf_hooks";
import { Worker } from "node:worker_threads";
import { compileFilterRegex } from "../../proto/http-filter.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { pct, round, writeResult } from "../support/stats-support.js";

export interface HostileRegexBenchOptions {
  /** Matches of each case (the median and the maximum are reported). */
  repeats: number;
  /** Length of every RE2 input. */
  length: number;
  /** V8's budget per match, ms: its input grows until one match takes longer. */
  v8BudgetMs: number;
}

export const defaultHostileRegexBench: HostileRegexBenchOptions = {
  repeats: 20,
  length: 50_000,
  v8BudgetMs: 200,
};

/** The hostile cases: a pattern, an input of `n` characters built for it, the answer. */
const CASES: Array<{ pattern: string; label: string; input: (n: number) => string; expected: boolean }> = [
  { pattern: "(a+)+$", label: "a×n + '!'", input: (n) => "a".repeat(n) + "!", expected: false },
  { pattern: "(a|a)*b", label: "a×n", input: (n) => "a".repeat(n), expected: false },
  {
    pattern: "(.*a){20}",
    label: "19 a among x",
    input: (n) => ("x".repeat(Math.max(1, Math.floor(n / 19) - 1)) + "a").repeat(19),
    expected: false,
  },
  {
    pattern: "^(([a-z])+.)+[A-Z]([a-z])+$",
    label: "a×n + '!'",
    input: (n) => "a".repeat(n) + "!",
    expected: false,
  },
];

function timeMatches(
  test: (s: string) => boolean,
  input: string,
  repeats: number,
  expected: boolean,
): number[] {
  const ms: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    const got = test(input);
    ms.push(performance.now() - t0);
    if (got !== expected) throw new Error(`answered ${got}, expected ${expected}`);
  }
  return ms;
}

/**
 * One V8 `RegExp#test` in a worker thread, cut at `budgetMs` (a backtracking match cannot be
 * interrupted from its own thread): its time in ms, or undefined when it ran over.
 */
async function v8Match(pattern: string, input: string, budgetMs: number): Promise<number | undefined> {
  const worker = new Worker(
    `const { parentPort, workerData } = require("node:worker_threads");
     const re = new RegExp(workerData.pattern);
     const t0 = performance.now();
     re.test(workerData.input);
     parentPort.postMessage(performance.now() - t0);`,
    { eval: true, workerData: { pattern, input } },
  );
  try {
    return await new Promise<number | undefined>((resolve, reject) => {
      const timer = setTimeout(() => resolve(undefined), budgetMs);
      worker.once("message", (ms: number) => (clearTimeout(timer), resolve(ms)));
      worker.once("error", (err) => (clearTimeout(timer), reject(err)));
    });
  } finally {
    await worker.terminate();
  }
}

/**
 * The largest input V8's RegExp answers within the budget: doubling from 8 characters up to
 * the RE2 length, then halving the gap to the first input it could not answer.
 */
async function v8Limit(pattern: string, input: (n: number) => string, budgetMs: number, maxLength: number) {
  let ok = { n: 0, ms: 0 };
  let over: number | undefined;
  for (let n = 8; n <= maxLength; n *= 2) {
    const ms = await v8Match(pattern, input(n), budgetMs);
    if (ms === undefined) {
      over = n;
      break;
    }
    ok = { n, ms: round(ms, 3) };
  }
  while (over !== undefined && over - ok.n > Math.max(1, ok.n / 16)) {
    const mid = Math.floor((ok.n + over) / 2);
    const ms = await v8Match(pattern, input(mid), budgetMs);
    if (ms === undefined) over = mid;
    else ok = { n: mid, ms: round(ms, 3) };
  }
  return { answeredUpTo: ok.n, ms: ok.ms, overBudgetAt: over };
}

export async function runHostileRegexBench(
  o: HostileRegexBenchOptions = defaultHostileRegexBench,
): Promise<void> {
  const rows = [];
  for (const c of CASES) {
    const re = compileFilterRegex(c.pattern);
    const ms = timeMatches((s) => re.test(s), c.input(o.length), o.repeats, c.expected);
    rows.push({
      pattern: c.pattern,
      input: c.label,
      re2: { length: o.length, p50Ms: pct(ms, 50), maxMs: Math.max(...ms) },
      v8: await v8Limit(c.pattern, c.input, o.v8BudgetMs, o.length),
    });
  }
  console.log(
    `hostile filter regexes: RE2 at ${o.length} characters vs V8's RegExp within ${o.v8BudgetMs} ms`,
  );
  for (const r of rows)
    console.log(
      `${r.pattern.padEnd(30)} ${r.input.padEnd(14)} RE2 p50 ${r.re2.p50Ms.toFixed(2)} ms, max ${r.re2.maxMs.toFixed(2)} ms` +
        ` | V8: ${r.v8.answeredUpTo} chars in ${r.v8.ms} ms` +
        (r.v8.overBudgetAt
          ? `, no answer within ${o.v8BudgetMs} ms at ${r.v8.overBudgetAt}`
          : ", every length"),
    );
  const worst = Math.max(...rows.map((r) => r.re2.maxMs));
  const goals: Goal[] = [
    // One hostile match must not hold an agent's event loop for long: 50 ms is what a
    // request already waits on a loaded pod.
    { name: "filter-regex-hostile-max", value: worst, op: "<=", target: 50, unit: "ms" },
  ];
  const verdicts = goals.map(decideGoal);
  console.log(
    `written ${writeResult("hostile-regex", { when: new Date().toISOString(), options: o, rows, goals: verdicts })}`,
  );
  for (const v of verdicts) console.log(v.line);
}
