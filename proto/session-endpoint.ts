// The session endpoint every router and agent serves, and how it refuses: the WebSocket
// upgrade on /v1/sessions/{id}; a refusal is a plain HTTP answer with a JSON body
// {code, message} (and Retry-After on 503), which dialers turn back into errors. One
// definition here, so the path and the refusal format cannot drift between sides.
import type { Duplex } from "node:stream";
import { STATUS_CODES } from "node:http";

export const SESSION_PATH_PREFIX = "/v1/sessions/";

/**
 * Session ids: what routers and agents key a session by. The control plane routes every
 * session object by its key `<namespace>:<name>` (sessionKey below); static routes and test
 * peers may use any other id. 1–317 characters of [A-Za-z0-9._:-] (a 63-character namespace,
 * the colon and a 253-character name), starting with an alphanumeric.
 */
const SESSION_PATH = /^\/v1\/sessions\/([A-Za-z0-9][A-Za-z0-9._:-]{0,316})$/;

/** Longest session id: a namespace (63), ":" and an object name (253). */
export const SESSION_ID_MAX_LENGTH = 317;

const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const OBJECT_NAME = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/**
 * The key of a session object (MultiClusterSession or ClusterSession) in every routing
 * table, live-session report and session URL: `<namespace>:<name>`. Object names are only
 * unique within a namespace, so a name alone would let a same-named session of another
 * namespace replace, remove or attach to this one; neither part can contain ":", so two
 * objects never share a key.
 */
export function sessionKey(namespace: string, name: string): string {
  if (!NAMESPACE.test(namespace) || !OBJECT_NAME.test(name))
    throw new RangeError(
      `session key of ${JSON.stringify(namespace)}/${JSON.stringify(name)}: ` +
        "the namespace must be an RFC 1123 label and the name a DNS subdomain",
    );
  return `${namespace}:${name}`;
}

/** The namespace and name of a session key, or undefined when `id` is not one. */
export function parseSessionKey(id: string): { namespace: string; name: string } | undefined {
  const colon = id.indexOf(":");
  if (colon < 0) return undefined;
  const namespace = id.slice(0, colon);
  const name = id.slice(colon + 1);
  return NAMESPACE.test(namespace) && OBJECT_NAME.test(name) ? { namespace, name } : undefined;
}

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
