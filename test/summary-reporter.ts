// Prints one plain closing line, "tests: N passed, N failed, N skipped", that any CI
// log reader understands, after vitest's own summary.
//
// Vitest reports the tests of a suite whose beforeAll failed as "skipped", which would let
// a file that never ran hide among deliberate skips. Here a test counts as skipped only
// when it was declared so (`it.skip`, `skipIf`, `todo`, a `-t` filter or `.only`
// elsewhere) or skipped itself while running (`ctx.skip()`); a test that was meant to run,
// never started, and sits under a suite or file with an error (a failed hook) counts as
// failed. A file that failed without any failed test (it did not load, or an afterAll
// failed) counts as one failure, so the line never reads "0 failed" for a failed run.
// Before it, the slowest files with their durations (where a run's time goes).
import type { Reporter, TestCase, TestModule } from "vitest/node";

export default class SummaryReporter implements Reporter {
  private readonly started = new Set<string>();

  onTestCaseReady(test: TestCase): void {
    this.started.add(test.id);
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      let failedHere = 0;
      for (const t of mod.children.allTests()) {
        const state = t.result().state;
        if (state === "passed") passed++;
        else if (state === "failed" || this.neverRanBecauseOfAnError(t)) failedHere++;
        else skipped++;
      }
      if (mod.state() === "failed" && failedHere === 0) failedHere = 1;
      failed += failedHere;
    }
    const left =
      process.env.SWITCHYARD_TEST_NODES === "0"
        ? " (SWITCHYARD_TEST_NODES=0: real nodes and real pods left out)"
        : "";
    process.stdout.write(slowestFiles(testModules));
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed, ${skipped} skipped${left}\n`);
  }

  /** Meant to run (declared so at collection), never started, and an enclosing hook failed. */
  private neverRanBecauseOfAnError(t: TestCase): boolean {
    if (t.options.mode === "skip" || t.options.mode === "todo" || this.started.has(t.id)) return false;
    let p: TestCase["parent"] = t.parent;
    while (p.type === "suite") {
      if (p.errors().length > 0) return true;
      p = p.parent;
    }
    return p.errors().length > 0;
  }
}

/** The `count` slowest files of the run, one per line, slowest first. */
export function slowestFiles(testModules: ReadonlyArray<TestModule>, count = 15): string {
  const timed = testModules
    .map((m) => ({ file: m.relativeModuleId, ms: m.diagnostic().duration }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, count);
  if (timed.length === 0) return "";
  const total = testModules.reduce((sum, m) => sum + m.diagnostic().duration, 0);
  const lines = timed.map((t) => `  ${(t.ms / 1000).toFixed(1).padStart(7)} s  ${t.file}`);
  return `\nslowest files (of ${(total / 1000).toFixed(0)} s in ${testModules.length} files):\n${lines.join("\n")}\n`;
}
