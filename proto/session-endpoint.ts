// The session endpoint every router and agent serves, and how it refuses: the WebSocket
// upgrade on /v1/sessions/{id}; a refusal is a plain HTTP answer with a JSON body
// {code, message} (and Retry-After on 503), which dialers turn back into errors. One
// definition here, so the path and the refusal format cannot drift between sides.
import type { Duplex } from "node:stream";
import { STATUS_CODES } from "node:http";

export const SESSION_PATH_PREFIX = "/v1/sessions/";

/**
 * Session ids: a child ClusterSession name, a parent id, or `<namespace>:<name>` for
 * sessions keyed across namespaces; 1–253 characters of [A-Za-z0-9._:-], starting with
 * an alphanumeric.
 */
const SESSION_PATH = /^\/v1\/sessions\/([A-Za-z0-9][A-Za-z0-9._:-]{0,252})$/;

/** The session id of a request path (query ignored), or undefined when it is not a session path. */
export function parseSessionPath(requestUrl: string | undefined): string | undefined {
  const path = (requestUrl ?? "").split("?")[0]!;
  return SESSION_PATH.exec(path)?.[1];
}

/** `/v1/sessions/<id>`. */
export const sessionPath = (sessionId: string): string => SESSION_PATH_PREFIX + sessionId;

/**
 * The session URL on a base (`ws[s]://host:port` or `http[s]://…`, no path); a base that
 * already ends in a session path is kept as is.
 */
export function sessionUrl(base: string, sessionId: string): string {
  if (SESSION_PATH.test(new URL(base).pathname)) return base;
  return base.replace(/\/+$/, "") + sessionPath(sessionId);
}

/** What a refused upgrade says. */
export interface Refusal {
  status: number;
  code: string;
  message: string;
  /** From Retry-After, ms. */
  retryAfterMs?: number;
}

/** Answers an upgrade request with a refusal and closes the socket. */
export function writeRefusal(
  socket: Duplex,
  status: number,
  code: string,
  message: string,
  retryAfterSeconds?: number,
): void {
  const body = JSON.stringify({ code, message });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? "Error"}\r\n` +
      "Content-Type: application/json\r\n" +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      (retryAfterSeconds !== undefined ? `Retry-After: ${retryAfterSeconds}\r\n` : "") +
      "Connection: close\r\n\r\n" +
      body,
  );
}

/** Reads a refusal back from an HTTP answer's status, body and Retry-After header. */
export function parseRefusal(status: number, body: string, retryAfter?: string | string[]): Refusal {
  let parsed: { code?: unknown; message?: unknown } = {};
  try {
    parsed = JSON.parse(body) as typeof parsed;
  } catch {
    parsed = { message: body };
  }
  const ra = Number(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
  return {
    status,
    code: typeof parsed.code === "string" ? parsed.code : "",
    message: typeof parsed.message === "string" ? parsed.message.slice(0, 500) : "",
    ...(Number.isFinite(ra) && ra > 0 ? { retryAfterMs: ra * 1000 } : {}),
  };
}
