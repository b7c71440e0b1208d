// The outgoing TCP family for one session: connections opened from the agent's network
// position (bound to `bindAddress` when given, so servers see where traffic leaves),
// streamed both ways with backpressure through SessionFlow. Ids are chosen by the client
// (header connection id). CLOSE is a half-close: the client's CLOSE ends our write side,
// the remote's FIN becomes our CLOSE; the stream is forgotten when the socket closes.
// A CLOSE with an error text aborts the connection.
import { connect, isIPv4, isIPv6, type Socket, type TcpNetConnectOpts } from "node:net";
import { OptionError } from "../../../../lib/option-error.js";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import { FrameFamily, OutgoingKind, StreamCloseSchema } from "../../../../proto/gen/session_pb.js";
import type { AgentCounters } from "../agent-metrics.js";
import { connectResultFrame, type ConnectResultInit } from "./connect-result.js";
import type { SessionFlow } from "../session-flow.js";
import { decodeStreamData, encodeStreamData } from "../../../../proto/stream-data-frame.js";

const F = FrameFamily.OUTGOING_TCP;

export interface OutgoingOptions {
  /** Local address outgoing sockets bind to (`--outbound-bind`); default: the OS picks. */
  bindAddress?: string;
  /** Connect timeout, milliseconds (default 10 000). */
  connectTimeoutMs?: number;
  /** Streams per session (default 1024). */
  maxStreams?: number;
  /** Largest data chunk per frame, bytes (default 256 KiB). */
  maxChunkBytes?: number;
}

interface TcpStream {
  socket: Socket;
  connected: boolean;
  closeSent: boolean;
}

/**
 * Bytes an outgoing socket may queue before `write` says "full" and the session stops
 * reading its WebSocket. Above the largest frame (256 KiB): with Node's 16 KiB default every
 * bulk frame reported "full" even when the kernel took it at once, so reading stopped and
 * started again once per frame.
 */
export const OUTGOING_WRITE_HIGH_WATER_BYTES = 1024 * 1024;

const describe = (err: Error & { code?: string }) => (err.code ? `${err.code}: ${err.message}` : err.message);

export class OutgoingTcp {
  private readonly streams = new Map<number, TcpStream>();
  private readonly connectTimeoutMs: number;
  private readonly maxStreams: number;
  private readonly maxChunk: number;

  constructor(
    private readonly flow: SessionFlow,
    private readonly counters: AgentCounters,
    private readonly opts: OutgoingOptions = {},
  ) {
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    this.maxStreams = opts.maxStreams ?? 1024;
    this.maxChunk = opts.maxChunkBytes ?? 256 * 1024;
    if (opts.bindAddress && !isIPv4(opts.bindAddress) && !isIPv6(opts.bindAddress))
      throw new OptionError("bindAddress", `must be an IP address, got ${JSON.stringify(opts.bindAddress)}`);
  }

  /** Largest write queue seen on one outgoing socket, bytes (the backpressure measurement). */
  maxWriteQueueBytes = 0;

  get size(): number {
    return this.streams.size;
  }

  private result(requestId: number, id: number, init: ConnectResultInit): void {
    this.flow.send(connectResultFrame(F, requestId, id, init));
  }

  private sendClose(id: number, s: TcpStream, error = ""): void {
    if (s.closeSent) return;
    s.closeSent = true;
    this.flow.send(
      encodeFrame({ family: F, kind: OutgoingKind.CLOSE, connectionId: id }, StreamCloseSchema, { error }),
    );
  }

  connect(requestId: number, id: number, host: string, port: number): void {
    if (this.streams.has(id))
      return this.result(requestId, id, {
        error: `${ErrorCode.CONNECTION_ID_IN_USE}: outgoing connection ${id} is already open; use a new id`,
      });
    if (this.streams.size >= this.maxStreams)
      return this.result(requestId, id, {
        error: `${ErrorCode.TOO_MANY_CONNECTIONS}: a session may hold ${this.maxStreams} outgoing TCP connections`,
      });
    if (!host || !Number.isInteger(port) || port < 1 || port > 65535)
      return this.result(requestId, id, {
        error: `EINVAL: cannot connect to ${JSON.stringify(host)} port ${port}`,
      });
    const bind = this.opts.bindAddress;
    const to: TcpNetConnectOpts = {
      host,
      port,
      allowHalfOpen: true,
      noDelay: true,
      ...(bind ? { localAddress: bind, family: isIPv4(bind) ? 4 : 6 } : {}),
    };
    // Node takes the stream option at run time; its types leave it out.
    const socket = connect(Object.assign(to, { writableHighWaterMark: OUTGOING_WRITE_HIGH_WATER_BYTES }));
    const s: TcpStream = { socket, connected: false, closeSent: false };
    this.streams.set(id, s);
    socket.setTimeout(this.connectTimeoutMs, () => {
      if (!s.connected)
        socket.destroy(
          Object.assign(new Error(`connect to ${host}:${port} timed out after ${this.connectTimeoutMs} ms`), {
            code: "ETIMEDOUT",
          }),
        );
    });
    socket.once("connect", () => {
      s.connected = true;
      socket.setTimeout(0);
      this.result(requestId, id, {
        localAddress: socket.localAddress ?? "",
        localPort: socket.localPort ?? 0,
      });
    });
    socket.on("data", (chunk: Buffer) => {
      for (let at = 0; at < chunk.length; at += this.maxChunk) {
        const part = chunk.length <= this.maxChunk ? chunk : chunk.subarray(at, at + this.maxChunk);
        this.counters.bytesToClient.outgoing_tcp += part.length;
        if (!this.flow.send(encodeStreamData(F, OutgoingKind.DATA, id, part))) this.flow.pauseSource(socket);
      }
    });
    socket.on("end", () => this.sendClose(id, s));
    socket.on("error", (err: Error & { code?: string }) => {
      if (!s.connected) {
        s.closeSent = true; // the connect result carries the error
        this.result(requestId, id, { error: describe(err) });
      } else this.sendClose(id, s, describe(err));
    });
    socket.on("close", () => {
      this.sendClose(id, s);
      this.flow.forget(socket);
      if (this.streams.get(id) === s) this.streams.delete(id);
    });
  }

  /** A DATA frame from the client. */
  data(frame: Buffer, id: number): void {
    const s = this.streams.get(id);
    if (!s) {
      this.counters.error(ErrorCode.UNKNOWN_CONNECTION);
      this.flow.send(
        encodeFrame({ family: F, kind: OutgoingKind.CLOSE, connectionId: id }, StreamCloseSchema, {
          error: `${ErrorCode.UNKNOWN_CONNECTION}: outgoing connection ${id} is not open`,
        }),
      );
      return;
    }
    const data = decodeStreamData(frame);
    this.counters.bytesFromClient.outgoing_tcp += data.length;
    // A view of the received frame: ws never reuses a delivered Buffer, so it may sit in the socket's queue.
    const ok = s.socket.write(data);
    if (s.socket.writableLength > this.maxWriteQueueBytes) this.maxWriteQueueBytes = s.socket.writableLength;
    if (!ok) {
      const socket = s.socket;
      this.flow.blockUntil((release) => {
        socket.once("drain", release);
        socket.once("close", release);
      });
    }
  }

  /** A CLOSE frame from the client. */
  close(id: number, error: string): void {
    const s = this.streams.get(id);
    if (!s) return;
    if (error) {
      s.closeSent = true;
      s.socket.destroy();
    } else s.socket.end();
  }

  closeAll(): void {
    for (const s of this.streams.values()) {
      s.closeSent = true;
      s.socket.destroy();
    }
    this.streams.clear();
  }
}
