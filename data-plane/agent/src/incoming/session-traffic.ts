// Incoming traffic for one session: the TrafficSession the port proxies hand mirrored
// and stolen connections to, spoken as TRAFFIC frames.
// - Raw connections (mirror, unfiltered steal, stolen upgrades): NEW_CONNECTION with a
//   fresh agent connection id, then DATA both ways; CLOSE ends the whole connection
//   (routers forget the id on the first CLOSE either way).
// - Stolen HTTP requests (filtered steals): each request gets its own connection id:
//   NEW_CONNECTION, then the exchange of stolen-http-exchange.ts (head and body each way,
//   bodies whole when small, else streamed), ended by the agent's CLOSE.
// Mirrors never slow the app: once a mirror's peer is congested the mirror copy is cut
// (CLOSE with an error) and the rest of that connection's bytes are counted as dropped.
import { ErrorCode } from "../../../../proto/error-codes.js";
import { encodeFrame } from "../../../../proto/frame-codec.js";
import {
  FrameFamily,
  NewConnectionSchema,
  StreamCloseSchema,
  TrafficKind,
  TrafficMode,
} from "../../../../proto/gen/session_pb.js";
import type { AgentCounters } from "../agent-metrics.js";
import type {
  ConnectionControl,
  ConnectionSink,
  IncomingConnectionInfo,
  StolenHttpRequest,
  TrafficSession,
} from "./session-handoff.js";
import type { SessionFlow } from "../session-flow.js";
import { decodeStreamData, encodeStreamData } from "../../../../proto/stream-data-frame.js";
import type { StolenCaller } from "./stolen-caller.js";
import { fitsFrame, StolenHttpExchange, type ExchangeContext } from "./stolen-http-exchange.js";

const F = FrameFamily.TRAFFIC;

export interface SessionTrafficOptions {
  /** How long a stolen HTTP request waits for the session's answer, ms (default 60 000). */
  requestTimeoutMs?: number;
  /** Largest frame payload the peer accepts, bytes. */
  maxPayloadBytes: number;
  /** Largest data chunk per frame, bytes (default 256 KiB). */
  maxChunkBytes?: number;
  /** Open incoming connections per session (default 4096). */
  maxConnections?: number;
}

interface RawConn {
  kind: "raw";
  mode: "mirror" | "steal";
  control: ConnectionControl;
  /** Mirror copy cut because the peer fell behind. */
  cut: boolean;
}

export class SessionTraffic implements TrafficSession {
  private readonly conns = new Map<number, RawConn | StolenHttpExchange>();
  /** The client's subscription id per port, reported in NEW_CONNECTION. */
  readonly subscriptionIds = new Map<number, number>();
  private nextId = 1;
  private closed = false;
  private readonly timeoutMs: number;
  private readonly maxChunk: number;
  private readonly maxConns: number;
  private readonly exchange: ExchangeContext;

  constructor(
    readonly id: string,
    private readonly flow: SessionFlow,
    private readonly counters: AgentCounters,
    private readonly opts: SessionTrafficOptions,
  ) {
    this.timeoutMs = opts.requestTimeoutMs ?? 60_000;
    this.maxChunk = Math.min(opts.maxChunkBytes ?? 256 * 1024, opts.maxPayloadBytes - 16);
    this.maxConns = opts.maxConnections ?? 4096;
    this.exchange = {
      flow,
      counters,
      maxChunkBytes: this.maxChunk,
      timeoutMs: this.timeoutMs,
      release: (id) => this.conns.delete(id),
    };
  }

  /** Open connections by mode, for metrics. */
  counts(): { steal: number; mirror: number } {
    let steal = 0;
    let mirror = 0;
    for (const c of this.conns.values()) {
      if (c.kind === "http" || c.mode === "steal") steal++;
      else mirror++;
    }
    return { steal, mirror };
  }

  private allocId(): number {
    for (;;) {
      const id = this.nextId;
      this.nextId = (this.nextId + 1) >>> 0 || 1;
      if (!this.conns.has(id)) return id;
    }
  }

  private announce(
    id: number,
    port: number,
    remoteAddress: string,
    remotePort: number,
    mode: TrafficMode,
  ): void {
    this.flow.send(
      encodeFrame({ family: F, kind: TrafficKind.NEW_CONNECTION, connectionId: id }, NewConnectionSchema, {
        subscriptionId: this.subscriptionIds.get(port) ?? 0,
        port,
        remoteAddress,
        remotePort,
        mode,
      }),
    );
  }

  private sendClose(id: number, error = ""): void {
    this.flow.send(
      encodeFrame({ family: F, kind: TrafficKind.CLOSE, connectionId: id }, StreamCloseSchema, { error }),
    );
  }

  connection(info: IncomingConnectionInfo, control: ConnectionControl): ConnectionSink {
    if (this.closed || this.conns.size >= this.maxConns) {
      // The session is gone or full: a steal is refused (the client sees a closed
      // connection), a mirror simply gets no copy.
      if (info.mode === "steal") control.end();
      this.counters.error(ErrorCode.TOO_MANY_CONNECTIONS);
      return { data: () => false, end: () => {} };
    }
    const id = this.allocId();
    const conn: RawConn = { kind: "raw", mode: info.mode, control, cut: false };
    this.conns.set(id, conn);
    this.announce(
      id,
      info.port,
      info.remoteAddress,
      info.remotePort,
      info.mode === "mirror" ? TrafficMode.MIRROR : TrafficMode.STEAL,
    );
    return {
      data: (chunk) => {
        // After the session ended, mirrored bytes are not "dropped for slowness".
        if (this.conns.get(id) !== conn) return conn.mode === "mirror" ? !conn.cut : false;
        if (conn.mode === "mirror" && this.flow.congested) {
          conn.cut = true;
          this.conns.delete(id);
          this.sendClose(id, "mirror copy cut: the session could not keep up with the connection");
          return false;
        }
        let ok = true;
        for (let at = 0; at < chunk.length; at += this.maxChunk) {
          const part = chunk.length <= this.maxChunk ? chunk : chunk.subarray(at, at + this.maxChunk);
          this.counters.bytesToClient.traffic += part.length;
          ok = this.flow.send(encodeStreamData(F, TrafficKind.DATA, id, part), conn.mode === "mirror") && ok;
        }
        if (!ok && conn.mode === "steal") this.flow.pauseSource(control);
        return ok || conn.mode === "mirror";
      },
      end: () => {
        if (this.conns.get(id) !== conn) return;
        this.conns.delete(id);
        this.flow.forget(control);
        this.sendClose(id);
      },
    };
  }

  request(req: StolenHttpRequest, caller: StolenCaller): void {
    if (this.closed) return caller.fail("the session ended");
    if (this.conns.size >= this.maxConns) {
      this.counters.error(ErrorCode.TOO_MANY_CONNECTIONS);
      return caller.fail("the session has too many open requests");
    }
    const id = this.allocId();
    const exchange = new StolenHttpExchange(id, caller, this.exchange);
    const frame = exchange.requestFrame(req.head);
    if (!fitsFrame(frame, this.opts.maxPayloadBytes))
      return caller.fail(`the request head is ${frame.length} bytes, more than one frame`);
    this.conns.set(id, exchange);
    this.announce(id, req.port, req.remoteAddress, 0, TrafficMode.STEAL);
    exchange.start(frame);
  }

  /** DATA from the client: bytes for a stolen connection's client. */
  data(frame: Buffer, id: number): void {
    const c = this.conns.get(id);
    if (!c) return this.counters.error(ErrorCode.UNKNOWN_CONNECTION);
    if (c.kind === "http") return c.data(frame);
    if (c.mode === "mirror") return; // the app answers mirrored connections
    const data = decodeStreamData(frame);
    this.counters.bytesFromClient.traffic += data.length;
    if (!c.control.write(data)) this.flow.blockUntil((release) => c.control.drained(release));
  }

  /** CLOSE from the client. */
  close(id: number, error: string): void {
    const c = this.conns.get(id);
    if (!c) return;
    if (c.kind === "http") return c.closed(error);
    this.conns.delete(id);
    if (c.mode === "steal") {
      this.flow.forget(c.control);
      c.control.end();
    }
  }

  /** HTTP_RESPONSE or HTTP_RESPONSE_END from the client for a stolen request. */
  httpResponse(frame: Buffer, id: number, end: boolean): void {
    const c = this.conns.get(id);
    if (!c || c.kind !== "http") return this.counters.error(ErrorCode.UNKNOWN_CONNECTION);
    if (end) c.responseEnd();
    else c.response(frame);
  }

  /** Expires stolen requests past their deadline (the agent's coarse sweep). */
  sweep(now: number): void {
    for (const c of [...this.conns.values()]) if (c.kind === "http") c.expire(now);
  }

  /** The session ended: stolen connections are closed, pending requests fail. */
  closeAll(): void {
    this.closed = true;
    const all = [...this.conns.values()];
    this.conns.clear();
    for (const c of all) {
      if (c.kind === "http") c.sessionEnded();
      else if (c.mode === "steal") c.control.end();
    }
  }
}
