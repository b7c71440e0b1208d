// One session's protocol connection on the agent: the WebSocket the workload router
// opened for one session id. Validates every frame, negotiates the version (Hello must
// come first), and serves each family: control, ping, env, files, DNS, outgoing TCP/UDP,
// subscriptions and connection-scoped traffic. Bad frames are answered with a
// ProtocolError carrying a stable code and never affect another session.
// Everything the session owns — subscriptions, stolen connections, outgoing sockets,
// file handles — is released by `end()`: on Close, when the WebSocket closes, when no
// protocol ping arrived within the ping timeout, or when the peer is too slow.
import { lookup, reverse } from "node:dns/promises";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { WebSocket } from "ws";
import {
  checkFrame,
  decodePayload,
  encodeFrame,
  encodeRaw,
  FLAG_ERROR,
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
import { AgentError } from "./agent-errors.js";
import type { AgentCounters } from "./agent-metrics.js";
import { filterEnv, rewriteBranch } from "./env-resolver.js";
import { FileHandles } from "./file-handles.js";
import { HttpFilterError, type HttpFilter } from "./incoming/http-filter.js";
import type { PortSubscriptions } from "./incoming/port-subscriptions.js";
import { OutgoingTcp, type OutgoingOptions } from "./outgoing-tcp.js";
import { OutgoingUdp } from "./outgoing-udp.js";
import { SessionFlow, type FlowLimits } from "./session-flow.js";
import type { SessionGrant } from "./session-secrets.js";
import { SessionTraffic } from "./session-traffic.js";
import type { TargetView } from "./target-view.js";

const F = pb.FrameFamily;
const LOG_LEVELS = new Set(["trace", "debug", "info", "warn", "error", "fatal", "silent"]);
const MAX_FILTER_DEPTH = 8;
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
  /** Called once when the session ended (after its resources were released). */
  onEnd(session: AgentSession, reason: string): void;
}

export class ProtocolPeerError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function toHttpFilter(f: pb.HttpFilter, depth = 0): HttpFilter {
  if (depth > MAX_FILTER_DEPTH)
    throw new HttpFilterError(`http_filter: filters nest deeper than ${MAX_FILTER_DEPTH} levels`);
  const v = f.filter;
  switch (v.case) {
    case "header":
      return { header: { name: v.value.name, valueRegex: v.value.valueRegex } };
    case "pathRegex":
      return { pathRegex: v.value };
    case "method":
      return { method: v.value };
    case "allOf":
      return { allOf: v.value.filters.map((x) => toHttpFilter(x, depth + 1)) };
    case "anyOf":
      return { anyOf: v.value.filters.map((x) => toHttpFilter(x, depth + 1)) };
    default:
      throw new HttpFilterError(
        "http_filter: a filter must set one of header, path_regex, method, all_of, any_of",
      );
  }
}

export class AgentSession {
  readonly id: string;
  readonly log: Logger;
  readonly flow: SessionFlow;
  readonly traffic: SessionTraffic;
  readonly tcp: OutgoingTcp;
  readonly udp: OutgoingUdp;
  readonly files: FileHandles;
  /** Time of the Hello or the last protocol ping, ms since the epoch. */
  lastPingAt = Date.now();
  version = 0;
  private ended = false;

  constructor(private readonly o: AgentSessionOptions) {
    this.id = o.sessionId;
    this.log = o.log.child({ session: o.sessionId });
    this.flow = new SessionFlow(
      o.ws,
      o.socket,
      o.flow,
      () => {
        // Its queue cannot drain in time for a close handshake: drop the connection.
        o.counters.error("SWITCHYARD_SESSION_TOO_SLOW");
        this.end("too_slow", `the peer did not read ${o.flow.hardLimitBytes} queued bytes`);
        o.ws.terminate();
      },
      () => o.counters.backpressurePauses++,
    );
    this.traffic = new SessionTraffic(o.sessionId, this.flow, o.counters, {
      maxPayloadBytes: o.maxPayloadBytes,
      requestTimeoutMs: o.stolenRequestTimeoutMs,
    });
    this.tcp = new OutgoingTcp(this.flow, o.counters, o.outgoing);
    this.udp = new OutgoingUdp(this.flow, o.counters, o.outgoing);
    this.files = new FileHandles(o.view, { maxReadBytes: o.maxPayloadBytes - 64 });
    o.ws.on("message", (data: Buffer, isBinary: boolean) => this.onMessage(data, isBinary));
    o.ws.on("close", () => this.end("closed", "the WebSocket closed"));
    o.ws.on("error", (err) => this.log.debug({ err: err.message }, "session socket error"));
  }

  get isEnded(): boolean {
    return this.ended;
  }

  private error(code: string, message: string, requestId = 0, family = 0, kind = 0): void {
    this.o.counters.error(code);
    this.log.debug({ code, family, kind }, message);
    this.flow.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.ERROR, requestId }, pb.ProtocolErrorSchema, {
        code,
        message,
        frameFamily: family,
        frameKind: kind,
      }),
    );
  }

  onMessage(data: Buffer, isBinary: boolean): void {
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
        this.o.counters.error("SWITCHYARD_SESSION_CLOSED");
        ws.send(
          encodeFrame(
            { family: F.CONTROL, kind: pb.ControlKind.ERROR, requestId: data.readUInt32BE(4) },
            pb.ProtocolErrorSchema,
            {
              code: "SWITCHYARD_SESSION_CLOSED",
              message: "this session was closed; connect again to start a new one",
              frameFamily: data[0]!,
              frameKind: data[1]!,
            },
          ),
        );
      }
      return;
    }
    if (!isBinary)
      return this.error(
        "SWITCHYARD_FRAME_NOT_BINARY",
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
        "SWITCHYARD_FRAME_WRONG_DIRECTION",
        `kind ${kind} of family ${family} travels toward the client, not to an agent`,
        requestId,
        family,
        kind,
      );
    }
    if (this.version === 0 && !(family === F.CONTROL && kind === pb.ControlKind.HELLO)) {
      return this.error(
        "SWITCHYARD_HELLO_REQUIRED",
        "send Hello first: the agent serves no frame before version negotiation",
        requestId,
        family,
        kind,
      );
    }
    try {
      this.dispatch(data, family, kind, requestId, connectionId);
    } catch (err) {
      const e = err as Error & { code?: string };
      if (err instanceof FrameError) return this.error(e.code!, e.message, requestId, family, kind);
      this.log.error({ err: e.message, family, kind }, "frame handler failed");
      this.error(
        e.code ?? "SWITCHYARD_AGENT_INTERNAL",
        `the agent failed on this frame: ${e.message}`,
        requestId,
        family,
        kind,
      );
    }
  }

  /** Answers a failed asynchronous handler like a failed synchronous one (never an unhandled rejection). */
  private async(p: Promise<void>, requestId: number, family: number, kind: number): void {
    p.catch((err: unknown) => {
      if (this.ended) return;
      const e = err as Error & { code?: string };
      if (!(err instanceof FrameError))
        this.log.error({ err: e.message, family, kind }, "frame handler failed");
      this.error(
        e.code ?? "SWITCHYARD_AGENT_INTERNAL",
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
        this.lastPingAt = Date.now();
        // Pong echoes sent_at_micros, which has Ping's field number: reuse the payload bytes.
        this.flow.send(
          encodeRaw(
            { family: F.PING, kind: pb.PingKind.PONG, requestId, connectionId },
            data.subarray(HEADER_BYTES),
          ),
        );
        return;
      case F.ENV:
        return this.async(this.env(decodePayload(data, pb.EnvGetSchema), requestId), requestId, family, kind);
      case F.FILE:
        return this.async(this.file(data, kind, requestId), requestId, family, kind);
      case F.DNS:
        return this.async(this.dns(data, kind, requestId), requestId, family, kind);
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
        return this.subscription(data, kind, requestId, connectionId);
      case F.TRAFFIC:
        if (kind === pb.TrafficKind.DATA) return this.traffic.data(data, connectionId);
        if (kind === pb.TrafficKind.HTTP_RESPONSE) return this.traffic.httpResponse(data, connectionId);
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
            "SWITCHYARD_PROTOCOL_VERSION_UNSUPPORTED",
            `the agent speaks protocol versions ${PROTOCOL_VERSION_MIN}-${PROTOCOL_VERSION_MAX}, the peer ${hello.minVersion}-${hello.maxVersion}; upgrade the older side`,
            requestId,
            pb.FrameFamily.CONTROL,
            kind,
          );
          this.o.ws.close(4400, "no common protocol version");
          return;
        }
        this.version = v;
        this.lastPingAt = Date.now();
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
            "SWITCHYARD_FRAME_BAD_PAYLOAD",
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

  private async env(get: pb.EnvGet, requestId: number): Promise<void> {
    const reply = (init: { vars?: Record<string, string>; error?: string }) =>
      this.flow.send(
        encodeFrame({ family: F.ENV, kind: pb.EnvKind.RESULT, requestId }, pb.EnvResultSchema, init),
      );
    try {
      let env = filterEnv(await this.o.view.env(), get.include, get.exclude);
      const branch =
        get.branch && get.branchVariable
          ? { variable: get.branchVariable, branch: get.branch }
          : this.o.grant.branch;
      if (branch) env = rewriteBranch(env, branch);
      const vars: Record<string, string> = {};
      if (get.names.length > 0) {
        for (const n of get.names) {
          const v = env.get(n);
          if (v !== undefined) vars[n] = v;
        }
      } else for (const [k, v] of env) vars[k] = v;
      reply({ vars });
    } catch (err) {
      const e = err as Error & { code?: string };
      const code =
        typeof e.code === "string" && e.code.startsWith("SWITCHYARD_")
          ? e.code
          : "SWITCHYARD_ENV_UNAVAILABLE";
      this.o.counters.error(code);
      reply({
        error: `${code}: ${code === "SWITCHYARD_ENV_UNAVAILABLE" ? `reading the target's environment through the Kubernetes API failed: ${e.message}` : e.message}`,
      });
    }
  }

  private async file(data: Buffer, kind: number, requestId: number): Promise<void> {
    const f = this.files;
    let result;
    switch (kind) {
      case pb.FileKind.OPEN: {
        const m = decodePayload(data, pb.FileOpenSchema);
        result = await f.open(m.path, m.write);
        break;
      }
      case pb.FileKind.READ: {
        const m = decodePayload(data, pb.FileReadSchema);
        result = f.read(m.handle, m.offset, m.length);
        break;
      }
      case pb.FileKind.READ_DIR:
        result = await f.readDir(decodePayload(data, pb.FileReadDirSchema).path);
        break;
      case pb.FileKind.STAT:
        result = await f.stat(decodePayload(data, pb.FileStatSchema).path);
        break;
      default:
        result = f.close(decodePayload(data, pb.FileCloseSchema).handle);
    }
    this.flow.send(
      encodeFrame({ family: F.FILE, kind: pb.FileKind.RESULT, requestId }, pb.FileResultSchema, result),
    );
  }

  private async dns(data: Buffer, kind: number, requestId: number): Promise<void> {
    let init: { addresses?: { address: string; ipFamily: number }[]; hostnames?: string[]; error?: string };
    try {
      if (kind === pb.DnsKind.GETADDRINFO) {
        const q = decodePayload(data, pb.DnsGetAddrInfoSchema);
        const family = q.ipFamily === 4 || q.ipFamily === 6 ? q.ipFamily : 0;
        const all = await lookup(q.host, { all: true, family });
        init = { addresses: all.map((a) => ({ address: a.address, ipFamily: a.family })) };
      } else {
        init = { hostnames: await reverse(decodePayload(data, pb.DnsReverseSchema).address) };
      }
    } catch (err) {
      if (err instanceof FrameError) throw err;
      const e = err as Error & { code?: string };
      init = { error: e.code ?? "EAI_FAIL" };
    }
    this.flow.send(
      encodeFrame({ family: F.DNS, kind: pb.DnsKind.RESULT, requestId }, pb.DnsResultSchema, init),
    );
  }

  private subscription(data: Buffer, kind: number, requestId: number, subscriptionId: number): void {
    const reply = (ok: boolean, error = ""): void =>
      void this.flow.send(
        encodeFrame(
          {
            family: F.SUBSCRIPTION,
            kind: pb.SubscriptionKind.RESULT,
            requestId,
            connectionId: subscriptionId,
            flags: ok ? 0 : FLAG_ERROR,
          },
          pb.SubscriptionResultSchema,
          { ok, error },
        ),
      );
    if (kind === pb.SubscriptionKind.UNSUBSCRIBE) {
      const { port } = decodePayload(data, pb.UnsubscribeSchema);
      this.o.subscriptions.unsubscribe(this.id, port);
      this.traffic.subscriptionIds.delete(port);
      this.log.info({ port }, "unsubscribed");
      return reply(true);
    }
    const sub = decodePayload(data, pb.SubscribeSchema);
    const mode = kind === pb.SubscriptionKind.MIRROR ? "mirror" : "steal";
    try {
      if (!this.o.ports.has(sub.port)) {
        throw new AgentError(
          "SWITCHYARD_PORT_NOT_SERVED",
          `port ${sub.port} is not one of the target's ports this agent owns (${[...this.o.ports].join(", ") || "none"})`,
        );
      }
      const filter = sub.httpFilter ? toHttpFilter(sub.httpFilter) : undefined;
      // Set first: subscribing may hand held connections to this session at once.
      const previousId = this.traffic.subscriptionIds.get(sub.port);
      this.traffic.subscriptionIds.set(sub.port, subscriptionId);
      try {
        this.o.subscriptions.subscribe(this.id, sub.port, mode, filter);
      } catch (err) {
        if (previousId === undefined) this.traffic.subscriptionIds.delete(sub.port);
        else this.traffic.subscriptionIds.set(sub.port, previousId);
        throw err;
      }
      this.log.info({ port: sub.port, mode, filtered: filter !== undefined }, "subscribed");
      reply(true);
    } catch (err) {
      const e = err as Error & { code?: string };
      if (!e.code) throw err;
      this.o.counters.error(e.code);
      this.log.info({ port: sub.port, mode, code: e.code }, "subscription refused");
      reply(false, `${e.code}: ${e.message}`);
    }
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
