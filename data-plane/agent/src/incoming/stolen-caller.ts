// The caller's side of one stolen HTTP request on the agent: the Node request and response
// the port proxy accepted, driven by the session layer (stolen-http-exchange.ts).
// - The request body is read whole first when it is small and framed by its length (it then
//   travels inside the request frame); any other body streams, paused and resumed by the
//   session's flow control.
// - The answer is whole (framed by its length) or streamed: its head goes out at once (an
//   event stream must not wait for its first event), then the body as it comes, framed by
//   the local app's Content-Length when it sent one, else chunked; `drained` tells when the
//   caller took what was written.
// A failure before the answer began is a 502 naming the reason; after it, the caller's
// connection is cut, as any proxy does when its upstream breaks mid-answer.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Pausable } from "../session-flow.js";

/** A body with a Content-Length up to this many bytes travels whole in the request frame. */
export const WHOLE_BODY_BYTES = 64 * 1024;

/** Per-connection headers and framing the agent does itself. */
const HOP_BY_HOP = new Set(["transfer-encoding", "connection", "keep-alive"]);

/** Where a streamed request body goes. */
export interface RequestBodySink {
  data(chunk: Buffer): void;
  end(): void;
}

/**
 * The request body is read whole (see WHOLE_BODY_BYTES) before `ready` runs; any other body
 * is left unread for `readBody`. Nothing is called when the caller leaves meanwhile.
 */
export function acceptStolenCaller(
  req: IncomingMessage,
  res: ServerResponse,
  onFail: () => void,
  ready: (caller: StolenCaller) => void,
): void {
  const length = req.headers["content-length"];
  const whole =
    req.headers["transfer-encoding"] === undefined &&
    (length === undefined || Number(length) <= WHOLE_BODY_BYTES);
  if (!whole) return ready(new StolenCaller(req, res, onFail, undefined));
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    if (!res.destroyed) ready(new StolenCaller(req, res, onFail, Buffer.concat(chunks)));
  });
}

export class StolenCaller implements Pausable {
  /** The answer ended, failed or the caller left: nothing more is written or reported. */
  #done = false;
  #bodyOpen = false;
  #gone: ((reason: string) => void) | undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly onFail: () => void,
    /** The whole request body, or undefined when it streams (`readBody`). */
    readonly wholeBody: Buffer | undefined,
  ) {
    res.on("close", () => {
      if (this.#done || res.writableFinished) return;
      this.#done = true;
      this.#gone?.("the caller closed its connection");
    });
  }

  get remoteAddress(): string {
    return this.req.socket.remoteAddress ?? "";
  }

  /** Calls `cb` once when the caller leaves before the answer ended. */
  onGone(cb: (reason: string) => void): void {
    this.#gone = cb;
  }

  /** Streams the request body into `sink` (only when `wholeBody` is undefined). */
  readBody(sink: RequestBodySink): void {
    this.#bodyOpen = true;
    this.req.on("data", (chunk: Buffer) => {
      if (this.#bodyOpen) sink.data(chunk);
    });
    this.req.on("end", () => {
      if (!this.#bodyOpen) return;
      this.#bodyOpen = false;
      sink.end();
    });
  }

  pause(): void {
    this.req.pause();
  }

  resume(): void {
    this.req.resume();
  }

  /** Starts the answer; with `body` it is also complete. */
  respond(status: number, headers: ReadonlyArray<readonly [string, string]>, body?: Buffer): void {
    if (this.#done) return;
    const out: string[] = [];
    for (const [name, value] of headers) {
      const lower = name.toLowerCase();
      // A whole answer is framed by its own length; a streamed one keeps the app's length.
      if (HOP_BY_HOP.has(lower) || (body && lower === "content-length")) continue;
      out.push(name, value);
    }
    if (!body) {
      this.res.writeHead(status, out);
      this.res.flushHeaders();
      return;
    }
    // 204 and 304 carry no body and no length (RFC 9110 §8.6).
    if (status !== 204 && status !== 304) out.push("Content-Length", String(body.length));
    this.res.writeHead(status, out);
    this.#finish();
    this.res.end(body);
  }

  /** A chunk of a streamed answer; false when the caller's socket is full (see `drained`). */
  write(chunk: Buffer): boolean {
    if (this.#done) return true;
    return this.res.write(chunk);
  }

  /** Calls `cb` once the caller took what was written (or left). */
  drained(cb: () => void): void {
    const res = this.res;
    if (this.#done || res.destroyed || !res.writableNeedDrain) return cb();
    let called = false;
    const once = () => {
      if (called) return;
      called = true;
      res.off("drain", once);
      res.off("close", once);
      cb();
    };
    res.on("drain", once);
    res.on("close", once);
  }

  /** Ends a streamed answer. */
  end(): void {
    if (this.#done) return;
    this.#finish();
    this.res.end();
  }

  /** The exchange failed: 502 naming `reason` when nothing was answered yet, else the connection is cut. */
  fail(reason: string): void {
    if (this.#done) return;
    this.#done = true;
    this.#bodyOpen = false;
    this.onFail();
    const res = this.res;
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    // A body still coming is not worth reading to nowhere: the connection ends with the answer.
    const unread = !this.req.complete;
    res.writeHead(502, { "content-type": "text/plain", ...(unread ? { connection: "close" } : {}) });
    res.end(`switchyard agent: the session did not answer: ${reason}\n`);
    this.#drainRequest();
  }

  #finish(): void {
    this.#done = true;
    this.#bodyOpen = false;
    this.#drainRequest();
  }

  /**
   * The answer is out while the request body is still coming (the local app answered
   * early): read the rest to nowhere, so the caller's kept-alive connection can go on.
   */
  #drainRequest(): void {
    if (!this.req.complete) this.req.resume();
  }
}
