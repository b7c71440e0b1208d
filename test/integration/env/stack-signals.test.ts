// `npm start` (the embedded stack) stops everything and removes its directories whatever
// way it is stopped: Ctrl-C — SIGINT to the whole foreground process group, as a terminal
// sends it, so every process of the stack gets it at once and in any order — during start-up
// and once ready, SIGTERM, a second Ctrl-C; and a SIGKILLed run does not keep the next one
// from coming up. Each run gets a private SWITCHYARD_ENV_TMPDIR, so "nothing left" is exact:
// no process names it (in its environment, inherited by every descendant, or its command
// line) and its switchyard-env directory is empty. Ctrl-C once ready is how the failed-start case
// ends its second run, and SIGTERM how the SIGKILLed-run case ends its, so neither has a stack
// start of its own.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isSameProcessAlive, processStartTime } from "../../env/processes.js";
import { repoRoot } from "../../support/launch.js";
import { eventually } from "../../support/poll.js";

interface StackRun {
  npm: ChildProcess;
  scratch: string;
  output: () => string;
  /** Resolves when npm (and so the stack's owner) has exited. */
  exited: Promise<void>;
}

const runs: StackRun[] = [];

afterEach(async () => {
  for (const r of runs.splice(0)) {
    // Whatever a failed assertion left: kill it and its directory, then the scratch root.
    for (const pid of survivors(r.scratch)) kill(pid, "SIGKILL");
    rmSync(r.scratch, { recursive: true, force: true });
  }
});

function kill(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
}

/** `npm start` in its own process group (its pid is the group id), with a private env root. */
function npmStart(
  scratch = mkdtempSync(join(tmpdir(), "switchyard-stack-signals-")),
  env: Record<string, string> = {},
): StackRun {
  const npm = spawn("npm", ["start", "--silent"], {
    cwd: repoRoot,
    env: { ...process.env, SWITCHYARD_ENV_TMPDIR: scratch, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let out = "";
  npm.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  npm.stderr!.on("data", (b: Buffer) => (out += b.toString()));
  const exited = new Promise<void>((r) => npm.once("exit", () => r()));
  const run = { npm, scratch, output: () => out, exited };
  runs.push(run);
  return run;
}

/** Ctrl-C in a terminal: SIGINT to every process of the foreground group. */
const ctrlC = (r: StackRun) => process.kill(-r.npm.pid!, "SIGINT");

/** Live (not zombie) processes that carry the run's env root in their environment or command line. */
function survivors(scratch: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (/^[ZX]/.test(stat.slice(stat.lastIndexOf(")") + 2))) continue;
      const env = readFileSync(`/proc/${pid}/environ`, "utf8");
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (env.includes(`SWITCHYARD_ENV_TMPDIR=${scratch}\0`) || cmdline.includes(scratch)) found.push(pid);
    } catch {
      /* gone, or not ours */
    }
  }
  return found;
}

/** The node process that runs the stack (npm runs it through `sh -c`, which stays its parent). */
function stackOwner(r: StackRun): number {
  const owner = survivors(r.scratch).find((pid) => {
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return basename(args[0] ?? "") === "node" && args.includes("test/env/cli.ts");
  });
  if (owner === undefined)
    throw new Error(`no stack owner among:\n${describeProcesses(survivors(r.scratch))}`);
  return owner;
}

function describeProcesses(pids: number[]): string {
  return pids
    .map((pid) => {
      try {
        return `${pid} ${readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").slice(0, 200)}`;
      } catch {
        return `${pid} (gone)`;
      }
    })
    .join("\n");
}

function leftovers(scratch: string): string[] {
  const root = join(scratch, "switchyard-env");
  return existsSync(root) ? readdirSync(root) : [];
}

async function expectNothingLeft(r: StackRun): Promise<void> {
  await eventually("npm start to exit", () => r.npm.exitCode !== null || r.npm.signalCode !== null, {
    timeoutMs: 60_000,
    intervalMs: 100,
  });
  expect(r.output()).toMatch(/stopping everything[\s\S]*stopped/);
  // SIGKILLed processes may take a moment to be torn down by the kernel.
  await eventually(
    "no process of the stack to survive",
    () => {
      const left = survivors(r.scratch);
      if (left.length > 0) throw new Error(`still running:\n${describeProcesses(left)}`);
      return true;
    },
    { timeoutMs: 10_000, intervalMs: 100 },
  );
  expect(leftovers(r.scratch), r.output()).toEqual([]);
}

const ready = (r: StackRun) =>
  eventually(
    "the stack to be ready",
    () => {
      if (r.npm.exitCode !== null) throw new Error(`npm start exited (${r.npm.exitCode}):\n${r.output()}`);
      return r.output().includes("Ctrl-C stops everything") ? true : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 200 },
  );

/** Waits until a file or directory matching `pattern` exists under the run's env root. */
const appears = (r: StackRun, what: string, pattern: RegExp) =>
  eventually(
    what,
    () => {
      const root = join(r.scratch, "switchyard-env");
      if (!existsSync(root)) return undefined;
      const all = readdirSync(root, { recursive: true }) as string[];
      return all.some((p) => pattern.test(p)) ? true : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 20 },
  );

describe("npm start under signals", () => {
  it("Ctrl-C while the clusters start: nothing survives, no directory is left", async () => {
    const r = npmStart();
    await appears(r, "etcd's data directory", /^set-[^/]+\/etcd$/);
    ctrlC(r);
    await expectNothingLeft(r);
  }, 300_000);

  it("Ctrl-C while the control planes start: nothing survives, no directory is left", async () => {
    const r = npmStart();
    await appears(r, "a control plane's log", /^stack-[^/]+\/logs\/east-control-plane\.log$/);
    ctrlC(r);
    await expectNothingLeft(r);
  }, 300_000);

  it("a failed start says why, which logs to read and the fix, leaves no process, and logs until the next start; a second Ctrl-C of that start kills at once and removes everything", async () => {
    // Another stack's demo app holds east's address.
    const squatter = createServer(() => {});
    await new Promise<void>((res) => squatter.listen(8080, "127.0.0.2", res));
    const r = npmStart();
    try {
      await eventually("npm start to fail", () => (r.npm.exitCode !== null ? true : undefined), {
        timeoutMs: 180_000,
        intervalMs: 200,
      });
      expect(r.output()).toMatch(/the embedded stack did not start: 127\.0\.0\.2:8080 is taken/);
      const logs = /logs: (\S+) \(kept until the next start\)/.exec(r.output())?.[1];
      expect(logs, r.output()).toBeDefined();
      expect(readdirSync(join(logs!, "clusters"))).toContain("east-kube-apiserver.log");
      expect(r.output()).toMatch(/likely fix: stop the other embedded stack \(Ctrl-C in its terminal\)/);
      await eventually("no process of the failed start to survive", () => survivors(r.scratch).length === 0, {
        timeoutMs: 10_000,
      });
      // Only the stack's own directory (its logs) stays, for the next start to sweep.
      expect(leftovers(r.scratch)).toEqual([expect.stringMatching(/^stack-/)]);
    } finally {
      squatter.close();
    }
    // The same env root: the next start sweeps the kept logs. Its stop is held open for 10 min,
    // so a second Ctrl-C (after the 1 s in which a repeat counts as the same Ctrl-C) always lands
    // while the first stop is under way; only the second can end the run before the test's timeout.
    // (One Ctrl-C of a ready stack: the quick-start test.)
    const next = npmStart(r.scratch, { SWITCHYARD_ENV_STOP_DELAY_MS: "600000" });
    await ready(next);
    expect(leftovers(next.scratch).filter((d) => d.startsWith("stack-"))).toHaveLength(1); // its own
    ctrlC(next);
    await new Promise((res) => setTimeout(res, 1500));
    ctrlC(next);
    await expectNothingLeft(next);
    expect(next.output()).toContain("SIGINT again: killing everything now");
  }, 300_000);

  it("comes up after a SIGKILLed run and sweeps what that run left; SIGTERM alone stops it", async () => {
    const first = npmStart();
    await ready(first);
    const owner = stackOwner(first);
    process.kill(owner, "SIGKILL"); // no handler runs: its processes and directories stay
    await first.exited;
    const orphans = survivors(first.scratch).map((pid) => ({ pid, start: processStartTime(pid) ?? "" }));
    expect(orphans.length).toBeGreaterThan(0);

    const second = npmStart(first.scratch); // the same env root, as a developer's next `npm start`
    await ready(second);
    // The second start's sweep killed every one of them (same pid and start time: not a reused pid).
    expect(orphans.filter((p) => isSameProcessAlive(p.pid, p.start))).toEqual([]);
    process.kill(stackOwner(second), "SIGTERM"); // `kill <pid>`: the owner alone
    await expectNothingLeft(second);
  }, 300_000);
});
