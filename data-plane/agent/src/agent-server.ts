// The agent's network face: the WebSocket endpoint /v1/sessions/{id} that workload
// routers dial (authenticated before the upgrade: `Authorization: Bearer <secret>` whose
// sha256 SessionSecrets accepts for that session, else 401), one PortProxy per target
// port, and the coarse sweep that drops sessions whose peer went silent (no frame within
// the ping timeout, counting only time the agent read it) and expires stolen requests. One WebSocket per session id: a newer connection for the same id
// replaces the older one (a router that reconnected), whose resources are released first.
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { Logger } from "pino";
import { WebSocketServer } from "ws";
import { nonNegative, OptionError, positive } from "../../../lib/option-error.js";
import { ErrorCode } from "../../../proto/error-codes.js";
import { DEFAULT_MAX_PAYLOAD_BYTES, HEADER_BYTES } from "../../../proto/frame-codec.js";
import { bearerSecret } from "../../../proto/session-auth.js";
import { parseSessionPath, sessionPath, writeRefusal } from "../../../proto/session-endpoint.js";
import { AgentMetrics } from "./agent-metrics.js";
import { AgentSession } from "./agent-session.js";
import { PortProxy } from "./incoming/port-proxy.js";
import { ProbeRelay } from "./incoming/probe-relay.js";
import { PortSubscriptions } from "./incoming/port-subscriptions.js";
import { SubscriptionJournal } from "./incoming/subscription-journal.js";
import type { OutgoingOptions } from "./outgoing/outgoing-tcp.js";
import { DEFAULT_FLOW_LIMITS, type FlowLimits } from "./session-flow.js";
import type { SessionSecrets } from "./session-secrets.js";
import type { TargetView } from "./target/target-view.js";

export interface TargetPort {
  /** The target's port: what subscriptions name and where the app listens. */
  appPort: number;
  /** Where the agent accepts that port's traffic (sidecar: redirected; process mode: another port). 0 = ephemeral. */
  listenPort: number;
  /** Default 127.0.0.1. */
  appHost?: string;
  /** Default: the agent's listen host. */
  listenHost?: string;
}

export interface AgentServerOptions {
  /** Protocol endpoint address. */
  host: string;
  /** 0 = ephemeral. */
  port: number;
  secrets: SessionSecrets;
  view: TargetView;
  ports: readonly TargetPort[];
  /** Relay ports for the kubelet's probes of the app: always piped to the app (see incoming/probe-relay.ts). */
  probePorts?: readonly TargetPort[];
  outgoing?: OutgoingOptions;
  /**
   * Drop a session after this long without a frame from its peer (the client pings every
   * 15 s), ms (default 60 000). Time the agent itself did not read the session (a local
   * socket was full) does not count, up to 10× this (see lib/peer-liveness.ts).
   */
  pingTimeoutMs?: number;
  /** Coarse sweep period, ms (default min(5 000, pingTimeoutMs / 4)). */
  sweepIntervalMs?: number;
  flow?: Partial<FlowLimits>;
  /** Largest frame payload, bytes (default 1 MiB). */
  maxPayloadBytes?: number;
  /**
   * When a session's connection is lost (not closed by its client), keep its subscriptions
   * held this long, ms, so that traffic waits for it to reconnect instead of going to the
   * app (default 10 000; 0 drops them at once).
   */
  resumeGraceMs?: number;
  /** How long a stolen HTTP request waits for the session, ms (default 60 000). */
  stolenRequestTimeoutMs?: number;
  /**
   * Keep the subscriptions in this file (incoming/subscription-journal.ts): a restarted agent
   * reloads them held, for `resumeGraceMs`, before it accepts traffic. Default: none.
   */
  stateFile?: string;
  /** Serve wss:// with this certificate. */
  tls?: { certPem: string; keyPem: string };
  logger: Logger;
}

export class AgentServer {
  readonly metrics: AgentMetrics;
  readonly subscriptions = new PortSubscriptions();
  readonly sessions = new Map<string, AgentSession>();
  readonly proxies: PortProxy[] = [];
  private readonly probeRelays: ProbeRelay[];
  /** The probe relays' ports, in `probePorts` order (after listen()). */
  readonly probeRelayPorts: number[] = [];
  private readonly server: Server;
  private readonly wss: WebSocketServer;
  private readonly log: Logger;
  private readonly pingTimeoutMs: number;
  private readonly sweepIntervalMs: number;
  private readonly flow: FlowLimits;
  private readonly maxPayloadBytes: number;
  private readonly stolenRequestTimeoutMs: number;
  private readonly resumeGraceMs: number;
  /** Sessions whose subscriptions are held → when the hold ends. */
  private readonly holds = new Map<string, NodeJS.Timeout>();
  private readonly portSet: Set<number>;
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly journal: SubscriptionJournal | undefined;
  /** app port → the port the agent actually listens on (after listen()). */
  readonly trafficPorts = new Map<number, number>();

  constructor(private readonly opts: AgentServerOptions) {
    this.log = opts.logger;
    this.pingTimeoutMs = positive("pingTimeoutMs", opts.pingTimeoutMs, 60_000);
    this.sweepIntervalMs = positive(
      "sweepIntervalMs",
      opts.sweepIntervalMs,
      Math.min(5000, this.pingTimeoutMs / 4),
    );
    this.maxPayloadBytes = positive("maxPayloadBytes", opts.maxPayloadBytes, DEFAULT_MAX_PAYLOAD_BYTES);
    this.stolenRequestTimeoutMs = positive("stolenRequestTimeoutMs", opts.stolenRequestTimeoutMs, 60_000);
    this.resumeGraceMs = nonNegative("resumeGraceMs", opts.resumeGraceMs, 10_000);
    this.flow = { ...DEFAULT_FLOW_LIMITS, ...opts.flow };
    if (!(
      this.flow.lowWaterBytes < this.flow.highWaterBytes &&
      this.flow.highWaterBytes < this.flow.hardLimitBytes
    )) {
      throw new OptionError("flow", "limits must satisfy lowWaterBytes < highWaterBytes < hardLimitBytes");
    }
    this.journal = opts.stateFile
      ? new SubscriptionJournal({ path: opts.stateFile, subscriptions: this.subscriptions, logger: this.log })
      : undefined;
    this.portSet = new Set(opts.ports.map((p) => p.appPort));
    if (this.portSet.size !== opts.ports.length)
      throw new OptionError("ports", "each target port may be given once");
    for (const p of opts.ports) {
      this.proxies.push(
        new PortProxy({
          listenPort: p.listenPort,
          listenHost: p.listenHost ?? opts.host,
          appHost: p.appHost ?? "127.0.0.1",
          appPort: p.appPort,
          subscriptionPort: p.appPort,
          subscriptions: this.subscriptions,
          sessions: (id) => this.sessions.get(id)?.traffic,
        }),
      );
    }
    this.probeRelays = (opts.probePorts ?? []).map(
      (p) =>
        new ProbeRelay({
          listenPort: p.listenPort,
          listenHost: p.listenHost ?? opts.host,
          appHost: p.appHost ?? "127.0.0.1",
          appPort: p.appPort,
        }),
    );
    this.metrics = new AgentMetrics({
      sessions: () => this.sessions.size,
      subscriptions: () => {
        const out = { mirror: 0, steal: 0, filtered_steal: 0, held: 0 };
        for (const port of this.portSet)
          for (const s of this.subscriptions.forPort(port))
            out[s.held ? "held" : s.mode === "mirror" ? "mirror" : s.filter ? "filtered_steal" : "steal"]++;
        return out;
      },
      connections: () => {
        const out = { incoming_steal: 0, incoming_mirror: 0, outgoing_tcp: 0, outgoing_udp: 0 };
        for (const s of this.sessions.values()) {
          const c = s.traffic.counts();
          out.incoming_steal += c.steal;
          out.incoming_mirror += c.mirror;
          out.outgoing_tcp += s.tcp.size;
          out.outgoing_udp += s.udp.size;
        }
        return out;
      },
      bufferedBytes: () => {
        let n = 0;
        for (const s of this.sessions.values()) n += s.flow.bufferedBytes;
        return n;
      },
      proxy: () => {
        const out = { requestsApp: 0, requestsStolen: 0, requestsFailed: 0, mirrorDroppedBytes: 0, held: 0 };
        for (const p of this.proxies) {
          out.requestsApp += p.metrics.requests.app;
          out.requestsStolen += p.metrics.requests.stolen;
          out.requestsFailed += p.metrics.requests.failed;
          out.mirrorDroppedBytes += p.metrics.mirrorDroppedBytes;
          out.held += p.metrics.held;
        }
        return out;
      },
    });
    this.wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      skipUTF8Validation: true,
      // Above maxPayloadBytes (up to 4×) a frame gets a precise SWITCHYARD_FRAME_OVERSIZED
      // answer from the codec; beyond that the WebSocket itself closes (1009).
      maxPayload: this.maxPayloadBytes * 4 + HEADER_BYTES,
    });
    const handler = (req: IncomingMessage, res: ServerResponse) => void this.http(req, res);
    this.server = opts.tls
      ? createHttpsServer({ cert: opts.tls.certPem, key: opts.tls.keyPem }, handler)
      : createHttpServer(handler);
    this.server.on(
      "upgrade",
      (req: IncomingMessage, socket: Socket, head: Buffer) => void this.upgrade(req, socket, head),
    );
  }

  /** The protocol endpoint's port (after listen()). */
  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** ws:// (or wss://) URL of a session on this agent. */
  url(sessionId: string): string {
    const host = this.opts.host.includes(":") ? `[${this.opts.host}]` : this.opts.host;
    return `${this.opts.tls ? "wss" : "ws"}://${host === "0.0.0.0" ? "127.0.0.1" : host}:${this.port}${sessionPath(sessionId)}`;
  }

  async listen(): Promise<void> {
    // Known before anything is accepted: traffic of a session this agent served before a
    // restart waits for that session instead of going to the app.
    if (this.journal) {
      for (const id of this.journal.restore())
        if (!this.holdSession(id, "restored after an agent restart")) this.subscriptions.dropSession(id);
      this.journal.attach();
    }
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.opts.port, this.opts.host, () => resolve());
    });
    for (const [i, proxy] of this.proxies.entries())
      this.trafficPorts.set(this.opts.ports[i]!.appPort, await proxy.listen());
    // Probe relays last: the app's readiness probe through a relay means every port is served
    // (the sidecar template relies on it to start the app beside the agent).
    for (const relay of this.probeRelays) this.probeRelayPorts.push(await relay.listen());
    this.sweepTimer = setInterval(() => this.sweep(Date.now()), this.sweepIntervalMs);
    this.sweepTimer.unref();
    this.log.info(
      { port: this.port, trafficPorts: Object.fromEntries(this.trafficPorts) },
      "agent listening",
    );
  }

  /** Listens, serves until `signal` aborts, then closes. */
  async start(signal: AbortSignal): Promise<void> {
    await this.listen();
    if (!signal.aborted)
      await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    await this.close();
  }

  async close(): Promise<void> {
    this.journal?.stop(); // what was live stays saved for the agent that starts next
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    for (const t of this.holds.values()) clearTimeout(t);
    this.holds.clear();
    for (const s of [...this.sessions.values()]) s.end("agent_stopping", "the agent is shutting down", 1001);
    for (const c of this.wss.clients) c.terminate();
    await Promise.all(this.proxies.map((p) => p.close()));
    await Promise.all(this.probeRelays.map((r) => r.close()));
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** Drops sessions whose peer went silent (AgentSession.peerSilent); expires stolen requests. */
  sweep(now: number): void {
    for (const s of [...this.sessions.values()]) {
      if (s.peerSilent(now)) {
        this.metrics.counters.pingTimeouts++;
        this.metrics.counters.error("ping_timeout");
        const unread = s.liveness.paused
          ? " while the agent could not read it (a local socket was full)"
          : "";
        s.end(
          "ping_timeout",
          `no frame (nor protocol ping) from the peer within ${s.liveness.describeAllowedSilence()}${unread}; subscriptions and connections dropped`,
          4408,
        );
        continue;
      }
      s.traffic.sweep(now);
    }
  }

  private async upgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on("error", () => {});
    const sessionId = parseSessionPath(req.url);
    if (sessionId === undefined)
      return writeRefusal(
        socket,
        404,
        ErrorCode.NOT_FOUND,
        `no WebSocket endpoint at ${(req.url ?? "").split("?")[0]!.slice(0, 200)}; use /v1/sessions/{id}`,
      );
    const secret = bearerSecret(req.headers);
    if (secret === undefined) {
      this.metrics.counters.error("auth_failed");
      return writeRefusal(
        socket,
        401,
        ErrorCode.UNAUTHENTICATED,
        "send the session's agent secret as 'Authorization: Bearer <secret>'",
      );
    }
    const grant = await this.opts.secrets.authorize(sessionId, secret);
    if (!grant) {
      this.metrics.counters.error("auth_failed");
      this.log.info({ session: sessionId }, "refused a connection with a wrong secret");
      return writeRefusal(
        socket,
        401,
        ErrorCode.UNAUTHENTICATED,
        `the secret is not valid for session ${sessionId} on this agent`,
      );
    }
    if (socket.destroyed) return;
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      ws.binaryType = "nodebuffer";
      const previous = this.sessions.get(sessionId);
      previous?.end("replaced", "a newer connection for this session replaced this one", 4409);
      const session = new AgentSession({
        sessionId,
        grant,
        ws,
        socket,
        log: this.log,
        counters: this.metrics.counters,
        view: this.opts.view,
        subscriptions: this.subscriptions,
        ports: this.portSet,
        flow: this.flow,
        outgoing: this.opts.outgoing ?? {},
        maxPayloadBytes: this.maxPayloadBytes,
        stolenRequestTimeoutMs: this.stolenRequestTimeoutMs,
        pingTimeoutMs: this.pingTimeoutMs,
        onEnd: (s, reason) => this.sessionEnded(s, reason),
      });
      this.sessions.set(sessionId, session);
    });
  }

  private sessionEnded(s: AgentSession, reason: string): void {
    if (this.sessions.get(s.id) !== s) return; // replaced: the newer connection owns the subscriptions
    this.sessions.delete(s.id);
    // Lost, not closed: hold its subscriptions so its traffic waits for it to reconnect.
    if (reason === "closed" && this.holdSession(s.id, "session connection lost")) return;
    const held = this.holds.get(s.id);
    if (held) {
      clearTimeout(held);
      this.holds.delete(s.id);
    }
    const ports = this.subscriptions.dropSession(s.id);
    if (ports.length > 0) this.log.info({ session: s.id, ports }, "dropped the session's subscriptions");
  }

  /**
   * Holds a session's subscriptions for `resumeGraceMs` (nothing with a grace of 0). Returns
   * whether any subscription is held.
   */
  private holdSession(id: string, why: string): boolean {
    if (this.resumeGraceMs === 0) return false;
    const ports = this.subscriptions.hold(id);
    if (ports.length === 0) return false;
    clearTimeout(this.holds.get(id));
    const timer = setTimeout(() => {
      this.holds.delete(id);
      const dropped = this.subscriptions.dropHeld(id);
      if (dropped.length > 0)
        this.log.info(
          { session: id, ports: dropped },
          "the session did not return in time; dropped its held subscriptions (traffic goes to the app)",
        );
    }, this.resumeGraceMs);
    timer.unref();
    this.holds.set(id, timer);
    this.log.info(
      { session: id, ports, graceMs: this.resumeGraceMs },
      `${why}; holding its subscriptions until it returns`,
    );
    return true;
  }

  /** /healthz and /metrics (also served on --metrics-listen by main.ts). */
  async http(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "").split("?")[0];
    try {
      if (path === "/healthz") {
        res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
      } else if (path === "/metrics") {
        const body = await this.metrics.registry.metrics();
        res.writeHead(200, { "content-type": this.metrics.registry.contentType }).end(body);
      } else {
        res
          .writeHead(404, { "content-type": "application/json" })
          .end(JSON.stringify({ code: ErrorCode.NOT_FOUND, message: `no handler for ${path}` }));
      }
    } catch (err) {
      res.writeHead(500, { "content-type": "text/plain" }).end(`${(err as Error).message}\n`);
    }
  }
}
