// Replays stolen HTTP requests (filtered steals) on the developer's local process and
// collects its answer. One undici Pool per local port keeps connections alive between
// requests, so a stolen request does not pay a TCP handshake, and bounds how many
// connections the local process sees. Hop-by-hop headers belonged to the caller's
// connection to the agent, not to this one: they are dropped both ways, and the body
// (already whole) is framed by its length.
// A kept-alive connection the local process closes just as a request goes out fails that
// request before any answer; an idempotent request is then sent once more on a fresh
// connection (what browsers and Go's client do), so keep-alive never costs a 502.
import { Pool, type Dispatcher } from "undici";
import { integerIn, nonNegative, positive } from "../../../../lib/option-error.js";
import type { HttpHeaderPair } from "../session/incoming-traffic.js";

export interface LocalHttpOptions {
  /** Kept-alive connections per local port, at most; further requests wait for one (default 64). */
  connectionsPerPort?: number;
  /**
   * How long the local process may take to start its answer, and then between two chunks of
   * it, ms (default 60 000: the agent's own deadline for a stolen request; 0: no limit).
   */
  answerTimeoutMs?: number;
  /** TCP connect timeout to the local process, ms (default 10 000). */
  connectTimeoutMs?: number;
  /** How long an idle connection stays open, ms (default 4 000; a server's Keep-Alive hint shortens it). */
  idleMs?: number;
}

export interface LocalHttpRequest {
  method: string;
  path: string;
  headers: readonly HttpHeaderPair[];
  body: Buffer;
}

export interface LocalHttpAnswer {
  status: number;
  headers: HttpHeaderPair[];
  body: Buffer;
}

/** Per-connection headers (RFC 9110 §7.6.1), plus the framing the agent already undid. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
]);
/**
 * Not forwarded to the local process: the caller's Content-Length (the body is re-framed by
 * its length) and Expect (the agent already read the whole body; a 100 Continue from the
 * local process would only confuse this client).
 */
const DROPPED_REQUEST = new Set([...HOP_BY_HOP, "content-length", "expect"]);
/** The agent frames the answer by its own length. */
const DROPPED_ANSWER = new Set([...HOP_BY_HOP, "content-length"]);
/** Safe to send twice (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);
/** The connection broke under the request (not: nothing listens, or a timeout). */
const BROKEN_CONNECTION = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"]);

type Attempt = { answer: LocalHttpAnswer } | { error: Error; answerStarted: boolean };

export class LocalHttpClient {
  readonly #pools = new Map<number, Pool>();
  readonly #connections: number;
  readonly #answerTimeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #idleMs: number;

  constructor(
    private readonly host: string,
    options: LocalHttpOptions = {},
  ) {
    this.#connections = integerIn("connectionsPerPort", options.connectionsPerPort, 64, 1);
    this.#answerTimeoutMs = nonNegative("answerTimeoutMs", options.answerTimeoutMs, 60_000);
    this.#connectTimeoutMs = positive("connectTimeoutMs", options.connectTimeoutMs, 10_000);
    this.#idleMs = positive("idleMs", options.idleMs, 4_000);
  }

  /** Sends one request to the local port; rejects when the local process did not answer. */
  async send(port: number, req: LocalHttpRequest): Promise<LocalHttpAnswer> {
    const headers: string[] = [];
    let host = false;
    for (const h of req.headers) {
      const lower = h.name.toLowerCase();
      if (DROPPED_REQUEST.has(lower)) continue;
      if (lower === "host") host = true;
      headers.push(h.name, h.value);
    }
    // HTTP/1.1 servers (Node's included) refuse requests without Host.
    if (!host) headers.push("host", `${this.host}:${port}`);
    const options: Dispatcher.DispatchOptions = {
      method: req.method,
      path: req.path,
      headers,
      body: req.body.length > 0 ? req.body : null,
    };
    const pool = this.#pool(port);
    let attempt = await dispatchOnce(pool, options);
    if ("error" in attempt && retryable(attempt, req.method)) attempt = await dispatchOnce(pool, options);
    if ("answer" in attempt) return attempt.answer;
    throw this.#explain(attempt.error);
  }

  /** Closes every pool once its requests in flight are answered. */
  async close(): Promise<void> {
    const pools = [...this.#pools.values()];
    this.#pools.clear();
    await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
  }

  #pool(port: number): Pool {
    let pool = this.#pools.get(port);
    if (!pool) {
      pool = new Pool(`http://${this.host.includes(":") ? `[${this.host}]` : this.host}:${port}`, {
        connections: this.#connections,
        pipelining: 1,
        keepAliveTimeout: this.#idleMs,
        headersTimeout: this.#answerTimeoutMs,
        bodyTimeout: this.#answerTimeoutMs,
        connect: { timeout: this.#connectTimeoutMs },
      });
      this.#pools.set(port, pool);
    }
    return pool;
  }

  /** undici's timeout errors say which timer fired, not how long it was. */
  #explain(err: Error): Error {
    switch ((err as { code?: string }).code) {
      case "UND_ERR_HEADERS_TIMEOUT":
      case "UND_ERR_BODY_TIMEOUT":
        return new Error(`no answer within ${this.#answerTimeoutMs} ms`, { cause: err });
      case "UND_ERR_CONNECT_TIMEOUT":
        return new Error(`no connection within ${this.#connectTimeoutMs} ms`, { cause: err });
      default:
        return err;
    }
  }
}

function retryable(a: { error: Error; answerStarted: boolean }, method: string): boolean {
  return (
    !a.answerStarted &&
    IDEMPOTENT.has(method.toUpperCase()) &&
    BROKEN_CONNECTION.has((a.error as { code?: string }).code ?? "")
  );
}

/** One request through undici's handler interface: raw header pairs in, the whole answer out. */
function dispatchOnce(pool: Pool, options: Dispatcher.DispatchOptions): Promise<Attempt> {
  return new Promise<Attempt>((resolve) => {
    let status = 0;
    let headers: HttpHeaderPair[] = [];
    const chunks: Buffer[] = [];
    const handler: Dispatcher.DispatchHandler = {
      // Its presence tells undici this handler speaks the current interface.
      onRequestStart() {},
      onResponseStart(controller, statusCode) {
        if (statusCode < 200) return; // informational (103 Early Hints): the final answer follows
        status = statusCode;
        headers = answerHeaders(controller.rawHeaders);
      },
      onResponseData(_controller, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        resolve({ answer: { status, headers, body: Buffer.concat(chunks) } });
      },
      onResponseError(_controller, error) {
        resolve({ error, answerStarted: status !== 0 });
      },
    };
    try {
      pool.dispatch(options, handler);
    } catch (err) {
      // Invalid request heads (a bad header name or value) are refused before any I/O.
      resolve({ error: err as Error, answerStarted: false });
    }
  });
}

function answerHeaders(raw: Dispatcher.DispatchController["rawHeaders"]): HttpHeaderPair[] {
  const out: HttpHeaderPair[] = [];
  if (!Array.isArray(raw)) return out;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = latin1(raw[i]!);
    if (!DROPPED_ANSWER.has(name.toLowerCase())) out.push({ name, value: latin1(raw[i + 1]!) });
  }
  return out;
}

/** Header bytes as Node's own parser decodes them. */
const latin1 = (b: Buffer | string): string => (typeof b === "string" ? b : b.toString("latin1"));
