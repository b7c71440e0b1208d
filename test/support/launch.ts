// Starting a process for a suite or a benchmark — a component under tsx, a CLI, a binary —
// through one launcher built on env/processes.ts: every launched process is recorded with
// its start time (so a sweep kills it if its owner dies), logs to a file, keeps its output
// and JSON log lines in memory for assertions, is awaited until ready by one poller, and
// stops one way (a signal, then SIGKILL after a grace).
import { randomBytes } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { envRoot, ProcessGroupDir, type ManagedProcess } from "../env/processes.js";
import { CapturedOutput, type LogLine } from "./captured-output.js";
import { describeError, eventually, type NotYet } from "./poll.js";

/** The repository root: the default working directory of launched processes. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export type { LogLine };

export interface LaunchOptions<R> {
  /** Names the process in errors and its default log file. */
  name: string;
  command: string;
  args: string[];
  /** Working directory (default the repository root). */
  cwd?: string;
  /** Variables set over this process's environment. */
  env?: Record<string, string | undefined>;
  /** Where stdout and stderr are written (default a fresh file under the launch directory). */
  logFile?: string;
  /** Record into this group (default: one group per launching process, under envRoot()). */
  group?: ProcessGroupDir;
  /** Polled until it returns something other than undefined/false: `ready` (default: at once). */
  ready?: (p: LaunchedProcess<unknown>) => R | NotYet | Promise<R | NotYet>;
  /** ms (default 30 000). */
  readyTimeoutMs?: number;
  /** ms between readiness probes (default 50). */
  readyIntervalMs?: number;
  /** Sees the process as soon as it runs, before it is ready (to stop it with its siblings). */
  onStart?: (p: LaunchedProcess<R>) => void;
  /** JSON log lines kept; past it the oldest half is dropped (default all: long runs set one). */
  maxLogLines?: number;
  /** Also copy the process's stderr to ours (benchmarks, where a person watches). */
  echoStderr?: boolean;
}

export class LaunchError extends Error {
  readonly code = "SWITCHYARD_TEST_LAUNCH_FAILED";
}

let launches = 0;
let ownGroup: ProcessGroupDir | undefined;

/** This process's own record of what it launched; removed when it exits, swept if it dies. */
function launchGroup(): ProcessGroupDir {
  if (!ownGroup) {
    const group = new ProcessGroupDir(
      join(envRoot(), `launch-${process.pid}-${randomBytes(4).toString("hex")}`),
    );
    process.once("exit", () => group.remove());
    ownGroup = group;
  }
  return ownGroup;
}

/** `node --import tsx <script> …args` for a TypeScript entry point (path from the repository root). */
export function tsx(
  script: string,
  args: string[] = [],
  nodeArgs: string[] = [],
): { command: string; args: string[] } {
  return {
    command: process.execPath,
    args: [...nodeArgs, "--import", "tsx", resolve(repoRoot, script), ...args],
  };
}

export class LaunchedProcess<R = true> {
  /** What `ready` returned. */
  ready!: R;

  constructor(
    readonly name: string,
    private readonly managed: ManagedProcess,
    private readonly captured: CapturedOutput,
  ) {
    void managed.exited.then(() => captured.end());
  }

  get pid(): number {
    return this.managed.pid;
  }

  get logFile(): string {
    return this.managed.logFile;
  }

  /** stdout lines that parsed as JSON objects, oldest first. */
  get logs(): LogLine[] {
    return this.captured.logs;
  }

  /** Resolves with the exit code (or the signal's name) when the process ends. */
  get exited(): Promise<number | string> {
    return this.managed.exited;
  }

  hasExited(): boolean {
    return this.managed.hasExited();
  }

  /** Everything printed on stdout and stderr so far, interleaved (the last 8 Mi characters). */
  output(): string {
    return this.captured.text;
  }

  /** What was printed on stdout alone (the last 8 Mi characters). */
  stdout(): string {
    return this.captured.stdout;
  }

  kill(signal: NodeJS.Signals): void {
    this.managed.kill(signal);
  }

  /** `signal` (default SIGTERM), SIGKILL after `graceMs` (default 5000; Infinity: never). */
  stop(graceMs?: number, signal?: NodeJS.Signals): Promise<void> {
    return this.managed.stop(graceMs, signal);
  }

  /** The first log line (already printed or future) matching `pred`. */
  waitForLog(
    pred: (l: LogLine) => boolean,
    timeoutMs = 5000,
    what = "a matching log line",
  ): Promise<LogLine> {
    return eventually(`${what} from ${this.name}`, () => this.logs.find(pred), { timeoutMs, intervalMs: 10 });
  }
}

/**
 * Starts a process and resolves once `ready` says so. When it exits first or is not ready
 * in time, it is killed and the error carries the end of its output.
 */
export async function launch<R = true>(opts: LaunchOptions<R>): Promise<LaunchedProcess<R>> {
  const group = opts.group ?? launchGroup();
  const logFile = opts.logFile ?? join(group.dir, "logs", `${opts.name}-${++launches}.log`);
  const captured = new CapturedOutput(opts.maxLogLines);
  const managed = group.spawn(opts.name, opts.command, opts.args, {
    env: { ...process.env, ...opts.env },
    cwd: opts.cwd ?? repoRoot,
    logFile,
    onOutput: (chunk, stream) => {
      captured.take(chunk, stream);
      if (opts.echoStderr && stream === "stderr") process.stderr.write(chunk);
    },
  });
  const p = new LaunchedProcess<R>(opts.name, managed, captured);
  opts.onStart?.(p);
  const ready = opts.ready ?? (() => true as R);
  const timeoutMs = opts.readyTimeoutMs ?? 30_000;
  try {
    p.ready = await eventually(`${opts.name} to be ready`, () => ready(p), {
      timeoutMs,
      intervalMs: opts.readyIntervalMs ?? 50,
      giveUp: () => (p.hasExited() ? new LaunchError(`${opts.name} exited`) : undefined),
    });
    return p;
  } catch (err) {
    // Never leave a half-started process behind.
    await p.stop(0, "SIGKILL");
    const status = await p.exited;
    const tail = p.output().slice(-3000);
    const why =
      err instanceof LaunchError
        ? `exited (${status}) before it was ready`
        : `was not ready within ${timeoutMs} ms (${describeError(err)})`;
    throw new LaunchError(`${opts.name} ${why}; log ${p.logFile}:\n${tail}`, { cause: err });
  }
}
