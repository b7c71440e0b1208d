// Replays stolen HTTP requests (filtered steals) on the developer's local process and
// streams its answer back. One undici Pool per local port keeps connections alive between
// requests, so a stolen request does not pay a TCP handshake, and bounds how many
// connections the local process sees. Bodies stream both ways: a streamed request body
// goes to the local process as it arrives (framed by the caller's Content-Length when it
// had one, else chunked); an answer framed by a length of at most 64 KiB (or without a
// body) goes back whole in one frame, any other as it comes — its head at once (an event
// stream must not wait for its first event), then its chunks, with the local process
// paused while the router connection's send buffer is full. Hop-by-hop headers belonged to
// the caller's connection to the agent, not to this one: they are dropped both ways.
// A kept-alive connection the local process closes just as a request goes out fails that
// request before any answer; an idempotent request with a whole body is then sent once
// more on a fresh connection (what browsers and Go's client do), so keep-alive never costs
// a 502. A streamed body cannot be sent twice.
import type { Readable, Writable } from "node:stream";
import { Pool, type Dispatcher } from "undici";
import { integerIn, nonNegative, positive } from "../../../../lib/option-error.js";
import type { HttpAnswer, HttpAnswerHead, HttpHeaderPair } from "../session/incoming-traffic.js";

export interface LocalHttpOptions {
  /** Kept-alive connections per local port, at most; further requests wait for one (default 64). */
  connectionsPerPort?: number;
  /**
   * How long the local process may take to start its answer (status and headers) once the
   * request is sent, ms (default 60 000: the agent's own deadline for a stolen request; 0:
   * no limit). The body then streams without a deadline, as long as the caller stays.
   */
  answerTimeoutMs?: number;
  /** TCP connect timeout to the local process, ms (default 10 000). */
  connectTimeoutMs?: number;
  /**
   * Where a local port is reached instead of host:port: a Unix socket path (the command's
   * network namespace under `exec --network=transparent`, see ../transparent).
   */
  socketPathFor?: (port: number) => string | undefined;
  /** How long an idle connection stays open, ms (default 4 000; a server's Keep-Alive hint shortens it). */
  idleMs?: number;
}

export interface LocalHttpRequest {
  method: string;
  path: string;
  headers: readonly HttpHeaderPair[];
  /** The whole body, or a stream of it (sent as it arrives). */
  body: Buffer | Readable;
  /** Aborts the request and its answer (the caller left). */
  signal?: AbortSignal;
}

/** Where the answer goes: an IncomingHttpRequest. */
export interface LocalAnswerTarget {
  /** A whole answer. */
  respond(answer: HttpAnswer): unknown;
  /** A streamed answer: the head now, the body through the Writable. */
  respondStream(head: HttpAnswerHead): Writable;
}

/** Answers framed by a length up to this go back whole, in one frame. */
export const WHOLE_ANSWER_BYTES = 64 * 1024;

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
 * Not forwarded to the local process: Expect (the agent already answered 100 Continue; one
 * from the local process would only confuse this client).
 */
const DROPPED_REQUEST = new Set([...HOP_BY_HOP, "expect"]);
/** Safe to send twice (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);
/** The connection broke under the request (not: nothing listens, or a timeout). */
const BROKEN_CONNECTION = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"]);

type Attempt = { ok: true } | { error: Error; answerStarted: boolean };

export class LocalHttpClient {
  readonly #pools = new Map<number, Pool>();
  readonly #connections: number;
  readonly #answerTimeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #idleMs: number;
  readonly #socketPathFor: ((port: number) => string | undefined) | undefined;

  constructor(
    private readonly host: string,
    options: LocalHttpOptions = {},
  ) {
    this.#connections = integerIn("connectionsPerPort", options.connectionsPerPort, 64, 1);
    this.#answerTimeoutMs = nonNegative("answerTimeoutMs", options.answerTimeoutMs, 60_000);
    this.#connectTimeoutMs = positive("connectTimeoutMs", options.connectTimeoutMs, 10_000);
    this.#idleMs = positive("idleMs", options.idleMs, 4_000);
    this.#socketPathFor = options.socketPathFor;
  }

  /**
   * Sends one request to the local port and its answer to `to`; resolves once the answer is
   * complete. Rejects when the local process did not answer — before any answer went to
   * `to` (answer 502 then), or after a streamed one began (it was cut).
   */
  async send(port: number, req: LocalHttpRequest, to: LocalAnswerTarget): Promise<void> {
    const whole = Buffer.isBuffer(req.body);
    // A streamed body keeps the caller's length (else it goes chunked); a whole one is framed by its own.
    const keepLength = !whole && !req.headers.some((h) => h.name.toLowerCase() === "transfer-encoding");
    const headers: string[] = [];
    let host = false;
    for (const h of req.headers) {
      const lower = h.name.toLowerCase();
      if (DROPPED_REQUEST.has(lower) || (lower === "content-length" && !keepLength)) continue;
      if (lower === "host") host = true;
      headers.push(h.name, h.value);
    }
    // HTTP/1.1 servers (Node's included) refuse requests without Host.
    if (!host) headers.push("host", `${this.host}:${port}`);
    const options: Dispatcher.DispatchOptions = {
      method: req.method,
      path: req.path,
      headers,
      body: whole ? ((req.body as Buffer).length > 0 ? req.body : null) : req.body,
    };
    const pool = this.#pool(port);
    let attempt = await dispatchOnce(pool, options, req, to);
    if ("error" in attempt && whole && retryable(attempt, req.method))
      attempt = await dispatchOnce(pool, options, req, to);
    if ("error" in attempt) throw this.#explain(attempt.error);
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
        // A streamed answer may be quiet for long (an event stream between events).
        bodyTimeout: 0,
        connect: { timeout: this.#connectTimeoutMs },
        ...(this.#socketPathFor?.(port) ? { socketPath: this.#socketPathFor(port)! } : {}),
      });
      this.#pools.set(port, pool);
    }
    return pool;
  }

  /** undici's timeout errors say which timer fired, not how long it was. */
  #explain(err: Error): Error {
    switch ((err as { code?: string }).code) {
      case "UND_ERR_HEADERS_TIMEOUT":
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

/**
 * One request through undici's handler interface: raw header pairs in; the answer out to
 * `to`, whole or streamed (see the top of this file).
 */
function dispatchOnce(
  pool: Pool,
  options: Dispatcher.DispatchOptions,
  req: LocalHttpRequest,
  to: LocalAnswerTarget,
): Promise<Attempt> {
  return new Promise<Attempt>((resolve) => {
    const { signal } = req;
    if (signal?.aborted) return resolve({ error: signal.reason as Error, answerStarted: false });
    let status = 0;
    let headers: HttpHeaderPair[] = [];
    let chunks: Buffer[] | undefined;
    let out: Writable | undefined;
    let controller: Dispatcher.DispatchController | undefined;
    let settled = false;
    const onAbort = () => controller?.abort(signal!.reason as Error);
    const settle = (a: Attempt) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      resolve(a);
    };
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        signal?.addEventListener("abort", onAbort, { once: true });
      },
      onResponseStart(c, statusCode) {
        if (statusCode < 200) return; // informational (103 Early Hints): the final answer follows
        status = statusCode;
        headers = answerHeaders(c.rawHeaders);
        const length = headers.find((h) => h.name.toLowerCase() === "content-length")?.value;
        const bodiless = req.method.toUpperCase() === "HEAD" || status === 204 || status === 304;
        if (bodiless || (length !== undefined && Number(length) <= WHOLE_ANSWER_BYTES)) {
          // Framed by the agent, by its own length.
          headers = headers.filter((h) => h.name.toLowerCase() !== "content-length");
          chunks = [];
          return;
        }
        const body = to.respondStream({ status, headers });
        out = body;
        body.on("drain", () => c.resume());
        // The caller left or the session dropped: stop the local process's answer.
        body.on("error", (err) => {
          if (!settled) c.abort(err);
        });
      },
      onResponseData(c, chunk) {
        if (chunks) chunks.push(chunk);
        else if (out && !out.write(chunk)) c.pause();
      },
      onResponseEnd() {
        if (chunks) to.respond({ status, headers, body: Buffer.concat(chunks) });
        else out?.end();
        settle({ ok: true });
      },
      onResponseError(_c, error) {
        out?.destroy(error);
        settle({ error, answerStarted: status !== 0 });
      },
    };
    try {
      pool.dispatch(options, handler);
    } catch (err) {
      // Invalid request heads (a bad header name or value) are refused before any I/O.
      settle({ error: err as Error, answerStarted: false });
    }
  });
}

function answerHeaders(raw: Dispatcher.DispatchController["rawHeaders"]): HttpHeaderPair[] {
  const out: HttpHeaderPair[] = [];
  if (!Array.isArray(raw)) return out;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = latin1(raw[i]!);
    if (!HOP_BY_HOP.has(name.toLowerCase())) out.push({ name, value: latin1(raw[i + 1]!) });
  }
  return out;
}

/** Header bytes as Node's own parser decodes them. */
const latin1 = (b: Buffer | string): string => (typeof b === "string" ? b : b.toString("latin1"));
