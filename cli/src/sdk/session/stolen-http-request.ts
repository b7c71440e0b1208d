// One stolen HTTP request (filtered steal) as a program handles it, over the TRAFFIC frames
// of proto/session.proto's HttpRequest/HttpResponse exchange on its connection id:
// - the body is whole (a Buffer, from the request frame) or a Readable fed by DATA frames
//   until HTTP_REQUEST_END; while the program does not read it, the session stops reading
//   its router connection (InboundHold) instead of buffering it;
// - the answer is whole (`respond`, one frame) or streamed (`respondStream`: the head at
//   once, then a Writable whose chunks become DATA frames, ended by HTTP_RESPONSE_END,
//   destroyed with an error → CLOSE with that error); writes wait for the router
//   connection's send buffer (FrameSink.whenWritable);
// - `signal` aborts when the exchange ends before the answer did: the caller left, the
//   agent's deadline passed, or the router connection dropped.
// The agent's CLOSE ends the exchange; nothing is sent on its id after that.
import { Readable, Writable } from "node:stream";
import * as pb from "../../../../proto/gen/session_pb.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import { encodeStreamData } from "../../../../proto/stream-data-frame.js";
import type { FrameSink, InboundHold } from "./frame-sink.js";
import type { IncomingConnectionInfo } from "./incoming-traffic.js";
import { MAX_CHUNK_BYTES } from "./stream-chunks.js";

const F = pb.FrameFamily.TRAFFIC;
/** How much of a streamed request body may wait for the program before the session stops reading. */
const BODY_BUFFER_BYTES = 1024 * 1024;

export interface HttpHeaderPair {
  name: string;
  value: string;
}

export interface HttpAnswerHead {
  status: number;
  headers?: HttpHeaderPair[];
}

export interface HttpAnswer extends HttpAnswerHead {
  body?: Uint8Array;
}

/** A streamed request body: DATA frames in, read by the program. */
export class StolenRequestBody extends Readable {
  #release: (() => void) | undefined;

  constructor(private readonly inbound: InboundHold) {
    super({ highWaterMark: BODY_BUFFER_BYTES });
    // Its failure is the exchange's (see `signal`): a body nobody reads must not crash the process.
    this.on("error", () => {});
  }

  override _read(): void {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    this._read();
    cb(err);
  }

  /** A DATA frame's bytes. */
  remoteData(data: Buffer): void {
    if (this.destroyed || this.readableEnded) return;
    if (!this.push(data) && !this.#release) this.inbound.holdInbound((release) => (this.#release = release));
  }

  /** HTTP_REQUEST_END. */
  remoteEnd(): void {
    if (!this.destroyed) this.push(null);
  }
}

/** A streamed answer's body: chunks out as DATA frames, ended by HTTP_RESPONSE_END. */
class StolenAnswerBody extends Writable {
  constructor(
    private readonly id: number,
    private readonly sink: FrameSink,
    private readonly isClosed: () => boolean,
    private readonly onDone: () => void,
  ) {
    super();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.isClosed()) return cb(new Error("the caller is gone"));
    for (let at = 0; at < chunk.length; at += MAX_CHUNK_BYTES) {
      const part = chunk.length <= MAX_CHUNK_BYTES ? chunk : chunk.subarray(at, at + MAX_CHUNK_BYTES);
      if (!this.sink.send(encodeStreamData(F, pb.TrafficKind.DATA, this.id, part)))
        return cb(new Error("the session is disconnected"));
    }
    this.sink.whenWritable(() => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.onDone();
    if (this.isClosed()) return cb();
    this.sink.send(
      encodeFrame(
        { family: F, kind: pb.TrafficKind.HTTP_RESPONSE_END, connectionId: this.id },
        pb.HttpBodyEndSchema,
        {},
      ),
    );
    cb();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    if (!this.writableFinished) {
      this.onDone();
      if (!this.isClosed())
        this.sink.send(
          encodeFrame(
            { family: F, kind: pb.TrafficKind.CLOSE, connectionId: this.id },
            pb.StreamCloseSchema,
            {
              error: err?.message || "the answer was abandoned",
            },
          ),
        );
    }
    cb(err);
  }
}

export class IncomingHttpRequest {
  #answered = false;
  #answerDone = false;
  #closed = false;
  #answerBody: StolenAnswerBody | undefined;
  readonly #abort = new AbortController();

  constructor(
    readonly connectionId: number,
    readonly requestId: number,
    readonly info: IncomingConnectionInfo | undefined,
    readonly method: string,
    readonly path: string,
    readonly headers: HttpHeaderPair[],
    /** The whole body when it came in the request frame, else a stream of it. */
    readonly body: Buffer | Readable,
    private readonly sink: FrameSink,
  ) {}

  /** The first value of a header (case-insensitive). */
  header(name: string): string | undefined {
    const n = name.toLowerCase();
    return this.headers.find((h) => h.name.toLowerCase() === n)?.value;
  }

  /** An answer was started (whole or streamed). */
  get answered(): boolean {
    return this.#answered;
  }

  /** The exchange is over on the agent's side: nothing more can be sent. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Aborted when the exchange ends before the answer did (the caller left, a deadline, a lost router). */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /**
   * Sends a whole answer; a second answer is ignored. False when it could not be sent. What
   * is left of a streamed request body is dropped (the agent stops sending it).
   */
  respond(answer: HttpAnswer): boolean {
    if (this.#answered) return true;
    this.#answered = true;
    this.#answerOver();
    if (this.#closed) return false;
    return this.sink.send(
      encodeFrame(
        {
          family: F,
          kind: pb.TrafficKind.HTTP_RESPONSE,
          connectionId: this.connectionId,
          requestId: this.requestId,
        },
        pb.HttpResponseSchema,
        { status: answer.status, headers: answer.headers ?? [], body: answer.body ?? new Uint8Array(0) },
      ),
    );
  }

  /**
   * Sends the answer's head now; its body is what the returned Writable is given, until it
   * ends. Destroying it with an error cuts the answer (the caller's connection is closed).
   */
  respondStream(head: HttpAnswerHead): Writable {
    if (this.#answered) throw new Error(`stolen request ${this.connectionId} was already answered`);
    this.#answered = true;
    const body = new StolenAnswerBody(
      this.connectionId,
      this.sink,
      () => this.#closed,
      () => this.#answerOver(),
    );
    this.#answerBody = body;
    if (this.#closed) body.destroy(new Error("the caller is gone"));
    else
      this.sink.send(
        encodeFrame(
          {
            family: F,
            kind: pb.TrafficKind.HTTP_RESPONSE,
            connectionId: this.connectionId,
            requestId: this.requestId,
          },
          pb.HttpResponseSchema,
          { status: head.status, headers: head.headers ?? [], bodyStreamed: true },
        ),
      );
    return body;
  }

  /** DATA from the agent: request body bytes. */
  remoteData(data: Buffer): void {
    if (this.body instanceof StolenRequestBody) this.body.remoteData(data);
  }

  /** HTTP_REQUEST_END from the agent. */
  remoteEnd(): void {
    if (this.body instanceof StolenRequestBody) this.body.remoteEnd();
  }

  /** CLOSE from the agent (or a router for a lost upstream), or the router connection dropped. */
  remoteClose(error: string): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#answerDone) return this.#dropBody();
    const reason = new Error(error || "the stolen request ended before its answer");
    this.#dropBody(reason);
    this.#answerBody?.destroy(reason);
    this.#abort.abort(reason);
  }

  /**
   * The answer is complete (or cut): the rest of a streamed request body will not come, and
   * one left unread must not hold the session's reading.
   */
  #answerOver(): void {
    this.#answerDone = true;
    this.#dropBody();
  }

  #dropBody(reason?: Error): void {
    if (this.body instanceof StolenRequestBody && !this.body.destroyed && !this.body.readableEnded)
      this.body.destroy(reason);
  }
}
