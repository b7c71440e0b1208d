import { describe, expect, it } from "vitest";
import * as pb from "../../../../proto/gen/session_pb.js";
import { decodeStreamData } from "../../../../proto/stream-data-frame.js";
import { MAX_CHUNK_BYTES, releaseWriter, sendChunks } from "./stream-chunks.js";

const F = pb.FrameFamily.OUTGOING_TCP;
const K = pb.OutgoingKind.DATA;

class Sink {
  readonly frames: Buffer[] = [];
  connected = true;
  send(frame: Buffer): boolean {
    if (!this.connected) return false;
    this.frames.push(frame);
    return true;
  }
  whenWritable(cb: () => void): void {
    cb();
  }
  data(): Buffer[] {
    return this.frames.map((f) => decodeStreamData(f));
  }
}

const filled = (n: number, byte: number) => Buffer.alloc(n, byte);

describe("sendChunks", () => {
  it("joins chunks into frames of at most 256 KiB, in order, and splits a bigger one", () => {
    const sink = new Sink();
    const chunks = [
      ...Array.from({ length: 6 }, (_, i) => filled(64 * 1024, i)),
      filled(10, 6),
      filled(600 * 1024, 7),
      filled(3, 8),
    ];
    expect(sendChunks(sink, F, K, 5, chunks)).toBe(true);
    const sizes = sink.data().map((d) => d.length);
    expect(sizes).toEqual([256 * 1024, 128 * 1024 + 10, 256 * 1024, 256 * 1024, 88 * 1024, 3]);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(MAX_CHUNK_BYTES);
    expect(Buffer.concat(sink.data()).equals(Buffer.concat(chunks))).toBe(true);
    for (const f of sink.frames) expect([f[0], f[1], f.readUInt32BE(8)]).toEqual([F, K, 5]);
  });

  it("sends a lone chunk as it is and reports a disconnected sink", () => {
    const sink = new Sink();
    expect(sendChunks(sink, F, K, 1, [Buffer.from("hi")])).toBe(true);
    expect(sink.data().map(String)).toEqual(["hi"]);
    sink.connected = false;
    expect(sendChunks(sink, F, K, 1, [Buffer.from("more")])).toBe(false);
  });
});

describe("releaseWriter", () => {
  it("lets a small write go on at once and a full-size read after the I/O phase", async () => {
    const sink = new Sink();
    const order: string[] = [];
    releaseWriter(sink, 100, () => order.push("small"));
    releaseWriter(sink, 64 * 1024, () => order.push("full"));
    order.push("sync");
    expect(order).toEqual(["small", "sync"]);
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(["small", "sync", "full"]);
  });
});
