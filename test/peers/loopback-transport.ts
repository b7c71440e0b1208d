// A fake session transport for unit tests: a Dialer whose connections are real
// OutgoingTcpStreams over an in-memory FrameSink. The "agent" side answers every DATA
// frame by running `respond` on the bytes and sending the result back as DATA, and
// records which host:port each stream was opened to (so tests can prove names were not
// resolved locally).
import type { Duplex } from "node:stream";
import * as pb from "../../proto/gen/session_pb.js";
import { decodeFrame } from "../../proto/frame-codec.js";
import type { FrameSink } from "../../cli/src/sdk/session/frame-sink.js";
import type { Dialer } from "../../cli/src/sdk/local/local-proxy.js";
import { OutgoingTcpStream } from "../../cli/src/sdk/session/outgoing-tcp-stream.js";

export class LoopbackTransport implements Dialer, FrameSink {
  readonly dialed: string[] = [];
  readonly streams = new Map<number, OutgoingTcpStream>();
  /** Frames sent by streams, as decoded (family, kind, connection id). */
  readonly sent: Array<{ family: number; kind: number; connectionId: number }> = [];
  refuse: string | undefined;
  #next = 1;

  constructor(private readonly respond: (data: Buffer) => Buffer = (d) => d) {}

  async dial(host: string, port: number): Promise<Duplex> {
    this.dialed.push(`${host}:${port}`);
    if (this.refuse) throw new Error(this.refuse);
    const s = new OutgoingTcpStream(this.#next++, this, (id) => this.streams.delete(id));
    this.streams.set(s.id, s);
    return s;
  }

  send(frame: Buffer): boolean {
    const f = decodeFrame(frame);
    this.sent.push({ family: f.header.family, kind: f.header.kind, connectionId: f.header.connectionId });
    const s = this.streams.get(f.header.connectionId);
    if (f.header.family === pb.FrameFamily.OUTGOING_TCP && s) {
      if (f.header.kind === pb.OutgoingKind.DATA) {
        const data = Buffer.from((f.message as pb.StreamData).data);
        queueMicrotask(() => s.remoteData(this.respond(data)));
      } else if (f.header.kind === pb.OutgoingKind.CLOSE) queueMicrotask(() => s.remoteClose(""));
    }
    return true;
  }

  whenWritable(cb: () => void): void {
    cb();
  }
}
