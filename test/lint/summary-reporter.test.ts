// The closing line of every test run ("tests: N passed, N failed, N skipped",
// test/summary-reporter.ts) must not let a file that never ran pass for a deliberate skip.
// Each case runs one fixture file in its own vitest process with the reporter and reads
// the line it printed.
import { describe, expect, it } from "vitest";
import { runVitestFixture } from "../support/vitest-fixture.js";

interface Run {
  exitCode: number;
  output: string;
  summary: string | undefined;
}

async function runFixture(name: string): Promise<Run> {
  const run = await runVitestFixture("test/lint/fixtures/summary-reporter/vitest.config.ts", {
    ...process.env,
    SWITCHYARD_FIXTURE: name,
  });
  const lines = run.stdout.split("\n").filter((l) => l.startsWith("tests: "));
  return { exitCode: run.exitCode, output: run.output, summary: lines.at(-1) };
}

describe("the test summary line", () => {
  it("counts the tests of a file whose beforeAll failed as failed, declared skips as skipped", async () => {
    const r = await runFixture("before-all-fails");
    expect(r.exitCode, r.output).not.toBe(0);
    expect(r.summary, r.output).toBe("tests: 0 passed, 2 failed, 2 skipped");
  });

  it("counts the tests of a suite whose beforeAll failed as failed, and the rest as they ran", async () => {
    const r = await runFixture("suite-before-all-fails");
    expect(r.exitCode, r.output).not.toBe(0);
    expect(r.summary, r.output).toBe("tests: 1 passed, 1 failed, 1 skipped");
  });

  it("counts passing tests as passed and declared or runtime skips as skipped", async () => {
    const r = await runFixture("passes-and-skips");
    expect(r.exitCode, r.output).toBe(0);
    expect(r.summary, r.output).toBe("tests: 2 passed, 0 failed, 4 skipped");
  });

  it("counts a file that failed after all its tests passed (afterAll) as one failure", async () => {
    const r = await runFixture("after-all-fails");
    expect(r.exitCode, r.output).not.toBe(0);
    expect(r.summary, r.output).toBe("tests: 1 passed, 1 failed, 0 skipped");
  });
});
