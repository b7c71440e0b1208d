// The integration projects' leak checks: a file that leaves a process or an owned directory
// behind fails, named (test/file-leaks.ts), and what it left is killed; a file that stops what
// it started passes. The teardown's report names the file each leftover was created by.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { leakReport } from "../global-setup.js";
import { runVitestFixture, type FixtureRun } from "../support/vitest-fixture.js";

let envDir: string | undefined;

afterEach(() => {
  if (envDir) rmSync(envDir, { recursive: true, force: true });
  envDir = undefined;
});

async function runFixture(name: string): Promise<FixtureRun & { envRoot: string }> {
  envDir = mkdtempSync(join(tmpdir(), "file-leaks-"));
  const env: NodeJS.ProcessEnv = { ...process.env, SWITCHYARD_FIXTURE: name, SWITCHYARD_ENV_TMPDIR: envDir };
  delete env.SWITCHYARD_TEST_FILE;
  const run = await runVitestFixture("test/lint/fixtures/file-leaks/vitest.config.ts", env);
  return { ...run, envRoot: join(envDir, "switchyard-env") };
}

/** Live `sleep 300` processes whose environment names this run's env directory. */
function sleepersOf(dir: string): number[] {
  return readdirSync("/proc")
    .map(Number)
    .filter((pid) => Number.isInteger(pid))
    .filter((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, "latin1");
        return (
          cmdline === ["sleep", "300", ""].join("\0") &&
          readFileSync(`/proc/${pid}/environ`, "latin1").includes(dir)
        );
      } catch {
        return false;
      }
    });
}

describe("leak checks of the integration projects", () => {
  it("fails a file that leaves a process and a directory behind, naming it, and kills what it left", async () => {
    const r = await runFixture("leaves-a-process");
    expect(r.exitCode, r.output).not.toBe(0);
    expect(r.output).toMatch(
      /test\/lint\/fixtures\/file-leaks\/leaves-a-process\.fixture\.ts left behind after its last hook — processes still running: sleeper \(pid \d+\); directories not removed: .*set-leak-/,
    );
    expect(r.output).toMatch(/tests: 1 passed, 1 failed|tests: 0 passed, 1 failed/);
    expect(sleepersOf(envDir!)).toEqual([]);
    expect(existsSync(r.envRoot) ? readdirSync(r.envRoot) : []).toEqual([]);
  });

  it("passes a file that stops and removes what it started", async () => {
    const r = await runFixture("stops-what-it-started");
    expect(r.exitCode, r.output).toBe(0);
    expect(r.output).not.toMatch(/left behind/);
  });
});

describe("the teardown's leak report", () => {
  it("names each file whose directories still held processes, and says nothing when none did", () => {
    expect(leakReport([{ dir: "/e/set-a", testFile: "test/integration/a.test.ts", killed: 0 }])).toEqual([]);
    expect(
      leakReport([
        { dir: "/e/set-a", testFile: "test/integration/a.test.ts", killed: 2 },
        { dir: "/e/launch-b", testFile: "test/integration/a.test.ts", killed: 1 },
        { dir: "/e/set-c", testFile: undefined, killed: 1 },
      ]),
    ).toEqual([
      "[test/env] teardown found processes left running; the run fails:",
      "[test/env]   test/integration/a.test.ts: 3 process(es) killed",
      "[test/env]   an unnamed owner (/e/set-c): 1 process(es) killed",
    ]);
  });
});
