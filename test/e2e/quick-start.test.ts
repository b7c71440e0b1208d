// The README's quick start, exactly as written, on a fresh clone: its first command
// (`npm ci && npm start`, read from the README itself), then the `npm run switchyard -- exec
// … -- CMD` and `curl` lines that `npm start` prints, run as printed. Every curl must be
// answered by the local CMD (python's directory listing), not by the cluster's demo app
// ("hello from the east app") — through east and through west. Ctrl-C stops both, and
// nothing of either may survive.
//
// It runs what is COMMITTED: `git clone` of this checkout takes HEAD, not the working tree's
// uncommitted edits. That is the point — a new user gets the commit, not this directory.
// `npm ci` runs for real (the first command must work on a clean tree), with npm told to
// prefer its cache (npm_config_prefer_offline) so it does not wait on the registry; linking
// this checkout's node_modules instead would be faster but would not test `npm ci`.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { repoRoot } from "../support/launch.js";
import { eventually } from "../support/poll.js";

const mark = `quick-start-${randomBytes(4).toString("hex")}`;
const scratch = mkdtempSync(join(tmpdir(), "switchyard-quick-start-"));
const clone = join(scratch, "switchyard");
const shells: ChildProcess[] = [];

/** Runs a command line as a user types it: `sh -c`, in the clone, in its own process group. */
function typed(line: string): { proc: ChildProcess; output: () => string; started: number } {
  const proc = spawn("sh", ["-c", line], {
    cwd: clone,
    // Every process started from here inherits the mark: that is how survivors are found.
    env: { ...process.env, npm_config_prefer_offline: "true", SWITCHYARD_QUICK_START: mark },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  shells.push(proc);
  let out = "";
  proc.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  proc.stderr!.on("data", (b: Buffer) => (out += b.toString()));
  return { proc, output: () => out, started: Date.now() };
}

/** Ctrl-C in that terminal: SIGINT to its whole process group. */
function ctrlC(proc: ChildProcess): void {
  try {
    process.kill(-proc.pid!, "SIGINT");
  } catch {
    /* the group is gone already */
  }
}

/** Live processes (zombies aside) that carry this test's mark. */
function survivors(): string[] {
  const found: string[] = [];
  for (const entry of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (/^[ZX]/.test(stat.slice(stat.lastIndexOf(")") + 2))) continue;
      if (!readFileSync(`/proc/${entry}/environ`, "utf8").includes(`SWITCHYARD_QUICK_START=${mark}\0`))
        continue;
      found.push(
        `${entry} ${readFileSync(`/proc/${entry}/cmdline`, "utf8").replace(/\0/g, " ").slice(0, 160)}`,
      );
    } catch {
      /* gone, or not ours */
    }
  }
  return found;
}

afterAll(async () => {
  for (const s of shells) ctrlC(s);
  try {
    await eventually("nothing of the quick start to survive", () => survivors().length === 0, {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
  } finally {
    for (const line of survivors()) process.kill(Number(line.split(" ")[0]), "SIGKILL");
    rmSync(scratch, { recursive: true, force: true });
  }
}, 90_000);

/** The first command of the README's quick start (comment stripped). */
function firstCommand(): string {
  const readme = readFileSync(join(clone, "README.md"), "utf8");
  const block = /## Quick start\s+```sh\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error("README.md has no ```sh block under '## Quick start'");
  return block[1]!.split("\n")[0]!.replace(/#.*$/, "").trim();
}

it("the README's quick start works on a fresh clone, answering through east and west", async () => {
  const t0 = Date.now();
  execFileSync("git", ["clone", "--quiet", repoRoot, clone], { stdio: "pipe" });
  const command = firstCommand();
  expect(command).toBe("npm ci && npm start");
  const start = typed(command);
  const printed = await eventually(
    "npm start to print its instructions",
    () => {
      if (start.proc.exitCode !== null) throw new Error(`\`${command}\` exited:\n${start.output()}`);
      return start.output().includes("Ctrl-C stops everything") ? start.output() : undefined;
    },
    { timeoutMs: 600_000, intervalMs: 250 },
  );
  const readyAt = Date.now();
  const execLine = /^ {2}(npm run switchyard -- exec .*)$/m.exec(printed)?.[1];
  const curlLines = [...printed.matchAll(/^ {2}(curl \S+.*)$/gm)].map((m) => m[1]!);
  expect(execLine, printed).toBeDefined();
  expect(curlLines.map((l) => /# through (\w+)/.exec(l)?.[1])).toEqual(["east", "west"]);

  const exec = typed(execLine!);
  for (const curl of curlLines) {
    const through = /# through (\w+)/.exec(curl)![1]!;
    const answer = await eventually(
      `curl through ${through} to be answered by the local process`,
      () => {
        if (exec.proc.exitCode !== null) throw new Error(`exec exited:\n${exec.output()}`);
        const body = execFileSync("sh", ["-c", curl], { cwd: clone, encoding: "utf8", stdio: "pipe" });
        return body.includes("Directory listing for /") ? body : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    // python3 -m http.server lists the directory it runs in: the clone.
    expect(answer).toContain("README.md");
    expect(answer).not.toContain(`hello from the ${through} app`);
  }
  const answeredAt = Date.now();

  ctrlC(exec.proc);
  await eventually("exec to stop", () => exec.proc.exitCode !== null || exec.proc.signalCode !== null, {
    timeoutMs: 30_000,
  });
  expect(exec.output()).toMatch(/session mc-[0-9a-f]{16} deleted/);
  ctrlC(start.proc);
  await eventually("the stack to stop", () => survivors().length === 0, {
    timeoutMs: 60_000,
    intervalMs: 250,
  });
  expect(start.output()).toMatch(/stopping everything[\s\S]*stopped/);
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  process.stderr.write(
    `[quick start] clone + npm ci + npm start ready: ${s(readyAt - t0)}; exec + curl through both: ` +
      `${s(answeredAt - readyAt)}; stopped: ${s(Date.now() - answeredAt)}\n`,
  );
}, 900_000);
