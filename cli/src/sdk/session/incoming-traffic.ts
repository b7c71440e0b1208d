// Incoming traffic handed to the session by agents, in the shapes a program uses:
// - IncomingConnection: a raw mirrored or stolen connection as a Duplex. For a steal,
//   what the program writes goes back to the caller; for a mirror the copy is read-only
//   (writes are discarded: the cluster's app already answered).
// - IncomingHttpRequest: one stolen HTTP request (filtered steal); `respond` sends the
//   answer to the caller.
// Connection ids are the router's session-unique ids; the router forgets an id on the
// first CLOSE from either side, so nothing is sent on a connection after that.
import { Duplex } from "node:stream";
import * as pb from "../../../../proto/gen/session_pb.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import { encodeStreamData } from "../../../../proto/stream-data-frame.js";
import type { FrameSink } from "./frame-sink.js";
import { MAX_CHUNK_BYTES } from "./outgoing-tcp-stream.js";

const F = pb.FrameFamily.TRAFFIC;

export type TrafficMode = "mirror" | "steal";

export interface IncomingConnectionInfo {
  id: number;
  subscriptionId: number;
  /** The target's port the connection arrived on. */
  port: number;
  remoteAddress: string;
  remotePort: number;
  mode: TrafficMode;
}

export class IncomingConnection extends Duplex {
  #closed = false;

  constructor(
    readonly info: IncomingConnectionInfo,
    private readonly sink: FrameSink,
    private readonly onGone: (id: number) => void,
  ) {
    super({ allowHalfOpen: false });
  }

  override _read(): void {}

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.#closed || this.info.mode === "mirror") return cb();
    for (let at = 0; at < chunk.length; at += MAX_CHUNK_BYTES)
      this.sink.send(
        encodeStreamData(F, pb.TrafficKind.DATA, this.info.id, chunk.subarray(at, at + MAX_CHUNK_BYTES)),
      );
    this.sink.whenWritable(() => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.#close("");
    cb();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    this.#close(err ? err.message : "");
    this.onGone(this.info.id);
    cb(err);
  }

  remoteData(data: Uint8Array): void {
    if (!this.#closed) this.push(Buffer.from(data.buffer, data.byteOffset, data.length));
  }

  remoteClose(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.push(null);
    this.end();
  }

  #close(error: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.sink.send(
      encodeFrame(
        { family: F, kind: pb.TrafficKind.CLOSE, connectionId: this.info.id },
        pb.StreamCloseSchema,
        {
          error,
        },
      ),
    );
  }
}

export interface HttpHeaderPair {
  name: string;
  value: string;
}

export interface HttpAnswer {
  status: number;
  headers?: HttpHeaderPair[];
  body?: Uint8Array;
}

export class IncomingHttpRequest {
  #answered = false;

  constructor(
    readonly connectionId: number,
    readonly requestId: number,
    readonly info: IncomingConnectionInfo | undefined,
    readonly method: string,
    readonly path: string,
    readonly headers: HttpHeaderPair[],
    readonly body: Buffer,
    private readonly sink: FrameSink,
  ) {}

  /** The first value of a header (case-insensitive). */
  header(name: string): string | undefined {
    const n = name.toLowerCase();
    return this.headers.find((h) => h.name.toLowerCase() === n)?.value;
  }

  get answered(): boolean {
    return this.#answered;
  }

  /** Sends the answer; a second call is ignored. False when the session is disconnected. */
  respond(answer: HttpAnswer): boolean {
    if (this.#answered) return true;
    this.#answered = true;
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
}
