import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventually } from "../../../test/support/poll.js";
import { parentDeathSignalAvailable, startLocalCommand } from "./local-command.js";

const moduleUrl = new URL("./local-command.ts", import.meta.url).href;
let dir: string;
const strays: number[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-local-command-"));
});
afterEach(() => {
  for (const pid of strays.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone, as it should be */
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Running (a zombie waiting for init to reap it counts as gone). */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(")") + 2));
  } catch {
    return process.platform !== "linux";
  }
};

/** CMD: a shell that starts a grandchild, writes both pids to `file`, then waits. */
const family = (file: string) => ["sh", "-c", `sleep 300 & echo "$$ $!" > ${file}; wait`];

async function pidsIn(file: string): Promise<[number, number]> {
  const text = await eventually("CMD to write its pids", () => {
    try {
      const t = readFileSync(file, "utf8");
      return t.endsWith("\n") ? t : undefined;
    } catch {
      return undefined;
    }
  });
  const [cmd, grandchild] = text.trim().split(" ").map(Number) as [number, number];
  strays.push(cmd, grandchild);
  return [cmd, grandchild];
}

/** A stand-in CLI process that runs CMD through startLocalCommand and stays up until killed. */
function fakeCli(file: string, parentDeathSignal: boolean, runDir?: string) {
  const script =
    `const { startLocalCommand } = await import(${JSON.stringify(moduleUrl)});` +
    `startLocalCommand("sh", ${JSON.stringify(family(file).slice(1))}, {` +
    ` env: process.env, warn: (l) => process.stderr.write(l + "\\n"), killGraceMs: 1000,` +
    ` parentDeathSignal: ${parentDeathSignal}, runDir: ${JSON.stringify(runDir)} });` +
    `setInterval(() => {}, 1000);`;
  const cli = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  cli.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  return { cli, stderr: () => stderr };
}

describe("startLocalCommand", () => {
  const variants = [
    { name: "the watchdog alone (as on macOS)", pdeathsig: false },
    ...(parentDeathSignalAvailable()
      ? [{ name: "setpriv --pdeathsig and the watchdog", pdeathsig: true }]
      : []),
  ];
  for (const v of variants) {
    it(`leaves neither CMD nor its child behind when the CLI is SIGKILLed: ${v.name}`, async () => {
      const file = join(dir, "pids");
      const { cli, stderr } = fakeCli(file, v.pdeathsig);
      const [cmd, grandchild] = await pidsIn(file);
      expect(alive(cmd) && alive(grandchild)).toBe(true);
      cli.kill("SIGKILL");
      await eventually("CMD and its child to be gone", () => !alive(cmd) && !alive(grandchild), {
        timeoutMs: 8000,
      });
      await eventually("the watchdog to say so", () =>
        stderr().includes(`the CLI (pid ${cli.pid}) ended without stopping sh; stopping it`),
      );
    });
  }

  it("removes the run's directory once CMD's group is gone when the CLI is SIGKILLed", async () => {
    const file = join(dir, "pids");
    const runDir = join(dir, "run");
    mkdirSync(join(runDir, "scratch"), { recursive: true });
    writeFileSync(join(runDir, "scratch", "file"), "x");
    const { cli } = fakeCli(file, false, runDir);
    const [cmd, grandchild] = await pidsIn(file);
    cli.kill("SIGKILL");
    await eventually("the run's directory to be gone", () => !existsSync(runDir), { timeoutMs: 8000 });
    // Not before CMD's group, which may still use it while it shuts down.
    expect(alive(cmd) || alive(grandchild)).toBe(false);
  });

  it("leaves the run's directory to a CLI that said done", async () => {
    const runDir = join(dir, "run");
    mkdirSync(runDir);
    const c = startLocalCommand("sh", ["-c", "exit 0"], { env: process.env, warn: () => {}, runDir });
    await new Promise((r) => c.child.once("exit", r));
    await c.finish();
    // The watchdog has read `done` and exited without touching it: the CLI removes it itself.
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(runDir)).toBe(true);
  });

  it("forwards a signal to CMD's whole group, and reports CMD's end as a plain child's", async () => {
    const file = join(dir, "pids");
    const lines: string[] = [];
    const c = startLocalCommand("sh", family(file).slice(1), {
      env: process.env,
      warn: (l) => lines.push(l),
    });
    const [cmd, grandchild] = await pidsIn(file);
    const exited = new Promise((r) => c.child.once("exit", (code, signal) => r(signal ?? code)));
    // SIGTERM: a non-interactive sh starts background jobs with SIGINT ignored, on a terminal too.
    c.signal("SIGTERM");
    expect(await exited).toBe("SIGTERM");
    await c.finish();
    await eventually("the grandchild to be gone", () => !alive(grandchild) && !alive(cmd));
    expect(lines).toEqual([]); // nothing was left to stop
  });

  it("stops what CMD left running when it exits, saying so in one line", async () => {
    const file = join(dir, "pids");
    const lines: string[] = [];
    const c = startLocalCommand("sh", ["-c", `sleep 300 & echo "$$ $!" > ${file}`], {
      env: process.env,
      warn: (l) => lines.push(l),
      killGraceMs: 1000,
    });
    const exited = new Promise((r) => c.child.once("exit", r));
    const [, grandchild] = await pidsIn(file);
    await exited;
    expect(alive(grandchild)).toBe(true);
    await c.finish();
    expect(lines).toEqual([
      expect.stringMatching(/^sh exited; stopping what it left running \(process group \d+\)$/),
    ]);
    await eventually("the left-over child to be gone", () => !alive(grandchild), { timeoutMs: 5000 });
  });

  it("takes CMD's group down with SIGKILL when SIGTERM is ignored", async () => {
    const file = join(dir, "pids");
    const c = startLocalCommand("sh", ["-c", `trap '' TERM; sleep 300 & echo "$$ $!" > ${file}; wait`], {
      env: process.env,
      warn: () => {},
      killGraceMs: 300,
    });
    const [cmd] = await pidsIn(file);
    const exited = new Promise((r) => c.child.once("exit", (code, signal) => r(signal ?? code)));
    c.takeDown();
    expect(await exited).toBe("SIGKILL");
    await c.finish();
    expect(alive(cmd)).toBe(false);
  });

  it("reports a command that does not exist as spawn does", async () => {
    const c = startLocalCommand("switchyard-no-such-command", [], { env: process.env, warn: () => {} });
    const err = await new Promise<Error>((r) => c.child.once("error", r));
    expect(err.message).toBe("spawn switchyard-no-such-command ENOENT");
    await c.finish();
  });
});
