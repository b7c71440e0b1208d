// One copy step between two servers: `mariadb-dump` of the source piped through the
// definer rewrite (mysql-definer-rewrite.ts) straight into `mariadb` connected to the
// branch — nothing staged on disk. Either side failing kills the other (a load of a
// truncated dump would only waste time: the branch is not marked complete and is remade);
// an abort kills both, and the step resolves or rejects only once both processes are gone.
import { spawn, type ChildProcess } from "node:child_process";
import { pipeline } from "node:stream/promises";
import type { Readable } from "node:stream";
import { fromToolFailure, MysqlBranchError } from "./mysql-branch-error.js";
import { DefinerRewrite } from "./mysql-definer-rewrite.js";

export interface DumpPipe {
  dump: { command: string; args: string[] };
  load: { command: string; args: string[] };
  /** What the step does, leading every error: `copying the schema of app@db:3306/shop into sy_x`. */
  doing: string;
  /** Passwords in play, removed from any tool output that reaches a message. */
  secrets: readonly (string | undefined)[];
}

const STDERR_KEEP = 8192;

/** The environment of the tools: this process's, less variables that would add or change a connection. */
export function toolEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !/^(MYSQL|MARIADB)_/.test(k)));
}

/** The rejection of an aborted step: the signal's reason, else an AbortError. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted", "AbortError");
}

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  spawnError?: Error;
  stderr: string;
}

function ended(child: ChildProcess): Promise<Ended> {
  let stderr = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (text: string) => {
    stderr = (stderr + text).slice(-STDERR_KEEP);
  });
  return new Promise((resolve) => {
    child.once("error", (err) => {
      // Failed to start: there is no process to wait for.
      if (child.pid === undefined) resolve({ code: null, signal: null, spawnError: err, stderr });
    });
    child.once("close", (code, signal) => resolve({ code, signal, stderr }));
  });
}

function exitText(e: Ended): string {
  return e.signal !== null ? `was killed by ${e.signal}` : `exited with status ${e.code}`;
}

function spawnFailure(command: string, doing: string, err: Error): MysqlBranchError {
  return new MysqlBranchError(
    "ClientMissing",
    `${doing}: cannot run ${command} (${err.message}): install the MariaDB client (mariadb-dump, mariadb) ` +
      "or set the provisioner's clientBinDir",
    "transient",
  );
}

/** Runs the dump into the load; rejects with a MysqlBranchError, or the abort reason. */
export async function runDumpPipe(
  step: DumpPipe,
  signal: AbortSignal,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  if (signal.aborted) throw abortReason(signal);
  const dump = spawn(step.dump.command, step.dump.args, { stdio: ["ignore", "pipe", "pipe"], env });
  const load = spawn(step.load.command, step.load.args, { stdio: ["pipe", "ignore", "pipe"], env });
  const kill = (child: ChildProcess) => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  const killBoth = () => {
    kill(dump);
    kill(load);
  };
  signal.addEventListener("abort", killBoth, { once: true });
  const dumpEnded = ended(dump).then((e) => {
    if (e.code !== 0) kill(load);
    return e;
  });
  const loadEnded = ended(load).then((e) => {
    if (e.code !== 0) kill(dump);
    return e;
  });
  // A load that stops reading ends the pipeline with EPIPE: the exit statuses say why.
  const piped =
    dump.stdout && load.stdin
      ? pipeline(dump.stdout as Readable, new DefinerRewrite(), load.stdin).catch(() => killBoth())
      : Promise.resolve();
  try {
    const [d, l] = await Promise.all([dumpEnded, loadEnded, piped]);
    if (signal.aborted) throw abortReason(signal);
    if (d.spawnError) throw spawnFailure(step.dump.command, step.doing, d.spawnError);
    if (l.spawnError) throw spawnFailure(step.load.command, step.doing, l.spawnError);
    // The side that failed first is the one to report: the other was killed for it.
    if (d.code !== 0 && !(d.signal === "SIGKILL" && l.code !== 0))
      throw fromToolFailure("mariadb-dump", step.doing, exitText(d), d.stderr, step.secrets, "source");
    if (l.code !== 0)
      throw fromToolFailure("mariadb", step.doing, exitText(l), l.stderr, step.secrets, "branch");
  } finally {
    signal.removeEventListener("abort", killBoth);
  }
}
