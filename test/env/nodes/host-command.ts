// Runs the short host commands a real node is built from (ip, nsenter, mount, ctr, iptables-save)
// with a deadline on every call: a `ctr` against a containerd that has died blocks for ever, and a
// teardown must never hang on one. A failure names the command and carries its stderr.
import { spawn } from "node:child_process";

export class HostCommandError extends Error {
  readonly code = "SWITCHYARD_TEST_HOST_COMMAND_FAILED";
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
  }
}

export interface HostCommandOptions {
  /** Kill the command after this many ms (default 30 000). */
  timeoutMs?: number;
  /** Bytes written to its stdin. */
  input?: string | Buffer;
  cwd?: string;
  /** Resolve with the output even when the command exits non-zero. */
  allowFailure?: boolean;
}

export interface HostCommandResult {
  stdout: string;
  stderr: string;
  /** Exit code, or the signal that ended it. */
  status: number | string;
}

/** Runs `cmd args…` and resolves with its output; rejects on a non-zero exit or the deadline. */
export function hostCommand(
  cmd: string,
  args: string[],
  opts: HostCommandOptions = {},
): Promise<HostCommandResult> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const shown = [cmd, ...args].join(" ");
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout!.on("data", (b: Buffer) => (stdout += b.toString()));
    child.stderr!.on("data", (b: Buffer) => (stderr = (stderr + b.toString()).slice(-8000)));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new HostCommandError(`could not run ${shown}: ${err.message}`, ""));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const status = code ?? signal ?? "unknown";
      if (timedOut) {
        reject(new HostCommandError(`${shown} did not finish in ${timeoutMs} ms`, stderr));
      } else if (status !== 0 && !opts.allowFailure) {
        reject(new HostCommandError(`${shown} failed (exit ${status}): ${stderr.trim()}`, stderr));
      } else {
        resolve({ stdout, stderr, status });
      }
    });
    if (child.stdin) {
      // A command that exits without reading its input must not fail the call with EPIPE.
      child.stdin.on("error", () => {});
      child.stdin.end(opts.input);
    }
  });
}

/** `hostCommand` that resolves with stdout only. */
export async function hostOutput(
  cmd: string,
  args: string[],
  opts: HostCommandOptions = {},
): Promise<string> {
  return (await hostCommand(cmd, args, opts)).stdout;
}
