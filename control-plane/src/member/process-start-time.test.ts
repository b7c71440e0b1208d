// A pid and its start time name one process: the start time of a running process reads
// back the same, a finished one (or a wrong time) never matches, and a command name with
// spaces and parentheses does not shift the fields.
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, copyFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { testScratchDir } from "../../../test/support/scratch-dir.js";
import { isSameProcess, processStartTime } from "./process-start-time.js";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

function sleeper(command = "sleep"): ChildProcess {
  const c = spawn(command, ["300"], { stdio: "ignore" });
  children.push(c);
  return c;
}

const exited = (c: ChildProcess) => new Promise((r) => c.once("exit", r));

describe.runIf(existsSync("/proc/self/stat"))("process start time", () => {
  it("reads a running process's start time, the same each time", () => {
    const mine = processStartTime(process.pid);
    expect(mine).toMatch(/^\d+$/);
    expect(processStartTime(process.pid)).toBe(mine);
    expect(isSameProcess(process.pid, mine!)).toBe(true);
  });

  it("tells the recorded process from another one under the same pid", async () => {
    const c = sleeper();
    const start = processStartTime(c.pid!)!;
    expect(isSameProcess(c.pid!, start)).toBe(true);
    expect(isSameProcess(c.pid!, String(Number(start) + 1))).toBe(false);
    expect(isSameProcess(c.pid!, "")).toBe(false);
    c.kill("SIGTERM");
    await exited(c);
    expect(isSameProcess(c.pid!, start)).toBe(false);
  });

  it("reads past a command name holding spaces and parentheses", () => {
    const odd = join(testScratchDir("sy-start-time-"), "x) y (z");
    copyFileSync("/usr/bin/sleep", odd);
    chmodSync(odd, 0o755);
    const c = sleeper(odd);
    const plain = sleeper();
    const start = processStartTime(c.pid!);
    expect(start).toMatch(/^\d+$/);
    // Started within the same second or so as a plain one: the same field, not a shifted one.
    expect(Math.abs(Number(start) - Number(processStartTime(plain.pid!)))).toBeLessThan(500);
    expect(isSameProcess(c.pid!, start!)).toBe(true);
  });

  it("knows no process for pids that cannot name one", () => {
    for (const pid of [0, -1, 1.5, Number.NaN]) {
      expect(processStartTime(pid)).toBeUndefined();
      expect(isSameProcess(pid, "1")).toBe(false);
    }
  });
});
