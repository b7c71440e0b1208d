// How the queue modules read an SQS error: its code (the SDK's error name, or the query
// protocol's code that SQS and ElasticMQ also send), whether the queue is missing, and
// whether trying again can help (throttling, a server fault, a lost connection) or not (a
// missing queue, a refused message, denied access).

const MISSING = new Set(["QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "NonExistentQueue"]);
const THROTTLED = new Set(["RequestThrottled", "ThrottlingException", "KmsThrottled", "OverLimit"]);

interface SdkErrorShape {
  name?: unknown;
  Code?: unknown;
  code?: unknown;
  $fault?: unknown;
  $retryable?: unknown;
  $metadata?: { httpStatusCode?: number };
}

// The JSON protocol's type is `<namespace>#<Name>[:<more>]` (ElasticMQ passes it on as the code).
export const shapeName = (v: string): string => v.replace(/^.*#/, "").replace(/:.*$/, "");

function codes(err: unknown): string[] {
  if (typeof err !== "object" || err === null) return [];
  const e = err as SdkErrorShape;
  return [e.Code, e.name, e.code]
    .filter((v): v is string => typeof v === "string" && v !== "" && v !== "Error")
    .map(shapeName);
}

/** The error's code as SQS names it, or its name (a network error's `ECONNREFUSED`, …). */
export function sqsErrorCode(err: unknown): string {
  return codes(err)[0] ?? "Unknown";
}

export function isQueueMissing(err: unknown): boolean {
  return codes(err).some((c) => MISSING.has(c));
}

/** True when the same call may succeed later without anything being changed. */
export function isTransient(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  if (isQueueMissing(err)) return false;
  const e = err as SdkErrorShape;
  if (e.$retryable || e.$fault === "server") return true;
  if (THROTTLED.has(sqsErrorCode(err))) return true;
  const status = e.$metadata?.httpStatusCode;
  if (status === undefined) return e.$fault === undefined; // no response: the connection failed
  return status >= 500 || status === 429;
}

/** The error's code and message for a log line (SQS's messages name parameters, never message content). */
export function describeSqsError(err: unknown): { code: string; message: string } {
  return { code: sqsErrorCode(err), message: err instanceof Error ? err.message : String(err) };
}
