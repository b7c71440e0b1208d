// What a failed Kubernetes API call threw, in one short line fit for logs, conditions and
// CLI errors: the HTTP status with the Status object's message when the server answered,
// else the error's first line (socket and TLS errors). Built from the answer's code and
// message, never from request data, so it carries no credentials.

/** The `message` of a Kubernetes Status body (string or parsed), capped. */
export function apiStatusMessage(body: unknown): string {
  let b: unknown = body;
  if (typeof body === "string") {
    try {
      b = JSON.parse(body);
    } catch {
      return body.slice(0, 300);
    }
  }
  const m = (b as { message?: unknown } | undefined)?.message;
  return typeof m === "string" ? m.slice(0, 300) : "";
}

/** The HTTP status of an API error (`@kubernetes/client-node`'s ApiException `code`), if any. */
export function apiStatus(err: unknown): number | undefined {
  const c = (err as { code?: unknown } | null | undefined)?.code;
  return typeof c === "number" ? c : undefined;
}

/** The first line of an error's message (or of String(err)), capped at 300 characters. */
export function firstLine(err: unknown): string {
  const m = (err as { message?: unknown } | null | undefined)?.message;
  const msg = typeof m === "string" ? m : String(err);
  return msg.split("\n")[0]!.slice(0, 300);
}

/** `API server answered 409: <Status message>`, or the first line of a non-HTTP error. */
export function describeApiError(err: unknown): string {
  const status = apiStatus(err);
  if (status !== undefined) {
    const reason = apiStatusMessage((err as { body?: unknown }).body);
    return `API server answered ${status}${reason ? `: ${reason}` : ""}`;
  }
  return firstLine(err);
}
