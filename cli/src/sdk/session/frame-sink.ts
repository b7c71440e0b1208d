// The narrow seams between per-connection streams and the session's WebSocket: streams
// hand finished frames to a sink and learn when to slow down, and a stream whose reader is
// full holds the reading of frames, without knowing about reconnects or the socket itself.
// Tests implement them with in-memory fakes.

export interface FrameSink {
  /** Sends one frame; false when the session is not connected (the frame is dropped). */
  send(frame: Buffer): boolean;
  /** Calls `cb` once the connection's send buffer is below its high-water mark. */
  whenWritable(cb: () => void): void;
}

export interface InboundHold {
  /**
   * Stops reading frames from the router until `until` calls its release (a local reader
   * is full). The protocol has no per-stream windows, so this holds every stream of the
   * session for that time: bounded memory over fairness. A dropped connection releases it.
   */
  holdInbound(until: (release: () => void) => void): void;
}
