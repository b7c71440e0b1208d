// A stopping process must be gone before the kubelet's SIGKILL (terminationGracePeriodSeconds,
// 30 s in the chart), or its pod stays Terminating that long and whatever it holds goes
// unreleased and unexplained. `StopDeadline` names the parts of a process as they run; once a
// stop is asked for, the parts still running when the deadline passes are handed to
// `onExpired` (which logs them and exits), so a hang is cut short and says where it was.
/** How long a stopping component waits for its parts: below the chart's terminationGracePeriodSeconds (30 s). */
export const STOP_DEADLINE_MS = 20_000;

export class StopDeadline {
  private readonly running = new Map<number, string>();
  private next = 0;

  /** Runs `part` under `name` until it settles. */
  track<T>(name: string, part: Promise<T>): Promise<T> {
    const id = this.next++;
    this.running.set(id, name);
    return part.finally(() => this.running.delete(id));
  }

  /** The names of the parts still running. */
  pending(): string[] {
    return [...this.running.values()];
  }

  /**
   * From the moment `signal` aborts, waits `ms`; then, if any part is still running, calls
   * `onExpired` with their names. The timer never keeps the process alive by itself.
   */
  arm(signal: AbortSignal, ms: number, onExpired: (pending: string[]) => void): void {
    const start = () => {
      const timer = setTimeout(() => {
        const pending = this.pending();
        if (pending.length > 0) onExpired(pending);
      }, ms);
      timer.unref();
    };
    if (signal.aborted) start();
    else signal.addEventListener("abort", start, { once: true });
  }
}
