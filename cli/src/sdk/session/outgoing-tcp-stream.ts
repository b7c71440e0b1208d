// One outgoing TCP connection made from the Default cluster's network position, as a
// Node Duplex: writes become OUTGOING_TCP DATA frames on the stream's id, DATA frames from
// the agent are pushed as readable bytes, CLOSE either way ends it. Backpressure toward
// the local writer follows the WebSocket's send buffer (FrameSink.whenWritable).
import { Duplex } from "node:stream";
import * as pb from "../../../../proto/gen/session_pb.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import type { FrameSink } from "./frame-sink.js";
import { releaseWriter, sendChunks, STREAM_WRITE_HIGH_WATER_BYTES } from "./stream-chunks.js";

const F = pb.FrameFamily.OUTGOING_TCP;

export class OutgoingTcpStream extends Duplex {
  #remoteClosed = false;
  #sentClose = false;

  constructor(
    readonly id: number,
    private readonly sink: FrameSink,
    private readonly onGone: (id: number) => void,
  ) {
    super({ allowHalfOpen: false, writableHighWaterMark: STREAM_WRITE_HIGH_WATER_BYTES });
  }

  override _read(): void {
    // Bytes are pushed as frames arrive; the protocol has no per-stream read window.
  }

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
    if (this.#remoteClosed) return cb();
    if (!sendChunks(this.sink, F, pb.OutgoingKind.DATA, this.id, chunks))
      return cb(new Error("the session is disconnected"));
    releaseWriter(this.sink, chunks[chunks.length - 1]!.length, cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.#sendClose("");
    cb();
  }

  override _destroy(err: Error | null, cb: (err: Error | null) => void): void {
    this.#sendClose(err ? err.message : "");
    this.onGone(this.id);
    cb(err);
  }

  /** DATA from the agent. */
  remoteData(data: Uint8Array): void {
    if (!this.#remoteClosed) this.push(Buffer.from(data.buffer, data.byteOffset, data.length));
  }

  /** CLOSE from the agent (or the router, when the upstream was lost). */
  remoteClose(error: string): void {
    if (this.#remoteClosed) return;
    this.#remoteClosed = true;
    this.#sentClose = true; // the id is released on the first CLOSE either way
    if (error) this.destroy(new Error(error));
    else {
      this.push(null);
      this.end();
    }
  }

  #sendClose(error: string): void {
    if (this.#sentClose) return;
    this.#sentClose = true;
    this.sink.send(
      encodeFrame({ family: F, kind: pb.OutgoingKind.CLOSE, connectionId: this.id }, pb.StreamCloseSchema, {
        error,
      }),
    );
  }
}
