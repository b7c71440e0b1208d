// What a launched process printed, kept in memory for assertions and readiness checks:
// stdout and stderr interleaved, stdout alone, and the stdout lines that are JSON objects
// (the components log with pino, one object per line). Bounded, so a long-running stack
// does not grow without end; the process's log file keeps everything.

/** A JSON line a process printed on stdout (pino's shape: `msg` and fields). */
export interface LogLine {
  msg?: string;
  [field: string]: unknown;
}

/** Characters of text kept per stream; older text is dropped. */
const KEPT_CHARS = 8 << 20;
const kept = (text: string) => (text.length > 2 * KEPT_CHARS ? text.slice(-KEPT_CHARS) : text);

export class CapturedOutput {
  /** stdout lines that parsed as JSON objects, oldest first. */
  readonly logs: LogLine[] = [];
  private all = "";
  private out = "";
  private partial = "";

  /** `maxLogLines`: past it the oldest half of `logs` is dropped. */
  constructor(private readonly maxLogLines = Infinity) {}

  /** Everything printed on stdout and stderr, interleaved (the last 8 Mi characters). */
  get text(): string {
    return this.all;
  }

  /** What was printed on stdout alone (the last 8 Mi characters). */
  get stdout(): string {
    return this.out;
  }

  take(chunk: Buffer, stream: "stdout" | "stderr"): void {
    const s = chunk.toString();
    this.all = kept(this.all + s);
    if (stream !== "stdout") return;
    this.out = kept(this.out + s);
    const lines = (this.partial + s).split("\n");
    this.partial = lines.pop()!;
    for (const l of lines) this.line(l);
  }

  /** The process has ended: a last line without a newline still counts. */
  end(): void {
    if (this.partial) this.line(this.partial);
    this.partial = "";
  }

  private line(text: string): void {
    if (!text.startsWith("{")) return;
    try {
      const parsed = JSON.parse(text) as unknown;
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return;
      this.logs.push(parsed as LogLine);
      if (this.logs.length > this.maxLogLines) this.logs.splice(0, Math.ceil(this.maxLogLines / 2));
    } catch {
      /* not a JSON line */
    }
  }
}
