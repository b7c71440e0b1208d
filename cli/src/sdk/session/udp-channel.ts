// One outgoing UDP socket bound on the Default cluster: `send` datagrams (to the bound
// peer, or another address), `message` events for datagrams the agent received.
import { EventEmitter } from "node:events";
import * as pb from "../../../../proto/gen/session_pb.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import type { FrameSink } from "./frame-sink.js";

const F = pb.FrameFamily.OUTGOING_UDP;

export interface UdpChannelEvents {
  message: [{ data: Buffer; address: string; port: number }];
  close: [string];
}

export class UdpChannel extends EventEmitter<UdpChannelEvents> {
  #closed = false;

  constructor(
    readonly id: number,
    private readonly sink: FrameSink,
    private readonly onGone: (id: number) => void,
  ) {
    super();
  }

  /** Sends one datagram; address/port default to the peer given at bind time. */
  send(data: Uint8Array, address = "", port = 0): boolean {
    if (this.#closed) return false;
    return this.sink.send(
      encodeFrame({ family: F, kind: pb.OutgoingKind.DATA, connectionId: this.id }, pb.UdpDatagramSchema, {
        data,
        address,
        port,
      }),
    );
  }

  close(): void {
    if (this.#closed) return;
    this.sink.send(
      encodeFrame(
        { family: F, kind: pb.OutgoingKind.CLOSE, connectionId: this.id },
        pb.StreamCloseSchema,
        {},
      ),
    );
    this.remoteClose("");
  }

  remoteDatagram(d: pb.UdpDatagram): void {
    if (!this.#closed) this.emit("message", { data: Buffer.from(d.data), address: d.address, port: d.port });
  }

  remoteClose(error: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.onGone(this.id);
    this.emit("close", error);
  }
}
