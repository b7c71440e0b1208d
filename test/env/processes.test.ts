import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
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

  it("sweeps only its own directories: an old directory of another name stays, however old", async () => {
    // `npm start` once kept its logs in switchyard-env/embedded-logs: a sweep took it for an
    // abandoned set and removed it under a running stack (ENOENT on its next kubeconfig).
    const other = join(root, "switchyard-env", "embedded-logs");
    const abandoned = join(root, "switchyard-env", "set-abandoned");
    for (const d of [other, abandoned]) {
      mkdirSync(d, { recursive: true });
      const old = new Date(Date.now() - 3600_000);
      utimesSync(d, old, old);
    }
    await sweepOrphans();
    expect(existsSync(other)).toBe(true);
    expect(existsSync(abandoned)).toBe(false);
  });

  it("starts nothing in a group that was removed (stopped, or swept meanwhile)", () => {
    const group = new ProcessGroupDir(join(root, "switchyard-env", "set-removed"));
    group.remove();
    expect(() => group.spawn("late", "sleep", ["60"])).toThrow(/was removed/);
    expect(existsSync(group.dir)).toBe(false);
  });

  it("kills what references a removed set of its root, never what only ends in the same path", async () => {
    const idle = (arg: string) =>
      spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)", "--", arg], { stdio: "ignore" });
    const setPath = join(root, "switchyard-env", "set-gone");
    // Another run whose own root sits deeper (a CI run with TMPDIR=/tmp/ci-x/tmp) has
    // arguments that contain our root's path as a suffix: not ours.
    const nested = idle(`/elsewhere${setPath}/kubeconfig`);
    const ours = idle(`--kubeconfig=${setPath}/kubeconfig`);
    await new Promise((r) => setTimeout(r, 200));
    mkdirSync(join(root, "switchyard-env"), { recursive: true });
    expect(await sweepOrphans()).toBe(1);
    expect(isSameProcessAlive(ours.pid!, processStartTime(ours.pid!) ?? "gone")).toBe(false);
    expect(isSameProcessAlive(nested.pid!, processStartTime(nested.pid!)!)).toBe(true);
    nested.kill("SIGKILL");
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
