// One stolen HTTP request (filtered steal) spoken as TRAFFIC frames on its own connection id
// (request id = connection id), after the NEW_CONNECTION that opened it:
//   agent → client: HTTP_REQUEST (head; the body inside when whole, else `body_streamed`),
//                   then DATA… and HTTP_REQUEST_END for a streamed body;
//   client → agent: HTTP_RESPONSE (head; the body inside when whole, else `body_streamed`),
//                   then DATA… and HTTP_RESPONSE_END for a streamed body;
//   agent → client: CLOSE once the answer is complete, so routers release the id.
// Either side may cut it with a CLOSE carrying an error: the client's becomes a 502 (or a cut
// connection once the answer began), the agent's tells the client the caller left or the
// answer's deadline passed. Bodies never sit whole in memory: request chunks go out as the
// caller sends them, paused while the session's WebSocket is above its high-water mark;
// answer chunks are written to the caller as they come, and while the caller's socket is
// full the session stops reading its WebSocket (session-flow.ts).
// The answer's deadline starts once the request body is sent: a slow upload is the caller's
// pace, not the local app's silence. A streamed answer then has no deadline (an event stream
// may stay open for hours).
import { ErrorCode } from "../../../../proto/error-codes.js";
import { decodePayload, encodeFrame, HEADER_BYTES } from "../../../../proto/frame-codec.js";
import {
  FrameFamily,
  HttpBodyEndSchema,
  HttpRequestSchema,
  HttpResponseSchema,
  StreamCloseSchema,
  TrafficKind,
} from "../../../../proto/gen/session_pb.js";
import { decodeStreamData, encodeStreamData } from "../../../../proto/stream-data-frame.js";
import type { AgentCounters } from "../agent-metrics.js";
import type { SessionFlow } from "../session-flow.js";
import type { RequestHead } from "./http-filter.js";
import type { StolenCaller } from "./stolen-caller.js";

const F = FrameFamily.TRAFFIC;

/** What an exchange needs of its session. */
export interface ExchangeContext {
  readonly flow: SessionFlow;
  readonly counters: AgentCounters;
  /** Largest data chunk per frame, bytes. */
  readonly maxChunkBytes: number;
  /** How long the answer's head may take once the request is sent, ms. */
  readonly timeoutMs: number;
  /** The exchange is over: forget its id. */
  release(id: number): void;
}

type State = "requesting" | "answering" | "done";

export class StolenHttpExchange {
  readonly kind = "http";
  /** When the unanswered request fails, ms since the epoch; Infinity until its body is sent. */
  deadline = Infinity;
  #state: State = "requesting";

  constructor(
    readonly id: number,
    private readonly caller: StolenCaller,
    private readonly ctx: ExchangeContext,
  ) {}

  /** The HTTP_REQUEST frame of `head` (with the whole body, or announcing a streamed one). */
  requestFrame(head: RequestHead): Buffer {
    const whole = this.caller.wholeBody;
    return encodeFrame(
      { family: F, kind: TrafficKind.HTTP_REQUEST, connectionId: this.id, requestId: this.id },
      HttpRequestSchema,
      {
        method: head.method,
        path: head.path,
        headers: head.headers.map(([name, value]) => ({ name, value })),
        body: whole ?? new Uint8Array(0),
        bodyStreamed: whole === undefined,
      },
    );
  }

  /** Sends the request (its NEW_CONNECTION already went out), then its body as it comes. */
  start(frame: Buffer): void {
    const { caller, ctx } = this;
    caller.onGone((reason) => this.#cut(reason));
    ctx.flow.send(frame);
    const whole = caller.wholeBody;
    if (whole) {
      ctx.counters.bytesToClient.traffic += whole.length;
      this.deadline = Date.now() + ctx.timeoutMs;
      return;
    }
    caller.readBody({ data: (chunk) => this.#bodyData(chunk), end: () => this.#bodyEnd() });
  }

  #bodyData(chunk: Buffer): void {
    if (this.#state === "done") return;
    const { flow, counters, maxChunkBytes } = this.ctx;
    let ok = true;
    for (let at = 0; at < chunk.length; at += maxChunkBytes) {
      const part = chunk.length <= maxChunkBytes ? chunk : chunk.subarray(at, at + maxChunkBytes);
      counters.bytesToClient.traffic += part.length;
      ok = flow.send(encodeStreamData(F, TrafficKind.DATA, this.id, part)) && ok;
    }
    if (!ok) flow.pauseSource(this.caller);
  }

  #bodyEnd(): void {
    if (this.#state === "done") return;
    this.ctx.flow.send(
      encodeFrame(
        { family: F, kind: TrafficKind.HTTP_REQUEST_END, connectionId: this.id },
        HttpBodyEndSchema,
        {},
      ),
    );
    if (this.#state === "requesting") this.deadline = Date.now() + this.ctx.timeoutMs;
  }

  /** HTTP_RESPONSE from the client: the answer's head, and its body when whole. */
  response(frame: Buffer): void {
    if (this.#state !== "requesting") return this.ctx.counters.error(ErrorCode.UNKNOWN_CONNECTION);
    const r = decodePayload(frame, HttpResponseSchema);
    const headers = r.headers.map((h) => [h.name, h.value] as const);
    this.deadline = Infinity;
    if (r.bodyStreamed) {
      this.#state = "answering";
      this.caller.respond(r.status || 200, headers);
      return;
    }
    this.ctx.counters.bytesFromClient.traffic += r.body.length;
    this.caller.respond(
      r.status || 200,
      headers,
      Buffer.from(r.body.buffer, r.body.byteOffset, r.body.length),
    );
    this.#finish("");
  }

  /** DATA from the client: a chunk of the streamed answer. */
  data(frame: Buffer): void {
    if (this.#state !== "answering") return this.ctx.counters.error(ErrorCode.UNKNOWN_CONNECTION);
    const chunk = decodeStreamData(frame);
    this.ctx.counters.bytesFromClient.traffic += chunk.length;
    if (!this.caller.write(chunk)) this.ctx.flow.blockUntil((release) => this.caller.drained(release));
  }

  /** HTTP_RESPONSE_END from the client: the streamed answer is complete. */
  responseEnd(): void {
    if (this.#state !== "answering") return this.ctx.counters.error(ErrorCode.UNKNOWN_CONNECTION);
    this.caller.end();
    this.#finish("");
  }

  /** CLOSE from the client: the exchange is over without (the rest of) an answer. */
  closed(error: string): void {
    if (this.#state === "done") return;
    const answering = this.#state === "answering";
    this.#release();
    this.caller.fail(
      error ||
        (answering
          ? "the session ended the answer early"
          : "the session closed the request without answering"),
    );
  }

  /** The agent's sweep: an answer whose head is overdue fails with 502. */
  expire(now: number): void {
    if (this.#state !== "requesting" || this.deadline > now) return;
    this.caller.fail(`no answer within ${this.ctx.timeoutMs} ms`);
    this.#finish("timed out waiting for the HTTP response");
  }

  /** The session ended: no frames any more, the caller gets a 502 or a cut connection. */
  sessionEnded(): void {
    if (this.#state === "done") return;
    this.#state = "done";
    this.ctx.flow.forget(this.caller);
    this.caller.fail("the session ended");
  }

  /** The caller left: tell the client, so it stops the local request. */
  #cut(reason: string): void {
    if (this.#state === "done") return;
    this.#finish(reason);
  }

  #finish(error: string): void {
    this.#release();
    this.ctx.flow.send(
      encodeFrame({ family: F, kind: TrafficKind.CLOSE, connectionId: this.id }, StreamCloseSchema, {
        error,
      }),
    );
  }

  #release(): void {
    this.#state = "done";
    this.ctx.flow.forget(this.caller);
    this.ctx.release(this.id);
  }
}

/** Whether a request frame fits the peer's payload limit. */
export function fitsFrame(frame: Buffer, maxPayloadBytes: number): boolean {
  return frame.length - HEADER_BYTES <= maxPayloadBytes;
}
