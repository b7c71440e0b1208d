// Incoming traffic handed to the session by agents, in the shapes a program uses:
// - IncomingConnection: a raw mirrored or stolen connection as a Duplex. For a steal,
//   what the program writes goes back to the caller; for a mirror the copy is read-only
//   (writes are discarded: the cluster's app already answered).
// - IncomingHttpRequest: one stolen HTTP request (filtered steal), bodies whole or
//   streamed both ways (stolen-http-request.ts; re-exported here).
// Connection ids are the router's session-unique ids; the router forgets an id on the
// first CLOSE from either side, so nothing is sent on a connection after that.
import { Duplex } from "node:stream";
import * as pb from "../../../../proto/gen/session_pb.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import type { FrameSink } from "./frame-sink.js";
import { releaseWriter, sendChunks, STREAM_WRITE_HIGH_WATER_BYTES } from "./stream-chunks.js";

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
    super({ allowHalfOpen: false, writableHighWaterMark: STREAM_WRITE_HIGH_WATER_BYTES });
  }

  override _read(): void {}

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.#send([chunk], cb);
  }

  /** Chunks written while the previous write was under way: they leave together. */
  override _writev(chunks: Array<{ chunk: Buffer }>, cb: (err?: Error | null) => void): void {
    this.#send(
      chunks.map((c) => c.chunk),
      cb,
    );
  }

  #send(chunks: Buffer[], cb: (err?: Error | null) => void): void {
    if (this.#closed || this.info.mode === "mirror") return cb();
    sendChunks(this.sink, F, pb.TrafficKind.DATA, this.info.id, chunks);
    releaseWriter(this.sink, chunks[chunks.length - 1]!.length, cb);
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

export {
  IncomingHttpRequest,
  StolenRequestBody,
  type HttpAnswer,
  type HttpAnswerHead,
  type HttpHeaderPair,
} from "./stolen-http-request.js";
