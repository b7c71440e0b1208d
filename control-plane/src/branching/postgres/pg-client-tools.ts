// The Postgres client programs the stream copy runs (pg_dump and psql, from `pgBinDir` or
// PATH) and the one way it runs them: a producer's stdout handed to a consumer's stdin as a
// kernel pipe (no byte passes through Node, nothing is staged on disk). Connection details
// go in a libpq conninfo argument, the password in PGPASSWORD only (never argv, which any
// user of the host can read). An abort kills both processes and resolves only once they
// are gone.
import { execFile, spawn, type ChildProcess, type StdioOptions } from "node:child_process";
import { join } from "node:path";
import { PgBranchError, redact, type PgTarget } from "./pg-session.js";

export type PgTool = "pg_dump" | "psql";

/** One process of a pipe: the tool, its arguments, and the password it connects with. */
export interface ToolRun {
  tool: PgTool;
  args: string[];
  password: string | undefined;
}

/** How a pipe ended when one side failed: each side's exit and the end of its stderr. */
export interface ToolExit {
  tool: PgTool;
  status: number | string;
  stderr: string;
}

export class ToolPipeError extends Error {
  constructor(
    /** The side whose failure explains the pipe's: its own error, not a kill or EPIPE the other caused. */
    readonly failed: ToolExit,
    readonly side: "producer" | "consumer",
    message: string,
  ) {
    super(message);
    this.name = "ToolPipeError";
  }
}

const STDERR_KEPT = 8192;

/** A libpq keyword/value conninfo (no password): values single-quoted, `\` and `'` escaped. */
export function conninfo(target: PgTarget): string {
  const quote = (v: string) => `'${v.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
  const pairs: [string, string][] = [
    ["host", target.host],
    ["port", String(target.port)],
    ["dbname", target.database],
    ["user", target.user],
    ["application_name", "switchyard-branching"],
    ...Object.entries(target.params ?? {}),
  ];
  return pairs.map(([k, v]) => `${k}=${quote(v)}`).join(" ");
}

/** Major version from `pg_dump --version` / server_version_num: 15, 18; 9.6 → 906. */
export function majorOfVersionText(text: string): number | undefined {
  const m = /\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?/.exec(text);
  if (!m) return undefined;
  const first = Number(m[1]);
  return first >= 10 ? first : first * 100 + Number(m[2] ?? 0);
}

export function majorOfVersionNum(num: number): number {
  return num >= 100_000 ? Math.floor(num / 10_000) : Math.floor(num / 100);
}

/** 18, or 9.6 for 906. */
export function showMajor(major: number): string {
  return major >= 10 && major < 100 ? String(major) : `${Math.floor(major / 100)}.${major % 100}`;
}

export class PgClientTools {
  readonly #majors = new Map<PgTool, Promise<number>>();

  /** `binDir` undefined: the tools are looked up on PATH. */
  constructor(readonly binDir: string | undefined) {}

  path(tool: PgTool): string {
    return this.binDir === undefined ? tool : join(this.binDir, tool);
  }

  where(): string {
    return this.binDir === undefined ? "on PATH" : `in pgBinDir ${this.binDir}`;
  }

  /** The tool's major version (asked once; a failed lookup is asked again next time). */
  major(tool: PgTool): Promise<number> {
    let known = this.#majors.get(tool);
    if (known === undefined) {
      known = new Promise<number>((resolve, reject) => {
        execFile(this.path(tool), ["--version"], { env: toolEnv(undefined) }, (err, stdout) => {
          const major = err ? undefined : majorOfVersionText(stdout);
          if (major !== undefined) return resolve(major);
          const why = err ? err.message : `unexpected --version output ${JSON.stringify(stdout.trim())}`;
          reject(
            new PgBranchError(
              "ClientToolMissing",
              `${tool} not usable ${this.where()} (${why}): install the PostgreSQL client (pg_dump and psql) ` +
                "in the control plane's image, or set the server provisioner's pgBinDir option",
              "terminal",
            ),
          );
        });
      });
      this.#majors.set(tool, known);
      known.catch(() => this.#majors.delete(tool));
    }
    return known;
  }

  /**
   * Runs `producer | consumer` and resolves when both exited 0. Rejects with a ToolPipeError
   * naming the failed side (the other is killed), or with `signal.reason` once aborted
   * (both killed and gone). `secrets` are redacted from every message.
   */
  async pipe(
    producer: ToolRun,
    consumer: ToolRun,
    signal: AbortSignal,
    secrets: readonly (string | undefined)[],
  ): Promise<void> {
    signal.throwIfAborted();
    const a = this.spawnOne(producer, ["ignore", "pipe", "pipe"]);
    let b: ReturnType<PgClientTools["spawnOne"]>;
    try {
      b = this.spawnOne(consumer, [a.child.stdout ?? "ignore", "ignore", "pipe"]);
    } catch (err) {
      // The producer could not even give a pipe (it did not start): its own error says why.
      a.child.kill("SIGKILL");
      const exit = await a.exit;
      throw new ToolPipeError(
        exit,
        "producer",
        redact(`${exit.tool} failed (${exit.status}): ${errorLines(exit.stderr)} ${String(err)}`, secrets),
      );
    }
    // The consumer holds its own copy of the pipe: ours would keep the producer writing
    // after the consumer died (no EPIPE) and hold data Node would never read.
    a.child.stdout?.destroy();
    const killBoth = () => {
      a.child.kill("SIGKILL");
      b.child.kill("SIGKILL");
    };
    signal.addEventListener("abort", killBoth, { once: true });
    // The first side to fail is the cause (a consumer's error breaks the producer's pipe; a
    // producer's error cuts the consumer's input short), and kills the other, which could
    // otherwise wait on the pipe for ever.
    const first: { cause?: "producer" | "consumer" } = {};
    const onExit = (side: "producer" | "consumer") => (exit: ToolExit) => {
      if (exit.status === 0) return;
      first.cause ??= side;
      killBoth();
    };
    void a.exit.then(onExit("producer"));
    void b.exit.then(onExit("consumer"));
    const [ea, eb] = await Promise.all([a.exit, b.exit]);
    signal.removeEventListener("abort", killBoth);
    signal.throwIfAborted();
    const cause = first.cause;
    if (cause === undefined) return;
    const own = { side: cause, exit: cause === "producer" ? ea : eb };
    const { tool, status, stderr } = own.exit;
    throw new ToolPipeError(
      own.exit,
      own.side,
      redact(`${tool} failed (${status}): ${errorLines(stderr)}`, secrets),
    );
  }

  private spawnOne(run: ToolRun, stdio: StdioOptions): { child: ChildProcess; exit: Promise<ToolExit> } {
    const child = spawn(this.path(run.tool), run.args, { env: toolEnv(run.password), stdio });
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString("utf8")).slice(-STDERR_KEPT);
    });
    const exit = new Promise<ToolExit>((resolve) => {
      child.once("error", (err) =>
        resolve({
          tool: run.tool,
          status: (err as NodeJS.ErrnoException).code ?? "error",
          stderr: `${run.tool} could not be started ${this.where()}: ${err.message}`,
        }),
      );
      child.once("close", (code, sig) =>
        resolve({ tool: run.tool, status: code ?? sig ?? "unknown", stderr }),
      );
    });
    return { child, exit };
  }
}

/**
 * This process's environment without libpq's own variables (a PGHOST or PGSERVICE of the
 * control plane must not redirect a copy), plus the password and a connect timeout.
 */
function toolEnv(password: string | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("PG")) env[k] = v;
  env.PGCONNECT_TIMEOUT = "10";
  if (password !== undefined) env.PGPASSWORD = password;
  return env;
}

/** The lines of a tool's stderr that say what failed (ERROR/FATAL/DETAIL/HINT, `error:`), one line. */
export function errorLines(stderr: string): string {
  const lines = stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /\b(ERROR|FATAL|DETAIL|HINT):|\berror:|could not be started|\bdetail:/.test(l));
  const text = (lines.length > 0 ? lines : stderr.trim().split("\n").slice(-3)).join(" ");
  return text.length > 600 ? `${text.slice(0, 600)}…` : text || "no error output";
}
