// Runs vitest on a fixture in a process of its own, for tests of the repository's own test
// machinery (the summary line, the leak checks): the exit code and everything it printed.
import { execFile } from "node:child_process";
import { join } from "node:path";

const root = new URL("../..", import.meta.url).pathname;

export interface FixtureRun {
  exitCode: number;
  stdout: string;
  /** stdout then stderr. */
  output: string;
}

/** `vitest run --config <config>` from the repository root, with `env`. */
export function runVitestFixture(config: string, env: NodeJS.ProcessEnv): Promise<FixtureRun> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(root, "node_modules/vitest/vitest.mjs"), "run", "--config", config],
      { cwd: root, env, timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({
          exitCode: err ? (typeof err.code === "number" ? err.code : -1) : 0,
          stdout,
          output: `${stdout}${stderr}`,
        }),
    );
  });
}
