// The outgoing UDP family for one session. CONNECT (UdpBind) opens a datagram socket
// bound to the agent's outbound address (ephemeral port); UdpBind's host/port, when set,
// are the default destination for datagrams that name none. DATA frames carry one
// datagram each way (the agent fills in the sender's address on received datagrams).
// UDP is lossy by nature: when the session's WebSocket is congested, received datagrams
// are dropped (counted) rather than queued.
import { createSocket, type Socket } from "node:dgram";
import { isIPv6 } from "node:net";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { decodePayload, encodeFrame } from "../../../../proto/frame-codec.js";
import {
  FrameFamily,
  OutgoingKind,
  StreamCloseSchema,
  UdpDatagramSchema,
} from "../../../../proto/gen/session_pb.js";
import type { AgentCounters } from "../agent-metrics.js";
import { connectResultFrame, type ConnectResultInit } from "./connect-result.js";
import type { OutgoingOptions } from "./outgoing-tcp.js";
import type { SessionFlow } from "../session-flow.js";

const F = FrameFamily.OUTGOING_UDP;

interface UdpStream {
  socket: Socket;
  host: string;
  port: number;
  open: boolean;
}

export class OutgoingUdp {
  private readonly streams = new Map<number, UdpStream>();
  /** Received datagrams dropped because the session was congested. */
  dropped = 0;
  private readonly maxStreams: number;

  constructor(
    private readonly flow: SessionFlow,
    private readonly counters: AgentCounters,
    private readonly opts: OutgoingOptions = {},
  ) {
    this.maxStreams = opts.maxStreams ?? 1024;
  }

  get size(): number {
    return this.streams.size;
  }

  private result(requestId: number, id: number, init: ConnectResultInit): void {
    this.flow.send(connectResultFrame(F, requestId, id, init));
  }

  bind(requestId: number, id: number, host: string, port: number): void {
    if (this.streams.has(id))
      return this.result(requestId, id, {
        error: `${ErrorCode.CONNECTION_ID_IN_USE}: UDP socket ${id} is already open; use a new id`,
      });
    if (this.streams.size >= this.maxStreams)
      return this.result(requestId, id, {
        error: `${ErrorCode.TOO_MANY_CONNECTIONS}: a session may hold ${this.maxStreams} UDP sockets`,
      });
    const bind = this.opts.bindAddress;
    const v6 = bind ? isIPv6(bind) : isIPv6(host);
    const socket = createSocket(v6 ? "udp6" : "udp4");
    const s: UdpStream = { socket, host, port, open: false };
    this.streams.set(id, s);
    socket.on("error", (err: Error & { code?: string }) => {
      const text = err.code ? `${err.code}: ${err.message}` : err.message;
      if (!s.open) this.result(requestId, id, { error: text });
      else
        this.flow.send(
          encodeFrame({ family: F, kind: OutgoingKind.CLOSE, connectionId: id }, StreamCloseSchema, {
            error: text,
          }),
        );
      this.drop(id, s);
    });
    socket.on("message", (msg, rinfo) => {
      if (this.flow.congested) {
        this.dropped++;
        return;
      }
      this.counters.bytesToClient.outgoing_udp += msg.length;
      this.flow.send(
        encodeFrame({ family: F, kind: OutgoingKind.DATA, connectionId: id }, UdpDatagramSchema, {
          data: msg,
          address: rinfo.address,
          port: rinfo.port,
        }),
      );
    });
    socket.bind({ port: 0, ...(bind ? { address: bind } : {}) }, () => {
      s.open = true;
      const a = socket.address();
      this.result(requestId, id, { localAddress: a.address, localPort: a.port });
    });
  }

  /** A DATA frame (one datagram) from the client. */
  data(frame: Buffer, id: number): void {
    const s = this.streams.get(id);
    if (!s || !s.open) {
      this.counters.error(ErrorCode.UNKNOWN_CONNECTION);
      this.flow.send(
        encodeFrame({ family: F, kind: OutgoingKind.CLOSE, connectionId: id }, StreamCloseSchema, {
          error: `${ErrorCode.UNKNOWN_CONNECTION}: UDP socket ${id} is not open`,
        }),
      );
      return;
    }
    const d = decodePayload(frame, UdpDatagramSchema);
    const host = d.address || s.host;
    const port = d.port || s.port;
    if (!host || !port) {
      this.flow.send(
        encodeFrame({ family: F, kind: OutgoingKind.CLOSE, connectionId: id }, StreamCloseSchema, {
          error:
            "EDESTADDRREQ: the datagram names no address and the socket was bound without a default destination",
        }),
      );
      return;
    }
    this.counters.bytesFromClient.outgoing_udp += d.data.length;
    s.socket.send(d.data, port, host);
  }

  close(id: number): void {
    const s = this.streams.get(id);
    if (s) this.drop(id, s);
  }

  private drop(id: number, s: UdpStream): void {
    if (this.streams.get(id) !== s) return;
    this.streams.delete(id);
    try {
      s.socket.close();
    } catch {
      // already closed
    }
  }

  closeAll(): void {
    for (const [id, s] of [...this.streams]) this.drop(id, s);
  }
}
