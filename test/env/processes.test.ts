import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isSameProcessAlive, processStartTime, ProcessGroupDir, sweepOrphans } from "./processes.js";

let root: string;
const saved = process.env.SWITCHYARD_ENV_TMPDIR;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "switchyard-proc-test-"));
  process.env.SWITCHYARD_ENV_TMPDIR = root;
});
afterEach(() => {
  process.env.SWITCHYARD_ENV_TMPDIR = saved;
  if (saved === undefined) delete process.env.SWITCHYARD_ENV_TMPDIR;
  rmSync(root, { recursive: true, force: true });
});

describe("processes", () => {
  it("records children and stops them", async () => {
    const group = new ProcessGroupDir(join(root, "switchyard-env", "set-a"));
    const p = group.spawn("sleeper", "sleep", ["60"]);
    const owner = JSON.parse(readFileSync(join(group.dir, "owner.json"), "utf8"));
    expect(owner.processes.map((r: { name: string }) => r.name)).toEqual(["sleeper"]);
    await p.stop(1000);
    expect(p.hasExited()).toBe(true);
    expect(isSameProcessAlive(p.pid, owner.processes[0].start)).toBe(false);
    group.remove();
    expect(existsSync(group.dir)).toBe(false);
  });

  it("sweeps the processes of a set whose owner is dead, and leaves a live owner's set alone", async () => {
    const dir = join(root, "switchyard-env", "set-dead");
    const live = join(root, "switchyard-env", "set-live");
    const orphan = spawn("sleep", ["60"], { stdio: "ignore" });
    const deadOwner = spawn("true");
    await new Promise((r) => deadOwner.once("exit", r));
    const record = (d: string, ownerPid: number, ownerStart: string) => {
      new ProcessGroupDir(d); // creates the directory and owner file
      writeFileSync(
        join(d, "owner.json"),
        JSON.stringify({
          ownerPid,
          ownerStart,
          parentPid: 1,
          parentStart: "x",
          processes: [{ pid: orphan.pid, start: processStartTime(orphan.pid!), name: "sleep" }],
        }),
      );
    };
    record(live, process.pid, processStartTime(process.pid)!);
    expect(await sweepOrphans()).toBe(0);
    expect(existsSync(live)).toBe(true);
    record(dir, deadOwner.pid!, "1");
    expect(await sweepOrphans()).toBe(1);
    expect(existsSync(dir)).toBe(false);
    expect(isSameProcessAlive(orphan.pid!, processStartTime(orphan.pid!) ?? "gone")).toBe(false);
  });

  it("never kills a reused pid: the start time must match", async () => {
    const stranger = spawn("sleep", ["60"], { stdio: "ignore" });
    const dir = join(root, "switchyard-env", "set-reused");
    new ProcessGroupDir(dir);
    writeFileSync(
      join(dir, "owner.json"),
      JSON.stringify({
        ownerPid: 999_999_999,
        ownerStart: "1",
        parentPid: 1,
        parentStart: "x",
        processes: [{ pid: stranger.pid, start: "not-its-start-time", name: "etcd" }],
      }),
    );
    expect(await sweepOrphans()).toBe(0);
    expect(isSameProcessAlive(stranger.pid!, processStartTime(stranger.pid!)!)).toBe(true);
    stranger.kill("SIGKILL");
  });
});
