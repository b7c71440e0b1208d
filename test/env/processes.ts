// Child processes of the test environment, and the bookkeeping that guarantees none
// outlives its owner. Every process is recorded (pid + kernel start time, so a reused
// pid is never killed by mistake) in its cluster set's directory; `sweepOrphans`
// kills what a dead owner left behind and removes the directory. Exit handlers kill
// children of a process that exits normally or on a signal; a SIGKILLed owner is
// cleaned up by the next sweep (the test runner's global teardown, or the next start).
// The sweep touches only the directories this module names (OWNED_PREFIXES): whatever
// else lives under envRoot() is not its business, however old.
import { spawn, type ChildProcess } from "node:child_process";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** All cluster-set directories live here. */
export function envRoot(): string {
  return join(process.env.SWITCHYARD_ENV_TMPDIR || tmpdir(), "switchyard-env");
}

/**
 * Names of the bookkeeping directories under envRoot(): a cluster set, a process's launched
 * children, an embedded stack. Only these are swept; each holds an owner.json.
 */
export const OWNED_PREFIXES = ["set-", "launch-", "stack-"] as const;

const isOwnedName = (entry: string) => OWNED_PREFIXES.some((p) => entry.startsWith(p));

interface Recorded {
  pid: number;
  start: string;
  name: string;
}

interface OwnerFile {
  /** The test file that created it (`SWITCHYARD_TEST_FILE`, set by test/file-leaks.ts), if any. */
  testFile?: string;
  ownerPid: number;
  ownerStart: string;
  /** The owner's parent (a test runner's main process when the owner is one of its workers). */
  parentPid: number;
  parentStart: string;
  processes: Recorded[];
}

export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 22 (starttime), counted after the parenthesised command name.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return rest[19];
  } catch {
    return undefined;
  }
}

/** True while that very process (same pid and start time) runs; a zombie counts as gone. */
export function isSameProcessAlive(pid: number, start: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return rest[19] === start && rest[0] !== "Z" && rest[0] !== "X";
  } catch {
    return false;
  }
}

/** Children this process started and that have not exited yet, by name. */
const live = new Map<ChildProcess, string>();
let exitHooksInstalled = false;
let signalsOwned = false;

/** Sends `signal` (default SIGKILL) to every child this process spawned that still runs. */
export function killChildren(signal: NodeJS.Signals = "SIGKILL"): void {
  for (const child of live.keys()) {
    try {
      child.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

/**
 * Declares that this process stops its children itself on SIGINT/SIGTERM/SIGHUP (an ordered
 * shutdown that removes its directories). Without it, the first such signal kills every
 * child and is raised again, which ends the process before any asynchronous cleanup could
 * run — right for a test worker, wrong for an owner that must remove what it created.
 */
export function ownSignals(): void {
  signalsOwned = true;
}

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on("exit", () => killChildren());
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const onSignal = () => {
      if (signalsOwned) return;
      process.off(sig, onSignal);
      killChildren();
      process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  /** Resolves with the exit code (or signal name) when the process ends. */
  readonly exited: Promise<number | string>;
  hasExited(): boolean;
  /** Sends `signal` unless the process has exited. */
  kill(signal: NodeJS.Signals): void;
  /**
   * `signal` (default SIGTERM), then SIGKILL after `graceMs` (default 5000; Infinity never
   * escalates); resolves when the process is gone.
   */
  stop(graceMs?: number, signal?: NodeJS.Signals): Promise<void>;
  /** Last bytes of the process log, for error messages. */
  logTail(bytes?: number): string;
}

export interface SpawnOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Where stdout and stderr go, appended (default `<logDir>/<name>.log`). */
  logFile?: string;
  /** Sees every chunk of output as well (a launcher reading log lines). */
  onOutput?: (chunk: Buffer, stream: "stdout" | "stderr") => void;
}

/** The bookkeeping directory of one cluster set (or of one process's launched children). */
export class ProcessGroupDir {
  private readonly ownerFile: string;

  /** `logDir`: where children log by default (default `<dir>/logs`). */
  constructor(
    readonly dir: string,
    private readonly logDir = join(dir, "logs"),
  ) {
    mkdirSync(dir, { recursive: true });
    this.ownerFile = join(dir, "owner.json");
    const testFile = process.env.SWITCHYARD_TEST_FILE;
    const owner: OwnerFile = {
      ...(testFile ? { testFile } : {}),
      ownerPid: process.pid,
      ownerStart: processStartTime(process.pid) ?? "",
      parentPid: process.ppid,
      parentStart: processStartTime(process.ppid) ?? "",
      processes: [],
    };
    writeFileSync(this.ownerFile, JSON.stringify(owner));
  }

  private record(update: (o: OwnerFile) => void): void {
    const owner = JSON.parse(readFileSync(this.ownerFile, "utf8")) as OwnerFile;
    update(owner);
    writeFileSync(this.ownerFile, JSON.stringify(owner));
  }

  spawn(name: string, command: string, args: string[], opts: SpawnOptions = {}): ManagedProcess {
    installExitHooks();
    // A group removed (stopped, or swept) starts nothing: the child would run unrecorded
    // and its log would recreate the directory. One synchronous check: nothing interleaves.
    if (!existsSync(this.ownerFile))
      throw new Error(`not starting ${name}: its process group ${this.dir} was removed (stopped or swept)`);
    const logFile = opts.logFile ?? join(this.logDir, `${name}.log`);
    mkdirSync(dirname(logFile), { recursive: true });
    const log = createWriteStream(logFile, { flags: "a" });
    const child = spawn(command, args, {
      env: opts.env ?? process.env,
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
      stdio: ["ignore", "pipe", "pipe"],
    });
    if (child.pid === undefined) throw new Error(`could not start ${name} (${command})`);
    const pid = child.pid;
    live.set(child, name);
    const start = processStartTime(pid) ?? "";
    this.record((o) => o.processes.push({ pid, start, name }));
    child.stdout!.pipe(log, { end: false });
    child.stderr!.pipe(log, { end: false });
    const onOutput = opts.onOutput;
    if (onOutput) {
      child.stdout!.on("data", (chunk: Buffer) => onOutput(chunk, "stdout"));
      child.stderr!.on("data", (chunk: Buffer) => onOutput(chunk, "stderr"));
    }
    let done = false;
    const exited = new Promise<number | string>((resolve) => {
      child.on("exit", (code, signal) => {
        done = true;
        live.delete(child);
        resolve(code ?? signal ?? "unknown");
      });
    });
    child.on("error", () => {
      /* reported through `exited` */
    });
    // The log ends when every writer of the child's output is gone, not at its exit: a
    // process it started may still hold (and write to) the same pipes.
    child.on("close", () => log.end());
    void exited.then(() => {
      try {
        this.record((o) => {
          o.processes = o.processes.filter((p) => p.pid !== pid);
        });
      } catch {
        /* directory already removed */
      }
    });
    return {
      name,
      pid,
      logFile,
      exited,
      hasExited: () => done,
      kill(signal) {
        if (!done) child.kill(signal);
      },
      async stop(graceMs = 5000, signal = "SIGTERM") {
        if (done) return;
        child.kill(signal);
        const timer = Number.isFinite(graceMs) ? setTimeout(() => child.kill("SIGKILL"), graceMs) : undefined;
        await exited;
        clearTimeout(timer);
      },
      logTail(bytes = 3000) {
        try {
          const text = readFileSync(logFile, "utf8");
          return text.slice(-bytes);
        } catch {
          return "";
        }
      },
    };
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Kills processes whose command line names a path under `dir` — what components of a set
 * started on their own (process agents are spawned detached by control planes, so no
 * record of ours names them). Linux only (/proc); elsewhere a no-op.
 */
export async function killReferencing(dir: string, wait = true): Promise<number> {
  return killWhere((args) => args.some((arg) => arg.includes(`${dir}/`)), wait);
}

/** Kills processes naming an owned directory under `root` that no longer exists (it was stopped). */
function killReferencingRemovedSets(root: string): Promise<number> {
  const escaped = root.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  // Anchored at the start of an argument (or after `--flag=`): another run whose root merely
  // ends in the same path (a CI run with its own TMPDIR under /tmp) is not ours to sweep.
  const setPath = new RegExp(`(?:^|=)${escaped}/((?:${OWNED_PREFIXES.join("|")})[^/]+)/`);
  return killWhere((args) =>
    args.some((arg) => {
      const m = setPath.exec(arg);
      return m !== null && !existsSync(join(root, m[1]!));
    }),
  );
}

async function killWhere(match: (args: string[]) => boolean, wait = true): Promise<number> {
  if (!existsSync("/proc/self/cmdline")) return 0;
  const victims: Recorded[] = [];
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      continue;
    }
    if (!match(cmdline.split("\0"))) continue;
    const start = processStartTime(pid);
    try {
      process.kill(pid, "SIGKILL");
      if (start) victims.push({ pid, start, name: "referencing" });
    } catch {
      /* gone meanwhile */
    }
  }
  const deadline = Date.now() + 10_000;
  while (wait && victims.some((p) => isSameProcessAlive(p.pid, p.start)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return victims.length;
}

/** Kills every recorded process of a directory, waits until they are gone, and removes it. */
export async function killRecorded(dir: string): Promise<number> {
  let killed = 0;
  const victims: Recorded[] = [];
  try {
    const owner = JSON.parse(readFileSync(join(dir, "owner.json"), "utf8")) as OwnerFile;
    for (const p of owner.processes) {
      if (isSameProcessAlive(p.pid, p.start)) {
        try {
          process.kill(p.pid, "SIGKILL");
          victims.push(p);
          killed++;
        } catch {
          /* gone meanwhile */
        }
      }
    }
  } catch {
    /* no owner file: nothing recorded */
  }
  // SIGKILL is asynchronous: wait (bounded) until the kernel has torn them down, so
  // their ports and files are free when this resolves.
  const deadline = Date.now() + 10_000;
  while (victims.some((p) => isSameProcessAlive(p.pid, p.start)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
  }
  // Strays a component started on its own: SIGKILL, without waiting (teardown is bounded).
  killed += await killReferencing(dir, false);
  rmSync(dir, { recursive: true, force: true });
  return killed;
}

/** What this process started and has not stopped: children still running, owned directories still there. */
export interface LeftBehind {
  processes: string[];
  directories: string[];
}

/**
 * What this process left behind: its children still running (by name and pid) and the
 * owned directories it created that still exist (cluster sets, stacks; not its launch group,
 * which lives as long as the process). Waits up to `graceMs` for children that are
 * already exiting, so a stop that was asked for but not awaited is not counted.
 */
export async function leftBehind(graceMs = 5_000): Promise<LeftBehind> {
  const deadline = Date.now() + graceMs;
  while (live.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const me = { pid: process.pid, start: processStartTime(process.pid) ?? "" };
  const root = envRoot();
  const directories = existsSync(root)
    ? readdirSync(root)
        // A launch group lives as long as its process (test/support/launch.ts removes it at exit).
        .filter((entry) => isOwnedName(entry) && !entry.startsWith("launch-"))
        .filter((entry) => {
          try {
            const o = JSON.parse(readFileSync(join(root, entry, "owner.json"), "utf8")) as OwnerFile;
            return o.ownerPid === me.pid && o.ownerStart === me.start;
          } catch {
            return false;
          }
        })
        .map((entry) => join(root, entry))
    : [];
  return { processes: [...live].map(([child, name]) => `${name} (pid ${child.pid})`), directories };
}

/** Kills and removes what `leftBehind` found. */
export async function cleanUpLeftBehind(left: LeftBehind): Promise<void> {
  killChildren();
  for (const dir of left.directories) await killRecorded(dir);
}

/** What a sweep killed in one owned directory, and the test file that created it. */
export interface SweptDirectory {
  dir: string;
  testFile: string | undefined;
  killed: number;
}

/**
 * Cleans up cluster sets whose owner process is gone; with `mine`, also every set owned
 * by this process or by one of its direct children (a test runner's workers, alive or
 * not). Returns the number of processes killed.
 */
export async function sweepOrphans(
  opts: { mine?: boolean; onSwept?: (swept: SweptDirectory) => void } = {},
): Promise<number> {
  const me = { pid: process.pid, start: processStartTime(process.pid) ?? "" };
  const root = envRoot();
  if (!existsSync(root)) return 0;
  let killed = 0;
  for (const entry of readdirSync(root).filter(isOwnedName)) {
    const dir = join(root, entry);
    let owner: OwnerFile | undefined;
    try {
      owner = JSON.parse(readFileSync(join(dir, "owner.json"), "utf8")) as OwnerFile;
    } catch {
      owner = undefined;
    }
    // A directory without owner.json is either being created right now or abandoned.
    let abandoned: boolean;
    try {
      abandoned = !owner && Date.now() - statSync(dir).mtimeMs > 30_000;
    } catch {
      continue; // removed meanwhile by its owner or by a concurrent sweep
    }
    const ownerGone = owner ? !isSameProcessAlive(owner.ownerPid, owner.ownerStart) : abandoned;
    const mine =
      opts.mine === true &&
      owner !== undefined &&
      ((owner.ownerPid === me.pid && owner.ownerStart === me.start) ||
        (owner.parentPid === me.pid && owner.parentStart === me.start));
    if (ownerGone || mine) {
      const n = await killRecorded(dir);
      killed += n;
      opts.onSwept?.({ dir, testFile: owner?.testFile, killed: n });
    }
  }
  killed += await killReferencingRemovedSets(root);
  return killed;
}
