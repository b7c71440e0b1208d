// The client side of one session over a router WebSocket: typed requests (env, files,
// DNS, ping, subscriptions), outgoing TCP/UDP streams, incoming connections and stolen
// HTTP requests as events, upstream status, and reconnect. This class is the façade; the
// work is done by its parts:
//   router-connection  dial, Hello, reconnect (reconnect-policy), send and backpressure
//   pending-requests   request ids, reply matching, timeouts
//   inbound-frames     each frame from the router to its request, stream or event
//   session-streams    outgoing TCP/UDP streams and incoming traffic by id
//   subscriptions      mirror/steal subscriptions, re-sent after a reconnect
//   session-requests   the typed env/file/DNS/ping requests
//
// Reconnect: when the socket drops (the router died or restarted) every in-flight request,
// outgoing stream and incoming connection fails (their far ends were tied to that router),
// and the client dials the routers again (see reconnect-policy.ts). On success it
// re-subscribes every active subscription under the same ids and emits `reconnected`; a
// 404 (session deleted or expired) or 401 ends it at once. When it gives up it emits
// `lost` exactly once: callers must stop whatever depends on the session, never carry on
// silently disconnected.
//
// A protocol ping goes out every `pingIntervalMs` (agents drop subscriptions of a session
// that stops pinging); the last pong's per-cluster health is kept in `health`. A router
// that went silent for `livenessTimeoutMs` is dropped and the routers dialled again
// (router-connection.ts); time this session held reading does not count against it, nor
// against the requests waiting for their replies.
import { EventEmitter } from "node:events";
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import * as pb from "../../../../proto/gen/session_pb.js";
import { DEFAULT_ONLY_FAMILIES } from "../../../../proto/frame-catalog.js";
import { decodePayload, encodeFrame } from "../../../../proto/frame-codec.js";
import { CliError, CliErrorCode, type RemoteError } from "../cli-errors.js";
import type { FrameSink } from "./frame-sink.js";
import type { HttpFilterSpec } from "./http-filter.js";
import { dispatchInbound, type InboundTargets, type UpstreamEvent } from "./inbound-frames.js";
import type { IncomingConnection, IncomingHttpRequest, TrafficMode } from "./incoming-traffic.js";
import type { OutgoingTcpStream } from "./outgoing-tcp-stream.js";
import { PendingRequests } from "./pending-requests.js";
import { reconnectPolicy, type BackoffOptions } from "./reconnect-policy.js";
import { RouterConnection, type ConnectionState } from "./router-connection.js";
import {
  SessionRequests,
  type ClusterHealthInfo,
  type EnvOptions,
  type FileStatInfo,
  type PingResult,
  type TargetMounts,
} from "./session-requests.js";
import { SessionStreams } from "./session-streams.js";
import { SessionSubscriptions, type Subscription } from "./subscriptions.js";
import type { UdpChannel } from "./udp-channel.js";

export type { BackoffOptions } from "./reconnect-policy.js";
export type { UpstreamEvent } from "./inbound-frames.js";
export type {
  ClusterHealthInfo,
  EnvBranchRewrite,
  EnvOptions,
  EnvQueueRewrite,
  FileStatInfo,
  PingResult,
  TargetMounts,
} from "./session-requests.js";
export type { Subscription } from "./subscriptions.js";

const F = pb.FrameFamily;

export interface SessionClientOptions {
  sessionId: string;
  /** The session secret (its sha256 is the session's clientKeyHash). */
  secret: string;
  /** Session URLs (ws[s]://host/v1/sessions/<id>); reconnects rotate through them. */
  urls: string[];
  /** PEM CA bundle verifying wss:// routers. */
  caPem?: string;
  /** Reconnect backoff (default 1, 2, 4, 8 s capped, 6 attempts). */
  backoff?: BackoffOptions;
  /** How long the first connect keeps retrying a router that is not ready (503), ms. Default 60 000. */
  connectTimeoutMs?: number;
  /** Reply deadline of a request, ms. Default 30 000. */
  requestTimeoutMs?: number;
  /** Protocol ping interval, ms; 0 disables. Default 15 000. */
  pingIntervalMs?: number;
  /**
   * A router from which nothing came for this long while the session read it is dead: the
   * connection is dropped and the routers dialled again; a WebSocket ping goes out every
   * quarter of it. Time the session held reading does not count, up to 10×. Ms; 0 turns it
   * off. Default 60 000.
   */
  livenessTimeoutMs?: number;
  /** Send buffer size above which writers wait, bytes. Default 4 MiB. */
  highWaterBytes?: number;
  /** Dial timeout per attempt, ms. Default 10 000. */
  dialTimeoutMs?: number;
  /** How long the first connect retries a 404 (routing table not yet pushed), ms. Default 10 000. */
  notFoundGraceMs?: number;
  /**
   * How long a request only the Default cluster answers (env, files, DNS, outgoing) waits for
   * the Default upstream to be up before it is sent anyway (the router then answers why it
   * cannot be), ms. Default 10 000.
   */
  defaultUpWaitMs?: number;
}

export interface SessionClientEvents {
  upstream: [UpstreamEvent];
  connection: [IncomingConnection];
  httpRequest: [IncomingHttpRequest];
  reconnecting: [{ attempt: number; delayMs: number; error: string }];
  reconnected: [{ url: string; resubscribed: number; refused: string[] }];
  lost: [CliError];
  log: [{ level: string; message: string }];
  /** A ProtocolError no request was waiting for. */
  remoteError: [RemoteError];
}

function invalid(problem: string): CliError {
  return new CliError(CliErrorCode.INVALID_OPTION, `SessionClient: ${problem}`);
}

function nonNegative(name: string, v: number): number {
  if (!Number.isFinite(v) || v < 0) throw invalid(`${name} must be a non-negative number`);
  return v;
}

export class SessionClient extends EventEmitter<SessionClientEvents> implements FrameSink {
  readonly sessionId: string;
  /** Upstream clusters' last known state (from UpstreamStatus frames). */
  readonly upstreams = new Map<string, UpstreamEvent>();
  /** Per-cluster health from the last pong. */
  health: ClusterHealthInfo[] = [];

  readonly #pingIntervalMs: number;
  readonly #defaultUpWaitMs: number;
  readonly #conn: RouterConnection;
  readonly #pending: PendingRequests;
  readonly #streams: SessionStreams;
  readonly #subscriptions = new SessionSubscriptions((...a) => this.request(...a));
  readonly #requests = new SessionRequests((...a) => this.#ask(...a));
  readonly #inbound: InboundTargets;
  #pinger: NodeJS.Timeout | undefined;

  constructor(options: SessionClientOptions) {
    super();
    if (!options.sessionId) throw invalid("sessionId is required");
    if (!options.secret) throw invalid("secret is required");
    if (!options.urls?.length) throw invalid("urls must name at least one router");
    for (const u of options.urls)
      if (!/^wss?:\/\//.test(u)) throw invalid(`url "${u}" must be ws:// or wss://`);
    this.sessionId = options.sessionId;
    const connectTimeoutMs = nonNegative("connectTimeoutMs", options.connectTimeoutMs ?? 60_000);
    const requestTimeoutMs = nonNegative("requestTimeoutMs", options.requestTimeoutMs ?? 30_000);
    this.#pingIntervalMs = nonNegative("pingIntervalMs", options.pingIntervalMs ?? 15_000);
    const highWaterBytes = nonNegative("highWaterBytes", options.highWaterBytes ?? 4 * 1024 * 1024);
    const dialTimeoutMs = nonNegative("dialTimeoutMs", options.dialTimeoutMs ?? 10_000);
    const notFoundGraceMs = nonNegative("notFoundGraceMs", options.notFoundGraceMs ?? 10_000);
    const livenessTimeoutMs = nonNegative("livenessTimeoutMs", options.livenessTimeoutMs ?? 60_000);
    this.#defaultUpWaitMs = nonNegative("defaultUpWaitMs", options.defaultUpWaitMs ?? 10_000);
    this.#conn = new RouterConnection(
      {
        sessionId: options.sessionId,
        secret: options.secret,
        urls: [...options.urls],
        policy: reconnectPolicy(options.backoff),
        dial: {
          timeoutMs: dialTimeoutMs,
          ...(options.caPem ? { caPem: options.caPem } : {}),
        },
        connectTimeoutMs,
        notFoundGraceMs,
        highWaterBytes,
        livenessTimeoutMs,
      },
      {
        frame: (data) => dispatchInbound(data, this.#inbound),
        dropped: (err) => this.#failInFlight(err),
        reconnecting: (info) => this.emit("reconnecting", info),
        inboundHeld: (held) => (held ? this.#pending.hold() : this.#pending.release()),
        reconnected: (url) => void this.#resubscribe(url),
        lost: (err) => {
          this.#stopTimers();
          this.emit("lost", err);
        },
      },
    );
    this.#pending = new PendingRequests(requestTimeoutMs);
    this.#streams = new SessionStreams(this.#conn, {
      isFiltered: (id) => this.#subscriptions.isFiltered(id),
      connection: (c) => this.listenerCount("connection") > 0 && this.emit("connection", c),
      httpRequest: (r) => this.listenerCount("httpRequest") > 0 && this.emit("httpRequest", r),
    });
    this.#inbound = {
      pending: this.#pending,
      streams: this.#streams,
      upstream: (ev) => {
        this.upstreams.set(ev.cluster, ev);
        this.emit("upstream", ev);
      },
      log: (entry) => this.emit("log", entry),
      remoteError: (err) => this.emit("remoteError", err),
    };
  }

  get state(): ConnectionState {
    return this.#conn.state;
  }

  /** The router URL in use. */
  get url(): string {
    return this.#conn.url;
  }

  /** Why the session was lost, once it was. */
  get lostError(): CliError | undefined {
    return this.#conn.lostError;
  }

  get subscriptions(): Subscription[] {
    return this.#subscriptions.list;
  }

  /**
   * Connects (Hello included). Routers answering 503 (session still being set up) or not
   * reachable are retried until connectTimeoutMs; 404/401 fail at once.
   */
  async connect(signal?: AbortSignal): Promise<void> {
    await this.#conn.connect(signal);
    this.#startTimers();
  }

  /** Ends the session's connection (does not delete the session object). */
  close(reason = "client closed"): void {
    if (this.#conn.state === "closed") return;
    this.#stopTimers();
    this.#conn.close(reason);
    this.#subscriptions.clear();
  }

  // ---- FrameSink ----

  send(frame: Buffer): boolean {
    return this.#conn.send(frame);
  }

  whenWritable(cb: () => void): void {
    this.#conn.whenWritable(cb);
  }

  // ---- requests ----

  /** Sends a request and resolves with the reply frame; a ProtocolError reply rejects. */
  async request<S extends DescMessage>(
    family: number,
    kind: number,
    schema: S,
    init: MessageInitShape<S>,
    connectionId = 0,
  ): Promise<Buffer> {
    if (this.#conn.state !== "open") throw this.#conn.notConnected();
    // Right after Ready a gateway may not know the session yet (its route is still on the
    // way): its link comes up a moment later. Wait for it rather than be refused.
    if (DEFAULT_ONLY_FAMILIES.has(family) && !this.defaultUp) {
      await this.#whenDefaultUp();
      if (this.#conn.state !== "open") throw this.#conn.notConnected();
    }
    const { requestId, reply } = this.#pending.add(family);
    if (!this.#conn.send(encodeFrame({ family, kind, requestId, connectionId }, schema, init))) {
      this.#pending.forget(requestId);
      throw this.#conn.notConnected();
    }
    return reply;
  }

  /** The Default upstream's last known state is up. */
  get defaultUp(): boolean {
    for (const u of this.upstreams.values()) if (u.isDefault && u.up) return true;
    return false;
  }

  /** Resolves once the Default upstream is up, or after `defaultUpWaitMs`, or when the session is lost. */
  #whenDefaultUp(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.off("upstream", onUpstream);
        this.off("lost", done);
        resolve();
      };
      const onUpstream = (ev: UpstreamEvent) => {
        if (ev.isDefault && ev.up) done();
      };
      const timer = setTimeout(done, this.#defaultUpWaitMs);
      timer.unref();
      this.on("upstream", onUpstream);
      this.on("lost", done);
    });
  }

  async #ask<S extends DescMessage, R extends DescMessage>(
    family: number,
    kind: number,
    schema: S,
    init: MessageInitShape<S>,
    replySchema: R,
    connectionId = 0,
  ): Promise<MessageShape<R>> {
    return decodePayload(await this.request(family, kind, schema, init, connectionId), replySchema);
  }

  /** The Default cluster's environment of the target (include/exclude are shell-style patterns). */
  env(opts: EnvOptions = {}): Promise<Record<string, string>> {
    return this.#requests.env(opts);
  }

  /** Opens a remote file read-only; returns its handle. */
  openFile(path: string): Promise<bigint> {
    return this.#requests.openFile(path);
  }

  readFile(handle: bigint, offset: number, length: number): Promise<Buffer> {
    return this.#requests.readFile(handle, offset, length);
  }

  closeFile(handle: bigint): Promise<void> {
    return this.#requests.closeFile(handle);
  }

  stat(path: string): Promise<FileStatInfo> {
    return this.#requests.stat(path);
  }

  readDir(path: string): Promise<Array<{ name: string; isDir: boolean }>> {
    return this.#requests.readDir(path);
  }

  /** The target container's served mount paths (longest first) and the pod's /etc/resolv.conf. */
  mounts(): Promise<TargetMounts> {
    return this.#requests.mounts();
  }

  /** Reads a whole remote file (open, read until a short read, close). */
  readWholeFile(path: string, chunkBytes?: number): Promise<Buffer> {
    return this.#requests.readWholeFile(path, chunkBytes);
  }

  /** Resolves a host name with the Default cluster's resolver. */
  lookup(host: string, ipFamily: 0 | 4 | 6 = 0): Promise<Array<{ address: string; family: number }>> {
    return this.#requests.lookup(host, ipFamily);
  }

  reverse(address: string): Promise<string[]> {
    return this.#requests.reverse(address);
  }

  /** Protocol ping to every cluster; the merged pong's per-cluster health. */
  async ping(): Promise<PingResult> {
    const r = await this.#requests.ping();
    this.health = r.clusters;
    return r;
  }

  /** Changes the agents' log level on every cluster. */
  setLogLevel(level: "trace" | "debug" | "info" | "warn" | "error"): boolean {
    return this.send(
      encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.LOG_LEVEL }, pb.LogLevelSchema, { level }),
    );
  }

  // ---- subscriptions ----

  /**
   * Mirrors or steals a target port on every workload cluster. Resolves once every live
   * cluster accepted; a refusal rejects with the clusters that refused.
   */
  subscribe(port: number, mode: TrafficMode, filter?: HttpFilterSpec): Promise<Subscription> {
    return this.#subscriptions.subscribe(port, mode, filter);
  }

  unsubscribe(sub: Subscription): Promise<void> {
    return this.#subscriptions.unsubscribe(sub);
  }

  // ---- outgoing ----

  /** Opens a TCP connection from the Default cluster (the agent resolves host names). */
  connectTcp(host: string, port: number): Promise<OutgoingTcpStream> {
    return this.#openStream(this.#streams.openTcp(), F.OUTGOING_TCP, host, port);
  }

  /** Binds a UDP socket on the Default cluster, "connected" to host:port. */
  bindUdp(host: string, port: number): Promise<UdpChannel> {
    return this.#openStream(this.#streams.openUdp(), F.OUTGOING_UDP, host, port);
  }

  async #openStream<T extends OutgoingTcpStream | UdpChannel>(
    stream: T,
    family: typeof F.OUTGOING_TCP | typeof F.OUTGOING_UDP,
    host: string,
    port: number,
  ): Promise<T> {
    try {
      await this.#requests.connectStream(family, stream.id, host, port);
      return stream;
    } catch (err) {
      this.#streams.abandon(stream);
      throw err;
    }
  }

  // ---- connection life ----

  #startTimers(): void {
    this.#pending.startSweep();
    if (this.#pingIntervalMs > 0) {
      this.#pinger = setInterval(() => {
        if (this.#conn.state === "open") this.ping().catch(() => {});
      }, this.#pingIntervalMs);
      this.#pinger.unref();
    }
  }

  #stopTimers(): void {
    this.#pending.stopSweep();
    clearInterval(this.#pinger);
  }

  #failInFlight(err: CliError): void {
    this.#pending.failAll(err);
    this.#streams.failAll(err, err.code === CliErrorCode.CLOSED);
    this.#conn.releaseWriters();
  }

  async #resubscribe(url: string): Promise<void> {
    const { resubscribed, refused } = await this.#subscriptions.resubscribeAll();
    this.emit("reconnected", { url, resubscribed, refused });
  }
}
