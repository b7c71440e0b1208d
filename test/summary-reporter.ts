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
