// How commands talk to people and scripts: aligned tables and status lines on stdout,
// progress and warnings on stderr (so `-o json` output stays parseable), JSON with
// `-o json`, and errors as one line with their code — `{"error": {code, message}}` in
// JSON mode — with exit code 1.
import { CliError, CliErrorCode } from "../sdk/cli-errors.js";
import type { BranchProgress } from "../sdk/kube/branch-wait.js";
import type { QueueSplitProgress } from "../sdk/kube/session-queues.js";
import { describeProblems, type SessionProgress } from "../sdk/kube/kube-sessions.js";

export type OutputFormat = "table" | "json";

export function parseOutputFormat(v: string | undefined): OutputFormat {
  if (v === undefined || v === "table" || v === "wide") return "table";
  if (v === "json") return "json";
  throw new CliError(CliErrorCode.INVALID_OPTION, `-o ${v}: supported formats are "table" and "json"`);
}

export interface Out {
  stdout(text: string): void;
  stderr(text: string): void;
  /** Raw bytes on stdout (file contents); text decoding is used when absent. */
  stdoutBytes?(data: Buffer): void;
}

export const processOut: Out = {
  stdout: (t) => void process.stdout.write(t),
  stderr: (t) => void process.stderr.write(t),
  stdoutBytes: (b) => void process.stdout.write(b),
};

/** Left-aligned columns separated by three spaces, like kubectl. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join("   ")
      .trimEnd();
  return [line(headers), ...rows.map(line)].join("\n") + "\n";
}

export function json(value: unknown): string {
  return JSON.stringify(value, null, 2) + "\n";
}

/** "3m", "2h", "5d" since an RFC 3339 time. */
export function age(since: string | undefined, now = Date.now()): string {
  if (!since) return "-";
  const s = Math.max(0, Math.round((now - Date.parse(since)) / 1000));
  if (!Number.isFinite(s)) return "-";
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

/** One progress line: `mc-… Pending  east ✓ (default)  west … NoReadyPod`. */
export function progressLine(id: string, p: SessionProgress): string {
  const clusters = p.clusters
    .map(
      (c) => `${c.cluster}${c.isDefault ? " (default)" : ""}: ${c.ready ? "ready" : (c.error ?? "starting")}`,
    )
    .join(", ");
  return `session ${id} ${p.phase}${clusters ? ` — ${clusters}` : p.message ? ` — ${p.message}` : ""}`;
}

/** One branch progress line: `branch mc-…-database-url (PgBranchDatabase, DATABASE_URL) Pending — Copying: …`. */
export function branchProgressLine(p: BranchProgress): string {
  const why = [p.reason, p.message].filter(Boolean).join(": ");
  return `branch ${p.name} (${p.kind}, ${p.envVar}) ${p.phase}${why ? ` — ${why}` : ""}`;
}

/** One queue split progress line: `queue split orders (ORDERS_QUEUE_URL) Waiting — CreatingQueues: …`. */
export function queueProgressLine(q: QueueSplitProgress): string {
  const why = [q.reason, q.message].filter(Boolean).join(": ");
  return `queue split ${q.queueId}${q.envVar ? ` (${q.envVar})` : ""} ${q.phase}${why ? ` — ${why}` : ""}`;
}

export { describeProblems };

/** Prints an error the way every command does and returns the exit code. */
export function reportError(err: unknown, format: OutputFormat, out: Out = processOut): number {
  const e =
    err instanceof CliError
      ? err
      : new CliError(CliErrorCode.UNEXPECTED, (err as Error)?.message ?? String(err), { cause: err });
  if (format === "json") out.stdout(json({ error: { code: e.code, message: e.message } }));
  else out.stderr(`switchyard: error: ${e.message} [${e.code}]\n`);
  return 1;
}
