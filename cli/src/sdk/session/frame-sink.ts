// The narrow seam between per-connection streams and the session's WebSocket: streams
// hand finished frames to a sink and learn when to slow down, without knowing about
// reconnects or the socket itself. Tests implement it with an in-memory fake.

export interface FrameSink {
  /** Sends one frame; false when the session is not connected (the frame is dropped). */
  send(frame: Buffer): boolean;
  /** Calls `cb` once the connection's send buffer is below its high-water mark. */
  whenWritable(cb: () => void): void;
}
