// Every stream of one session by id, and the frames that feed them: outgoing TCP streams
// and UDP channels (ids the client chooses) get their DATA and CLOSE; incoming traffic
// (ids the router assigns) becomes IncomingConnections and IncomingHttpRequests. A steal
// with an HTTP filter announces a connection whose first frame decides what it is: an
// HTTP_REQUEST (a filtered request: its streamed body's DATA and HTTP_REQUEST_END follow,
// the agent's CLOSE ends it), or DATA (an upgrade or other raw bytes, handed over as a
// connection). When the router connection drops, every stream fails with it.
import * as pb from "../../../../proto/gen/session_pb.js";
import { decodePayload } from "../../../../proto/frame-codec.js";
import { decodeStreamData } from "../../../../proto/stream-data-frame.js";
import type { FrameSink, InboundHold } from "./frame-sink.js";
import { IncomingConnection, type IncomingConnectionInfo } from "./incoming-traffic.js";
import { IncomingHttpRequest, StolenRequestBody } from "./stolen-http-request.js";
import { OutgoingTcpStream } from "./outgoing-tcp-stream.js";
import { UdpChannel } from "./udp-channel.js";

const LAST_STREAM_ID = 0x7fffffff;

/** Where incoming traffic goes. */
export interface IncomingHandlers {
  /** True when the subscription steals through an HTTP filter. */
  isFiltered(subscriptionId: number): boolean;
  /** Hands a connection to the program; false when nobody takes it (it is then refused). */
  connection(c: IncomingConnection): boolean;
  /** Hands a stolen request to the program; false when nobody takes it (it is answered 502). */
  httpRequest(r: IncomingHttpRequest): boolean;
}

export class SessionStreams {
  readonly #tcp = new Map<number, OutgoingTcpStream>();
  readonly #udp = new Map<number, UdpChannel>();
  readonly #incoming = new Map<number, IncomingConnection>();
  /** Connections of filtered steals: an HTTP request or (for upgrades) raw bytes follow. */
  readonly #undecided = new Map<number, IncomingConnectionInfo>();
  /** Stolen HTTP requests until the agent's CLOSE. */
  readonly #http = new Map<number, IncomingHttpRequest>();
  #nextStreamId = 1;

  constructor(
    private readonly sink: FrameSink & InboundHold,
    private readonly on: IncomingHandlers,
  ) {}

  /** A new outgoing TCP stream under a free id (its CONNECT is the caller's to send). */
  openTcp(): OutgoingTcpStream {
    const id = this.#newStreamId();
    const stream = new OutgoingTcpStream(id, this.sink, (gone) => this.#tcp.delete(gone));
    this.#tcp.set(id, stream);
    return stream;
  }

  /** A new UDP channel under a free id (its CONNECT is the caller's to send). */
  openUdp(): UdpChannel {
    const id = this.#newStreamId();
    const ch = new UdpChannel(id, this.sink, (gone) => this.#udp.delete(gone));
    this.#udp.set(id, ch);
    return ch;
  }

  /** Drops a stream whose CONNECT failed. */
  abandon(stream: OutgoingTcpStream | UdpChannel): void {
    if (stream instanceof OutgoingTcpStream) this.#tcp.delete(stream.id);
    else this.#udp.delete(stream.id);
    stream.remoteClose("");
  }

  /** DATA or CLOSE of an outgoing TCP stream or UDP channel. */
  outgoing(data: Buffer, family: number, kind: number, id: number): void {
    if (family === pb.FrameFamily.OUTGOING_TCP) {
      const s = this.#tcp.get(id);
      if (!s) return;
      if (kind === pb.OutgoingKind.DATA) s.remoteData(decodeStreamData(data));
      else if (kind === pb.OutgoingKind.CLOSE) {
        this.#tcp.delete(id);
        s.remoteClose(decodePayload(data, pb.StreamCloseSchema).error);
      }
      return;
    }
    const u = this.#udp.get(id);
    if (!u) return;
    if (kind === pb.OutgoingKind.DATA) u.remoteDatagram(decodePayload(data, pb.UdpDatagramSchema));
    else if (kind === pb.OutgoingKind.CLOSE) {
      this.#udp.delete(id);
      u.remoteClose(decodePayload(data, pb.StreamCloseSchema).error);
    }
  }

  /** A TRAFFIC frame: a new incoming connection, a stolen HTTP request, DATA or CLOSE. */
  traffic(data: Buffer, kind: number, requestId: number, id: number): void {
    switch (kind) {
      case pb.TrafficKind.NEW_CONNECTION: {
        const n = decodePayload(data, pb.NewConnectionSchema);
        const info: IncomingConnectionInfo = {
          id,
          subscriptionId: n.subscriptionId,
          port: n.port,
          remoteAddress: n.remoteAddress,
          remotePort: n.remotePort,
          mode: n.mode === pb.TrafficMode.MIRROR ? "mirror" : "steal",
        };
        if (info.mode === "steal" && this.on.isFiltered(n.subscriptionId)) this.#undecided.set(id, info);
        else this.#openIncoming(info);
        return;
      }
      case pb.TrafficKind.HTTP_REQUEST: {
        const info = this.#undecided.get(id);
        this.#undecided.delete(id);
        const r = decodePayload(data, pb.HttpRequestSchema);
        const req = new IncomingHttpRequest(
          id,
          requestId,
          info,
          r.method,
          r.path,
          r.headers.map((x) => ({ name: x.name, value: x.value })),
          r.bodyStreamed ? new StolenRequestBody(this.sink) : Buffer.from(r.body),
          this.sink,
        );
        this.#http.set(id, req);
        if (!this.on.httpRequest(req))
          req.respond({ status: 502, body: Buffer.from("no local handler for stolen HTTP requests\n") });
        return;
      }
      case pb.TrafficKind.HTTP_REQUEST_END:
        this.#http.get(id)?.remoteEnd();
        return;
      case pb.TrafficKind.DATA: {
        const req = this.#http.get(id);
        if (req) return req.remoteData(decodeStreamData(data));
        const undecided = this.#undecided.get(id);
        if (undecided) {
          this.#undecided.delete(id);
          this.#openIncoming(undecided);
        }
        this.#incoming.get(id)?.remoteData(decodeStreamData(data));
        return;
      }
      case pb.TrafficKind.CLOSE: {
        this.#undecided.delete(id);
        const req = this.#http.get(id);
        if (req) {
          this.#http.delete(id);
          return req.remoteClose(decodePayload(data, pb.StreamCloseSchema).error);
        }
        this.#incoming.get(id)?.remoteClose();
        this.#incoming.delete(id);
        return;
      }
    }
  }

  /**
   * Fails every stream: their far ends were tied to a router connection that is gone. When
   * the owner closed the session itself (`closedByOwner`), outgoing TCP streams are destroyed
   * without an error, as `Http2Session.destroy()` does: they emit 'close', not an 'error' that
   * would crash a program that closed its session with a stream still open.
   */
  failAll(err: Error, closedByOwner = false): void {
    for (const s of [...this.#tcp.values()]) s.destroy(closedByOwner ? undefined : err);
    for (const u of [...this.#udp.values()]) u.remoteClose(err.message);
    for (const c of [...this.#incoming.values()]) c.destroy();
    for (const r of [...this.#http.values()]) r.remoteClose(err.message);
    this.#incoming.clear();
    this.#http.clear();
    this.#undecided.clear();
  }

  #openIncoming(info: IncomingConnectionInfo): void {
    const c = new IncomingConnection(info, this.sink, (gone) => this.#incoming.delete(gone));
    this.#incoming.set(info.id, c);
    if (!this.on.connection(c)) c.destroy();
  }

  #newStreamId(): number {
    for (;;) {
      const id = this.#nextStreamId;
      this.#nextStreamId = this.#nextStreamId >= LAST_STREAM_ID ? 1 : this.#nextStreamId + 1;
      if (!this.#tcp.has(id) && !this.#udp.has(id)) return id;
    }
  }
}
