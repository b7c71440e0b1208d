// What a byte stream of the session (an outgoing TCP stream, an incoming connection) writes,
// as DATA frames: chunks written within one I/O phase leave together, in frames of up to
// 256 KiB, instead of one frame per chunk. A local socket read at full speed gives 64 KiB
// per read, several per phase; each frame costs every hop (routers, agent) a WebSocket
// message, so four times fewer frames is four times less of that work. A lone small write
// (an interactive exchange) leaves at once, as before.
import { encodeStreamData } from "../../../../proto/stream-data-frame.js";
import type { FrameSink } from "./frame-sink.js";

/** Largest data chunk per frame; bigger writes are split (the router's frame limit is 1 MiB). */
export const MAX_CHUNK_BYTES = 256 * 1024;

/**
 * What a stream's writer may queue before `write` says "full". The real limit is the
 * session's send buffer (FrameSink.whenWritable); with Node's 16 KiB default a piped
 * socket, which reads 64 KiB at a time, was paused and resumed after every chunk.
 */
export const STREAM_WRITE_HIGH_WATER_BYTES = 1024 * 1024;

/** A socket read this large filled its buffer: more is likely waiting in the same I/O phase. */
const FULL_READ_BYTES = 64 * 1024;

/**
 * Sends `chunks` (in order) as DATA frames of at most MAX_CHUNK_BYTES, small chunks joined;
 * false as soon as the sink is disconnected.
 */
export function sendChunks(
  sink: FrameSink,
  family: number,
  kind: number,
  id: number,
  chunks: Buffer[],
): boolean {
  let group: Buffer[] = [];
  let groupBytes = 0;
  const flush = (): boolean => {
    if (groupBytes === 0) return true;
    const data = group.length === 1 ? group[0]! : Buffer.concat(group, groupBytes);
    group = [];
    groupBytes = 0;
    return sink.send(encodeStreamData(family, kind, id, data));
  };
  for (const chunk of chunks) {
    if (groupBytes + chunk.length > MAX_CHUNK_BYTES && !flush()) return false;
    if (chunk.length <= MAX_CHUNK_BYTES) {
      group.push(chunk);
      groupBytes += chunk.length;
      continue;
    }
    for (let at = 0; at < chunk.length; at += MAX_CHUNK_BYTES)
      if (!sink.send(encodeStreamData(family, kind, id, chunk.subarray(at, at + MAX_CHUNK_BYTES))))
        return false;
  }
  return flush();
}

/**
 * Lets the writer go on (the stream's write callback) once the session's send buffer has
 * room; after a full-size chunk, not before the current I/O phase is over, so what the
 * writer writes meanwhile is handed over at once (`_writev`) and leaves in fewer frames.
 */
export function releaseWriter(sink: FrameSink, lastChunkBytes: number, cb: () => void): void {
  if (lastChunkBytes < FULL_READ_BYTES) return sink.whenWritable(cb);
  sink.whenWritable(() => setImmediate(cb));
}
