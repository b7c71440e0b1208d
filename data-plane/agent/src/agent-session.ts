// One session's protocol connection on the agent: the WebSocket the workload router
// opened for one session id. Validates every frame, negotiates the version (Hello must
// come first), answers control and ping itself and hands every other family to its
// handler: env and files (target/), DNS and outgoing TCP/UDP (outgoing/), subscriptions
// and connection-scoped traffic (incoming/). Bad frames are answered with a
// ProtocolError carrying a catalogue code and never affect another session.
// Everything the session owns — subscriptions, stolen connections, outgoing sockets,
// file handles — is released by `end()`: on Close, when the WebSocket closes, when the
// peer went silent (no frame within the ping timeout of reading it; `peerSilent`), or
// when the peer is too slow.
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import { PeerLiveness } from "../../../lib/peer-liveness.js";
import { ErrorCode, isErrorCode, webSocketErrorCode } from "../../../proto/error-codes.js";
import { errorFrame } from "../../../proto/error-frame.js";
import {
  checkFrame,
  decodePayload,
  encodeFrame,
  encodeRaw,
  FrameCheck,
  frameCheckError,
  HEADER_BYTES,
  KIND_TOWARD_CLIENT,
} from "../../../proto/frame-codec.js";
import { FrameError } from "../../../proto/frame-errors.js";
import {
  negotiateVersion,
  PROTOCOL_VERSION_MAX,
  PROTOCOL_VERSION_MIN,
} from "../../../proto/frame-version.js";
import * as pb from "../../../proto/gen/session_pb.js";
import type { AgentCounters } from "./agent-metrics.js";
import type { PortSubscriptions } from "./incoming/port-subscriptions.js";
import { SessionTraffic } from "./incoming/session-traffic.js";
import { SubscriptionRequests } from "./incoming/subscription-requests.js";
import { answerDns } from "./outgoing/dns-lookup.js";
import { OutgoingTcp, type OutgoingOptions } from "./outgoing/outgoing-tcp.js";
import { OutgoingUdp } from "./outgoing/outgoing-udp.js";
import { SessionFlow, type FlowLimits } from "./session-flow.js";
import type { SessionGrant } from "./session-secrets.js";
import { answerEnv } from "./target/env-request.js";
import { FileHandles } from "./target/file-handles.js";
import type { TargetView } from "./target/target-view.js";

const F = pb.FrameFamily;
const LOG_LEVELS = new Set(["trace", "debug", "info", "warn", "error", "fatal", "silent"]);
/** How long a closed session's WebSocket waits for the peer to close it, ms. */
const CLOSED_LINGER_MS = 30_000;

export interface AgentSessionOptions {
  sessionId: string;
  grant: SessionGrant;
  ws: WebSocket;
  socket: Socket;
  log: Logger;
  counters: AgentCounters;
  view: TargetView;
  subscriptions: PortSubscriptions;
  /** Ports subscriptions may name (the target's ports). */
  ports: ReadonlySet<number>;
  flow: FlowLimits;
  outgoing: OutgoingOptions;
  maxPayloadBytes: number;
  stolenRequestTimeoutMs: number;
  /** How long the peer may send nothing while the agent reads it, ms (the ping timeout). */
  pingTimeoutMs: number;
  /** Called once when the session ended (after its resources were released). */
  onEnd(session: AgentSession, reason: string): void;
}

/** The catalogue code of a failed handler's error; anything else is an internal failure. */
function wireCode(err: unknown): ErrorCode {
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" && isErrorCode(code) ? code : ErrorCode.AGENT_INTERNAL;
}

export class AgentSession {
  readonly id: string;
  readonly log: Logger;
  readonly flow: SessionFlow;
  readonly traffic: SessionTraffic;
  readonly tcp: OutgoingTcp;
  readonly udp: OutgoingUdp;
  readonly files: FileHandles;
  private readonly subscriptionRequests: SubscriptionRequests;
  /**
   * Every frame counts (the client pings through the router every 15 s; other frames are
   * its work); time the agent itself did not read the WebSocket does not.
   */
  readonly liveness: PeerLiveness;
  /** When the agent last pinged a peer it could not read, ms since the epoch. */
  private busyPingAt = 0;
  version = 0;
  private ended = false;
  /** Sends a frame toward the peer (handlers answer through this). */
  private readonly send = (frame: Buffer): void => void this.flow.send(frame);

  constructor(private readonly o: AgentSessionOptions) {
    this.id = o.sessionId;
    this.log = o.log.child({ session: o.sessionId });
    this.liveness = new PeerLiveness(o.pingTimeoutMs);
    this.flow = new SessionFlow(
      o.ws,
      o.socket,
      o.flow,
      () => {
        // Its queue cannot drain in time for a close handshake: drop the connection.
        o.counters.error(ErrorCode.SESSION_TOO_SLOW);
        this.end("too_slow", `the peer did not read ${o.flow.hardLimitBytes} queued bytes`);
        o.ws.terminate();
      },
      () => o.counters.backpressurePauses++,
      this.liveness,
    );
    this.traffic = new SessionTraffic(o.sessionId, this.flow, o.counters, {
      maxPayloadBytes: o.maxPayloadBytes,
      requestTimeoutMs: o.stolenRequestTimeoutMs,
    });
    this.tcp = new OutgoingTcp(this.flow, o.counters, o.outgoing);
    this.udp = new OutgoingUdp(this.flow, o.counters, o.outgoing);
    this.files = new FileHandles(o.view, { maxReadBytes: o.maxPayloadBytes - 64 });
    this.subscriptionRequests = new SubscriptionRequests({
      sessionId: o.sessionId,
      subscriptions: o.subscriptions,
      ports: o.ports,
      traffic: this.traffic,
      counters: o.counters,
      log: this.log,
    });
    o.ws.on("message", (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    o.ws.on("close", () => this.end("closed", "the WebSocket closed"));
    o.ws.on("error", (err) => {
      // ws closes the socket after a broken WebSocket frame (1002) or an over-long message (1009).
      const code = webSocketErrorCode(err);
      if (code) o.counters.error(code);
      this.log.debug({ err: err.message, code }, "session socket error");
    });
  }

  get isEnded(): boolean {
    return this.ended;
  }

  private error(code: ErrorCode, message: string, requestId = 0, family = 0, kind = 0): void {
    this.o.counters.error(code);
    this.log.debug({ code, family, kind }, message);
    this.flow.send(errorFrame(code, message, { requestId, family, kind }));
  }

  onMessage(data: Buffer, isBinary: boolean): void {
    this.liveness.heard();
    if (this.ended) {
      // Only a closed session still has its socket; a new session needs a new connection.
      const ws = this.o.ws;
      if (
        isBinary &&
        data.length >= 8 &&
        data[0] !== F.CONTROL &&
        data[0] !== F.TRAFFIC &&
        ws.readyState === ws.OPEN
      ) {
        this.o.counters.error(ErrorCode.SESSION_CLOSED);
        ws.send(
          errorFrame(ErrorCode.SESSION_CLOSED, "this session was closed; connect again to start a new one", {
            requestId: data.readUInt32BE(4),
            family: data[0]!,
            kind: data[1]!,
          }),
        );
      }
      return;
    }
    if (!isBinary)
      return this.error(
        ErrorCode.FRAME_NOT_BINARY,
        "text messages are not frames; send binary WebSocket messages",
      );
    const check = checkFrame(data, this.o.maxPayloadBytes);
    if (check !== FrameCheck.Ok) {
      const e = frameCheckError(check, data, this.o.maxPayloadBytes);
      return this.error(e.code, e.message, e.requestId, e.family, e.kind);
    }
    const family = data[0]!;
    const kind = data[1]!;
    const requestId = data.readUInt32BE(4);
    const connectionId = data.readUInt32BE(8);
    if (kind & KIND_TOWARD_CLIENT) {
      return this.error(
        ErrorCode.FRAME_WRONG_DIRECTION,
        `kind ${kind} of family ${family} travels toward the client, not to an agent`,
        requestId,
        family,
        kind,
      );
    }
    if (this.version === 0 && !(family === F.CONTROL && kind === pb.ControlKind.HELLO)) {
      return this.error(
        ErrorCode.HELLO_REQUIRED,
        "send Hello first: the agent serves no frame before version negotiation",
        requestId,
        family,
        kind,
      );
    }
    try {
      this.dispatch(data, family, kind, requestId, connectionId);
    } catch (err) {
      if (err instanceof FrameError) return this.error(err.code, err.message, requestId, family, kind);
      const e = err as Error;
      this.log.error({ err: e.message, family, kind }, "frame handler failed");
      this.error(wireCode(err), `the agent failed on this frame: ${e.message}`, requestId, family, kind);
    }
  }

  /** Answers a failed asynchronous handler like a failed synchronous one (never an unhandled rejection). */
  private async(p: Promise<void>, requestId: number, family: number, kind: number): void {
    p.catch((err: unknown) => {
      if (this.ended) return;
      const e = err as Error;
      if (!(err instanceof FrameError))
        this.log.error({ err: e.message, family, kind }, "frame handler failed");
      this.error(
        wireCode(err),
        err instanceof FrameError ? e.message : `the agent failed on this frame: ${e.message}`,
        requestId,
        family,
        kind,
      );
    });
  }

  private dispatch(
    data: Buffer,
    family: number,
    kind: number,
    requestId: number,
    connectionId: number,
  ): void {
    switch (family) {
      case F.CONTROL:
        return this.control(data, kind, requestId);
      case F.PING:
        // Pong echoes sent_at_micros, which has Ping's field number: reuse the payload bytes.
        this.flow.send(
          encodeRaw(
            { family: F.PING, kind: pb.PingKind.PONG, requestId, connectionId },
            data.subarray(HEADER_BYTES),
          ),
        );
        return;
      case F.ENV: {
        const get = decodePayload(data, pb.EnvGetSchema);
        const env = answerEnv({
          view: this.o.view,
          get,
          requestId,
          sessionBranch: this.o.grant.branch,
          countError: (code) => this.o.counters.error(code),
          send: this.send,
        });
        return this.async(env, requestId, family, kind);
      }
      case F.FILE:
        return this.async(this.files.answer(data, kind, requestId, this.send), requestId, family, kind);
      case F.DNS:
        return this.async(answerDns(data, kind, requestId, this.send), requestId, family, kind);
      case F.OUTGOING_TCP:
        if (kind === pb.OutgoingKind.DATA) return this.tcp.data(data, connectionId);
        if (kind === pb.OutgoingKind.CONNECT) {
          const c = decodePayload(data, pb.TcpConnectSchema);
          return this.tcp.connect(requestId, connectionId, c.host, c.port);
        }
        return this.tcp.close(connectionId, decodePayload(data, pb.StreamCloseSchema).error);
      case F.OUTGOING_UDP:
        if (kind === pb.OutgoingKind.DATA) return this.udp.data(data, connectionId);
        if (kind === pb.OutgoingKind.CONNECT) {
          const b = decodePayload(data, pb.UdpBindSchema);
          return this.udp.bind(requestId, connectionId, b.host, b.port);
        }
        return this.udp.close(connectionId);
      case F.SUBSCRIPTION:
        this.flow.send(this.subscriptionRequests.answer(data, kind, requestId, connectionId));
        return;
      case F.TRAFFIC:
        if (kind === pb.TrafficKind.DATA) return this.traffic.data(data, connectionId);
        if (kind === pb.TrafficKind.HTTP_RESPONSE)
          return this.traffic.httpResponse(data, connectionId, false);
        if (kind === pb.TrafficKind.HTTP_RESPONSE_END)
          return this.traffic.httpResponse(data, connectionId, true);
        return this.traffic.close(connectionId, decodePayload(data, pb.StreamCloseSchema).error);
    }
  }

  private control(data: Buffer, kind: number, requestId: number): void {
    switch (kind) {
      case pb.ControlKind.HELLO: {
        const hello = decodePayload(data, pb.HelloSchema);
        const v = negotiateVersion(
          { min: PROTOCOL_VERSION_MIN, max: PROTOCOL_VERSION_MAX },
          { min: hello.minVersion, max: hello.maxVersion },
        );
        if (v === undefined) {
          this.error(
            ErrorCode.PROTOCOL_VERSION_UNSUPPORTED,
            `the agent speaks protocol versions ${PROTOCOL_VERSION_MIN}-${PROTOCOL_VERSION_MAX}, the peer ${hello.minVersion}-${hello.maxVersion}; upgrade the older side`,
            requestId,
            pb.FrameFamily.CONTROL,
            kind,
          );
          this.o.ws.close(4400, "no common protocol version");
          return;
        }
        this.version = v;
        this.log.info({ peer: hello.peer.slice(0, 64), version: v }, "session hello");
        this.flow.send(
          encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.HELLO_ACK, requestId }, pb.HelloAckSchema, {
            version: v,
            peer: "switchyard-agent",
          }),
        );
        return;
      }
      case pb.ControlKind.CLOSE: {
        const reason = decodePayload(data, pb.CloseSchema).reason.slice(0, 200);
        // Released now, but the WebSocket is left for the peer to close: an agent-side
        // close would make a router reconnect and replay the session's subscriptions.
        this.end("client_close", reason || "the client closed the session");
        setTimeout(() => {
          if (this.o.ws.readyState === this.o.ws.OPEN) this.o.ws.close(1000, "session closed");
        }, CLOSED_LINGER_MS).unref();
        return;
      }
      case pb.ControlKind.LOG_LEVEL: {
        const level = decodePayload(data, pb.LogLevelSchema).level;
        if (!LOG_LEVELS.has(level))
          return this.error(
            ErrorCode.FRAME_BAD_PAYLOAD,
            `log level ${JSON.stringify(level.slice(0, 20))} is not one of trace, debug, info, warn, error`,
            requestId,
            F.CONTROL,
            pb.ControlKind.LOG_LEVEL,
          );
        this.log.level = level;
        return;
      }
    }
  }

  /**
   * The agent's sweep: true once the peer has been silent too long (PeerLiveness: while
   * the agent does not read it, up to a ceiling). Meanwhile a session whose reading is
   * paused pings its peer every quarter of the ping timeout: the router's pings wait unread
   * behind the paused data, and this tells it the agent is busy, not dead. Not more often:
   * the peer cannot send its pongs either, and ws drops a peer with 60 pongs pending, which
   * must take longer than the ceiling.
   */
  peerSilent(now: number): boolean {
    const ws = this.o.ws;
    if (
      this.flow.readingBlocked &&
      now - this.busyPingAt >= this.o.pingTimeoutMs / 4 &&
      ws.readyState === ws.OPEN
    ) {
      this.busyPingAt = now;
      ws.ping();
    }
    return this.liveness.expired(now);
  }

  /** Ends the session once: releases everything it owns and closes its WebSocket. */
  end(reason: string, message: string, wsCode?: number): void {
    if (this.ended) return;
    this.ended = true;
    this.traffic.closeAll();
    this.tcp.closeAll();
    this.udp.closeAll();
    this.files.clear();
    this.flow.close();
    const ws = this.o.ws;
    if (wsCode !== undefined && ws.readyState === ws.OPEN) {
      if (wsCode !== 1000) {
        ws.send(
          encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.CLOSE }, pb.CloseSchema, { reason: message }),
        );
      }
      ws.close(wsCode, message.slice(0, 120));
      // A peer that never answers the close handshake.
      setTimeout(() => ws.terminate(), 2000).unref();
    }
    this.log.info({ reason }, `session ended: ${message}`);
    this.o.onEnd(this, reason);
  }
}
