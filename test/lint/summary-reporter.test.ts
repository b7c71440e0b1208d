// The closing line of every test run ("tests: N passed, N failed, N skipped",
// test/summary-reporter.ts) must not let a file that never ran pass for a deliberate skip.
// Each case runs one fixture file in its own vitest process with the reporter and reads
// the line it printed.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const root = new URL("../..", import.meta.url).pathname;

interface Run {
  exitCode: number;
  output: string;
  summary: string | undefined;
}

function runFixture(name: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        join(root, "node_modules/vitest/vitest.mjs"),
        "run",
        "--config",
        "test/lint/fixtures/summary-reporter/vitest.config.ts",
      ],
      { cwd: root, env: { ...process.env, SWITCHYARD_FIXTURE: name }, timeout: 60_000 },
      (err, stdout, stderr) => {
        const output = `${stdout}${stderr}`;
        const lines = stdout.split("\n").filter((l) => l.startsWith("tests: "));
        resolve({
          exitCode: err ? (typeof err.code === "number" ? err.code : -1) : 0,
          output,
          summary: lines.at(-1),
        });
      },
    );
  });
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
