// Why the embedded stack did not start, said so a person can act: the error (a launch error
// names the failing component's log file and ends with its last lines), where the logs are —
// kept until the next start when asked — and the likely fix for what failed.

export class EmbeddedStackError extends Error {
  readonly code = "SWITCHYARD_EMBEDDED_STACK_START_FAILED";
}

/** The likely fix for a failed start, from what failed. */
function likelyFix(message: string): string {
  if (/is taken|EADDRINUSE/.test(message))
    return "stop the other embedded stack (Ctrl-C in its terminal) or whatever holds that port, then start again";
  if (/binar|go build|Go /i.test(message)) return "build the test binaries first: npm run binaries";
  if (/exited|not ready/.test(message))
    return (
      "read the log named above; a process left by an earlier run is swept at every start, " +
      "so starting again usually succeeds — if it fails the same way, that log says why"
    );
  return "read the logs; starting again sweeps whatever an earlier run left behind";
}

export function startFailure(
  err: unknown,
  logDir: string,
  logs: "kept" | "caller's" | "removed",
): EmbeddedStackError {
  const message = err instanceof Error ? err.message : String(err);
  const where = {
    kept: `logs: ${logDir} (kept until the next start)`,
    "caller's": `logs: ${logDir}`,
    removed: "logs were removed with the stack (pass logDir to keep them)",
  }[logs];
  return new EmbeddedStackError(
    `the embedded stack did not start: ${message.trimEnd()}\n${where}\nlikely fix: ${likelyFix(message)}`,
    { cause: err },
  );
}
