// Runs one checker binary to completion and hands back what it printed: the checkers report
// findings on stdout and signal them with their exit code, and the tests assert on both.
import { spawn } from "node:child_process";

export interface ToolResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `command args`, writing `input` (if any) to its stdin; never rejects for a non-zero exit. */
export function runTool(
  command: string,
  args: readonly string[],
  options: { input?: string; cwd?: string } = {},
): Promise<ToolResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
    child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
    child.on("error", reject);
    child.on("close", (code, signal) => resolvePromise({ code: code ?? (signal ? 128 : 1), stdout, stderr }));
    child.stdin.on("error", () => {}); // a tool that exits before reading all of stdin
    child.stdin.end(options.input ?? "");
  });
}
