// The client side of one session over a router WebSocket: typed requests (env, files,
// DNS, ping, subscriptions), outgoing TCP/UDP streams, incoming connections and stolen
// HTTP requests as events, upstream status, and reconnect.
//
// Reconnect: when the socket drops (the router died or restarted) every in-flight request,
// outgoing stream and incoming connection fails (their far ends were tied to that router),
// and the client dials the routers again — rotating through the URLs it was given, after
// 1, 2, 4, 8, 8… s, a bounded number of times. On success it re-subscribes every active
// subscription under the same ids and emits `reconnected`; a 404 (session deleted or
// expired) or 401 ends it at once. When it gives up it emits `lost` exactly once: callers
// must stop whatever depends on the session, never carry on silently disconnected.
//
// A protocol ping goes out every `pingIntervalMs` (agents drop subscriptions of a session
// that stops pinging); the last pong's per-cluster health is kept in `health`.
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type WebSocket from "ws";
import * as pb from "../../../proto/gen/session_pb.js";
import { decodePayload, encodeFrame, FLAG_ERROR, readHeader } from "../../../proto/frame-codec.js";
import { decodeStreamData } from "../../../proto/stream-data-frame.js";
import { coalesceWrites } from "../../../proto/coalesced-writes.js";
import { CliError, RemoteError } from "./cli-errors.js";
import type { FrameSink } from "./frame-sink.js";
import { toProtoFilter, type HttpFilterSpec } from "./http-filter.js";
import {
  IncomingConnection,
  IncomingHttpRequest,
  type IncomingConnectionInfo,
  type TrafficMode,
} from "./incoming-traffic.js";
import { OutgoingTcpStream } from "./outgoing-tcp-stream.js";
import { resolveBackoff, retryWithBackoff, type BackoffOptions } from "./reconnect-backoff.js";
import { dialRouter, isFatalDialError, RouterDialError, type DialedRouter } from "./router-dial.js";
import { UdpChannel } from "./udp-channel.js";

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
  /** Send buffer size above which writers wait, bytes. Default 4 MiB. */
  highWaterBytes?: number;
  /** Dial timeout per attempt, ms. Default 10 000. */
  dialTimeoutMs?: number;
  /** How long the first connect retries a 404 (routing table not yet pushed), ms. Default 10 000. */
  notFoundGraceMs?: number;
  /** All-zero WebSocket masks (default: on for wss://, off for ws://; see router-dial.ts). */
  zeroMask?: boolean;
}

export interface UpstreamEvent {
  cluster: string;
  up: boolean;
  isDefault: boolean;
  error: string;
  retryInMs: number;
  connectionsClosed: number;
}

export interface ClusterHealthInfo {
  cluster: string;
  state: "ok" | "down" | "timeout" | "unknown";
  rttMs: number;
  error: string;
}

export interface PingResult {
  rttMs: number;
  clusters: ClusterHealthInfo[];
}

export interface Subscription {
  id: number;
  port: number;
  mode: TrafficMode;
  filter?: HttpFilterSpec;
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

export interface FileStatInfo {
  size: number;
  mode: number;
  modifiedUnixMs: number;
  isDir: boolean;
}

export interface EnvOptions {
  names?: string[];
  include?: string[];
  exclude?: string[];
}

interface Pending {
  family: number;
  deadline: number;
  resolve(frame: Buffer): void;
  reject(err: Error): void;
}

type State = "idle" | "open" | "reconnecting" | "lost" | "closed";

export class SessionClient extends EventEmitter<SessionClientEvents> implements FrameSink {
  readonly sessionId: string;
  /** Upstream clusters' last known state (from UpstreamStatus frames). */
  readonly upstreams = new Map<string, UpstreamEvent>();
  /** Per-cluster health from the last pong. */
  health: ClusterHealthInfo[] = [];

  readonly #o: Required<Omit<SessionClientOptions, "caPem" | "backoff" | "zeroMask">> & {
    caPem?: string;
    zeroMask?: boolean;
  };
  readonly #backoff;
  #state: State = "idle";
  #ws: WebSocket | undefined;
  #socket: Socket | undefined;
  #url = "";
  #urlIndex = 0;
  #nextRequestId = 2;
  #nextStreamId = 1;
  #nextSubscriptionId = 1;
  readonly #pending = new Map<number, Pending>();
  readonly #subscriptions = new Map<number, Subscription>();
  readonly #tcp = new Map<number, OutgoingTcpStream>();
  readonly #udp = new Map<number, UdpChannel>();
  readonly #incoming = new Map<number, IncomingConnection>();
  /** Connections of filtered steals: an HTTP request or (for upgrades) raw bytes follow. */
  readonly #undecided = new Map<number, IncomingConnectionInfo>();
  #writableWaiters: Array<() => void> = [];
  #sweep: NodeJS.Timeout | undefined;
  #pinger: NodeJS.Timeout | undefined;
  #lostError: CliError | undefined;

  constructor(options: SessionClientOptions) {
    super();
    if (!options.sessionId)
      throw new CliError("SWITCHYARD_CLI_INVALID_OPTION", "SessionClient: sessionId is required");
    if (!options.secret)
      throw new CliError("SWITCHYARD_CLI_INVALID_OPTION", "SessionClient: secret is required");
    if (!options.urls?.length)
      throw new CliError(
        "SWITCHYARD_CLI_INVALID_OPTION",
        "SessionClient: urls must name at least one router",
      );
    for (const u of options.urls)
      if (!/^wss?:\/\//.test(u))
        throw new CliError(
          "SWITCHYARD_CLI_INVALID_OPTION",
          `SessionClient: url "${u}" must be ws:// or wss://`,
        );
    const nonNegative = (name: string, v: number) => {
      if (!Number.isFinite(v) || v < 0)
        throw new CliError(
          "SWITCHYARD_CLI_INVALID_OPTION",
          `SessionClient: ${name} must be a non-negative number`,
        );
      return v;
    };
    this.sessionId = options.sessionId;
    this.#o = {
      sessionId: options.sessionId,
      secret: options.secret,
      urls: [...options.urls],
      ...(options.caPem ? { caPem: options.caPem } : {}),
      ...(options.zeroMask !== undefined ? { zeroMask: options.zeroMask } : {}),
      connectTimeoutMs: nonNegative("connectTimeoutMs", options.connectTimeoutMs ?? 60_000),
      requestTimeoutMs: nonNegative("requestTimeoutMs", options.requestTimeoutMs ?? 30_000),
      pingIntervalMs: nonNegative("pingIntervalMs", options.pingIntervalMs ?? 15_000),
      highWaterBytes: nonNegative("highWaterBytes", options.highWaterBytes ?? 4 * 1024 * 1024),
      dialTimeoutMs: nonNegative("dialTimeoutMs", options.dialTimeoutMs ?? 10_000),
      notFoundGraceMs: nonNegative("notFoundGraceMs", options.notFoundGraceMs ?? 10_000),
    };
    this.#backoff = resolveBackoff(options.backoff);
    // Without a listener an 'error'-like event would be lost silently; `lost` is the
    // one callers must handle, and it is also kept in `lostError`.
  }

  get state(): State {
    return this.#state;
  }

  /** The router URL in use. */
  get url(): string {
    return this.#url;
  }

  /** Why the session was lost, once it was. */
  get lostError(): CliError | undefined {
    return this.#lostError;
  }

  get subscriptions(): Subscription[] {
    return [...this.#subscriptions.values()];
  }

  /**
   * Connects (Hello included). Routers answering 503 (session still being set up) or not
   * reachable are retried until connectTimeoutMs; 404/401 fail at once.
   */
  async connect(signal?: AbortSignal): Promise<void> {
    if (this.#state !== "idle")
      throw new CliError("SWITCHYARD_CLI_INVALID_OPTION", "connect() was already called");
    const started = Date.now();
    const deadline = started + this.#o.connectTimeoutMs;
    let lastError: unknown;
    for (let attempt = 0; ; attempt++) {
      const url = this.#o.urls[attempt % this.#o.urls.length]!;
      try {
        const d = await dialRouter(url, this.#o.secret, this.#dialOptions());
        this.#attach(d, url, attempt % this.#o.urls.length);
        this.#startTimers();
        return;
      } catch (err) {
        // A session that just became Ready may not have reached every router's table yet:
        // a 404 right after creation is retried for a short while, later it is final.
        const early =
          (err as CliError).code === "SWITCHYARD_CLI_SESSION_NOT_FOUND" &&
          Date.now() - started < this.#o.notFoundGraceMs;
        if (isFatalDialError(err) && !early) throw err;
        lastError = err;
      }
      const wait = Math.min(
        Math.max(
          (lastError as RouterDialError).retryAfterMs ?? 0,
          Math.min(250 * 2 ** Math.min(attempt, 10), this.#backoff.maxMs),
        ),
        deadline - Date.now(),
      );
      if (wait <= 0 || signal?.aborted) break;
      await new Promise((r) => setTimeout(r, wait));
    }
    throw new CliError(
      "SWITCHYARD_CLI_ROUTER_UNAVAILABLE",
      `could not connect to session ${this.sessionId} within ${Math.round(this.#o.connectTimeoutMs / 1000)} s: ` +
        `${(lastError as Error)?.message ?? "no router answered"}. Check the router endpoint (--router) and \`switchyard status\`.`,
      { cause: lastError },
    );
  }

  /** Ends the session's connection (does not delete the session object). */
  close(reason = "client closed"): void {
    if (this.#state === "closed") return;
    const ws = this.#ws;
    if (ws && ws.readyState === ws.OPEN) {
      ws.send(encodeFrame({ family: F.CONTROL, kind: pb.ControlKind.CLOSE }, pb.CloseSchema, { reason }));
      ws.close(1000, "client closed");
    }
    this.#state = "closed";
    this.#stopTimers();
    this.#failInFlight(new CliError("SWITCHYARD_CLI_CLOSED", "the session client was closed"));
    this.#subscriptions.clear();
  }

  // ---- FrameSink ----

  send(frame: Buffer): boolean {
    const ws = this.#ws;
    if (this.#state !== "open" || !ws || ws.readyState !== ws.OPEN) return false;
    coalesceWrites(this.#socket);
    ws.send(frame, (err) => {
      if (!err) this.#flushWritable();
    });
    return true;
  }

  whenWritable(cb: () => void): void {
    const ws = this.#ws;
    if (!ws || ws.bufferedAmount < this.#o.highWaterBytes) return cb();
    this.#writableWaiters.push(cb);
  }

  #flushWritable(): void {
    if (this.#writableWaiters.length === 0) return;
    if ((this.#ws?.bufferedAmount ?? 0) >= this.#o.highWaterBytes) return;
    for (const cb of this.#writableWaiters.splice(0)) cb();
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
    if (this.#state !== "open") throw this.#notConnected();
    const requestId = this.#nextRequestId;
    this.#nextRequestId = this.#nextRequestId >= 0xfffffff0 ? 2 : this.#nextRequestId + 1;
    const reply = new Promise<Buffer>((resolve, reject) =>
      this.#pending.set(requestId, {
        family,
        deadline: Date.now() + this.#o.requestTimeoutMs,
        resolve,
        reject,
      }),
    );
    if (!this.send(encodeFrame({ family, kind, requestId, connectionId }, schema, init))) {
      this.#pending.delete(requestId);
      throw this.#notConnected();
    }
    return reply;
  }

  async #ask<S extends DescMessage, R extends DescMessage>(
    family: number,
    kind: number,
    schema: S,
    init: MessageInitShape<S>,
    replySchema: R,
    connectionId = 0,
  ): Promise<MessageShape<R>> {
    const frame = await this.request(family, kind, schema, init, connectionId);
    return decodePayload(frame, replySchema);
  }

  /** The Default cluster's environment of the target (include/exclude are shell-style patterns). */
  async env(opts: EnvOptions = {}): Promise<Record<string, string>> {
    const r = await this.#ask(
      F.ENV,
      pb.EnvKind.GET,
      pb.EnvGetSchema,
      { names: opts.names ?? [], include: opts.include ?? [], exclude: opts.exclude ?? [] },
      pb.EnvResultSchema,
    );
    if (r.error)
      throw new RemoteError("SWITCHYARD_ENV_FAILED", `reading the target's environment failed: ${r.error}`);
    return { ...r.vars };
  }

  async #file(kind: number, schema: DescMessage, init: object, what: string): Promise<pb.FileResult> {
    const r = await this.#ask(
      F.FILE,
      kind,
      schema,
      init as MessageInitShape<DescMessage>,
      pb.FileResultSchema,
    );
    if (r.error) throw new RemoteError(r.error, `${what}: ${r.error}${r.message ? ` (${r.message})` : ""}`);
    return r;
  }

  /** Opens a remote file read-only; returns its handle. */
  async openFile(path: string): Promise<bigint> {
    const r = await this.#file(pb.FileKind.OPEN, pb.FileOpenSchema, { path }, `cannot open ${path}`);
    if (r.result.case !== "handle")
      throw new RemoteError("EIO", `open ${path}: the agent returned no handle`);
    return r.result.value;
  }

  async readFile(handle: bigint, offset: number, length: number): Promise<Buffer> {
    const r = await this.#file(
      pb.FileKind.READ,
      pb.FileReadSchema,
      { handle, offset: BigInt(offset), length },
      `cannot read handle ${handle}`,
    );
    return r.result.case === "data" ? Buffer.from(r.result.value) : Buffer.alloc(0);
  }

  async closeFile(handle: bigint): Promise<void> {
    await this.#file(pb.FileKind.CLOSE, pb.FileCloseSchema, { handle }, `cannot close handle ${handle}`);
  }

  async stat(path: string): Promise<FileStatInfo> {
    const r = await this.#file(pb.FileKind.STAT, pb.FileStatSchema, { path }, `cannot stat ${path}`);
    if (r.result.case !== "stat") throw new RemoteError("EIO", `stat ${path}: the agent returned no stat`);
    const s = r.result.value;
    return { size: Number(s.size), mode: s.mode, modifiedUnixMs: Number(s.modifiedUnixMs), isDir: s.isDir };
  }

  async readDir(path: string): Promise<Array<{ name: string; isDir: boolean }>> {
    const r = await this.#file(pb.FileKind.READ_DIR, pb.FileReadDirSchema, { path }, `cannot list ${path}`);
    if (r.result.case !== "entries") return [];
    return r.result.value.entries.map((e) => ({ name: e.name, isDir: e.isDir }));
  }

  /** Reads a whole remote file (open, read until a short read, close). */
  async readWholeFile(path: string, chunkBytes = 256 * 1024): Promise<Buffer> {
    const handle = await this.openFile(path);
    const parts: Buffer[] = [];
    try {
      for (let offset = 0; ;) {
        const chunk = await this.readFile(handle, offset, chunkBytes);
        if (chunk.length > 0) parts.push(chunk);
        offset += chunk.length;
        if (chunk.length < chunkBytes) break;
      }
    } finally {
      await this.closeFile(handle).catch(() => {});
    }
    return Buffer.concat(parts);
  }

  /** Resolves a host name with the Default cluster's resolver. */
  async lookup(host: string, ipFamily: 0 | 4 | 6 = 0): Promise<Array<{ address: string; family: number }>> {
    const r = await this.#ask(
      F.DNS,
      pb.DnsKind.GETADDRINFO,
      pb.DnsGetAddrInfoSchema,
      { host, ipFamily },
      pb.DnsResultSchema,
    );
    if (r.error) throw new RemoteError(r.error, `cannot resolve ${host}: ${r.error}`);
    return r.addresses.map((a) => ({ address: a.address, family: a.ipFamily }));
  }

  async reverse(address: string): Promise<string[]> {
    const r = await this.#ask(
      F.DNS,
      pb.DnsKind.REVERSE,
      pb.DnsReverseSchema,
      { address },
      pb.DnsResultSchema,
    );
    if (r.error) throw new RemoteError(r.error, `cannot reverse-resolve ${address}: ${r.error}`);
    return r.hostnames;
  }

  /** Protocol ping to every cluster; the merged pong's per-cluster health. */
  async ping(): Promise<PingResult> {
    const started = process.hrtime.bigint();
    const pong = await this.#ask(
      F.PING,
      pb.PingKind.PING,
      pb.PingSchema,
      { sentAtMicros: BigInt(Date.now()) * 1000n },
      pb.PongSchema,
    );
    const rttMs = Number(process.hrtime.bigint() - started) / 1e6;
    const stateName = (s: pb.HealthState): ClusterHealthInfo["state"] =>
      s === pb.HealthState.OK
        ? "ok"
        : s === pb.HealthState.DOWN
          ? "down"
          : s === pb.HealthState.TIMEOUT
            ? "timeout"
            : "unknown";
    this.health = pong.clusters.map((c) => ({
      cluster: c.cluster,
      state: stateName(c.state),
      rttMs: c.rttMicros / 1000,
      error: c.error,
    }));
    return { rttMs, clusters: this.health };
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
  async subscribe(port: number, mode: TrafficMode, filter?: HttpFilterSpec): Promise<Subscription> {
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      throw new CliError("SWITCHYARD_CLI_INVALID_OPTION", `port ${port} is not a TCP port (1-65535)`);
    if (filter && mode === "mirror")
      throw new CliError("SWITCHYARD_CLI_INVALID_OPTION", "HTTP filters apply to steal only, not to mirror");
    const sub: Subscription = { id: this.#nextSubscriptionId++, port, mode, ...(filter ? { filter } : {}) };
    await this.#sendSubscribe(sub);
    this.#subscriptions.set(sub.id, sub);
    return sub;
  }

  async #sendSubscribe(sub: Subscription): Promise<void> {
    const frame = await this.request(
      F.SUBSCRIPTION,
      sub.mode === "mirror" ? pb.SubscriptionKind.MIRROR : pb.SubscriptionKind.STEAL,
      pb.SubscribeSchema,
      { port: sub.port, ...(sub.filter ? { httpFilter: toProtoFilter(sub.filter) } : {}) },
      sub.id,
    );
    const r = decodePayload(frame, pb.SubscriptionResultSchema);
    if (!r.ok || (frame[2]! & FLAG_ERROR) !== 0)
      throw new RemoteError(
        "SWITCHYARD_SUBSCRIPTION_REFUSED",
        `${sub.mode} of port ${sub.port} was refused${r.refusedClusters.length ? ` by ${r.refusedClusters.join(", ")}` : ""}: ${r.error || "no reason given"}`,
        r.refusedClusters.join(","),
      );
  }

  async unsubscribe(sub: Subscription): Promise<void> {
    this.#subscriptions.delete(sub.id);
    await this.request(
      F.SUBSCRIPTION,
      pb.SubscriptionKind.UNSUBSCRIBE,
      pb.UnsubscribeSchema,
      { port: sub.port },
      sub.id,
    );
  }

  // ---- outgoing ----

  /** Opens a TCP connection from the Default cluster (the agent resolves host names). */
  async connectTcp(host: string, port: number): Promise<OutgoingTcpStream> {
    const id = this.#newStreamId();
    const stream = new OutgoingTcpStream(id, this, (gone) => this.#tcp.delete(gone));
    this.#tcp.set(id, stream);
    try {
      const r = await this.#ask(
        F.OUTGOING_TCP,
        pb.OutgoingKind.CONNECT,
        pb.TcpConnectSchema,
        { host, port },
        pb.ConnectResultSchema,
        id,
      );
      if (r.error)
        throw new RemoteError("SWITCHYARD_CONNECT_FAILED", `cannot connect to ${host}:${port}: ${r.error}`);
      return stream;
    } catch (err) {
      this.#tcp.delete(id);
      stream.remoteClose("");
      throw err;
    }
  }

  /** Binds a UDP socket on the Default cluster, "connected" to host:port. */
  async bindUdp(host: string, port: number): Promise<UdpChannel> {
    const id = this.#newStreamId();
    const ch = new UdpChannel(id, this, (gone) => this.#udp.delete(gone));
    this.#udp.set(id, ch);
    try {
      const r = await this.#ask(
        F.OUTGOING_UDP,
        pb.OutgoingKind.CONNECT,
        pb.UdpBindSchema,
        { host, port },
        pb.ConnectResultSchema,
        id,
      );
      if (r.error)
        throw new RemoteError("SWITCHYARD_CONNECT_FAILED", `cannot bind UDP to ${host}:${port}: ${r.error}`);
      return ch;
    } catch (err) {
      this.#udp.delete(id);
      ch.remoteClose("");
      throw err;
    }
  }

  #newStreamId(): number {
    for (;;) {
      const id = this.#nextStreamId;
      this.#nextStreamId = this.#nextStreamId >= 0x7fffffff ? 1 : this.#nextStreamId + 1;
      if (!this.#tcp.has(id) && !this.#udp.has(id)) return id;
    }
  }

  // ---- connection management ----

  #dialOptions() {
    return {
      timeoutMs: this.#o.dialTimeoutMs,
      ...(this.#o.caPem ? { caPem: this.#o.caPem } : {}),
      ...(this.#o.zeroMask !== undefined ? { zeroMask: this.#o.zeroMask } : {}),
    };
  }

  #attach(d: DialedRouter, url: string, index: number): void {
    this.#ws = d.ws;
    this.#socket = d.socket;
    this.#url = url;
    this.#urlIndex = index;
    this.#state = "open";
    const ws = d.ws;
    ws.on("error", () => {
      // 'close' follows and drives the reconnect.
    });
    ws.on("close", () => {
      if (this.#ws === ws) this.#onDisconnect();
    });
    d.takeOver((data) => this.#onFrame(data));
  }

  #startTimers(): void {
    this.#sweep = setInterval(() => this.#sweepPending(), 500);
    this.#sweep.unref();
    if (this.#o.pingIntervalMs > 0) {
      this.#pinger = setInterval(() => {
        if (this.#state === "open") this.ping().catch(() => {});
      }, this.#o.pingIntervalMs);
      this.#pinger.unref();
    }
  }

  #stopTimers(): void {
    clearInterval(this.#sweep);
    clearInterval(this.#pinger);
  }

  #sweepPending(): void {
    const now = Date.now();
    for (const [id, p] of this.#pending)
      if (p.deadline <= now) {
        this.#pending.delete(id);
        p.reject(
          new CliError(
            "SWITCHYARD_CLI_REQUEST_TIMEOUT",
            `no answer to a ${pb.FrameFamily[p.family] ?? p.family} request within ${this.#o.requestTimeoutMs} ms; ` +
              "the Default cluster may be unreachable (see `switchyard status`)",
          ),
        );
      }
  }

  #notConnected(): CliError {
    if (this.#state === "lost" && this.#lostError) return this.#lostError;
    return new CliError(
      "SWITCHYARD_CLI_DISCONNECTED",
      this.#state === "reconnecting"
        ? `session ${this.sessionId} is reconnecting to a router; retry in a moment`
        : `session ${this.sessionId} is not connected`,
    );
  }

  #failInFlight(err: CliError): void {
    for (const [id, p] of this.#pending) {
      this.#pending.delete(id);
      p.reject(err);
    }
    for (const s of [...this.#tcp.values()]) s.destroy(err);
    for (const u of [...this.#udp.values()]) u.remoteClose(err.message);
    for (const c of [...this.#incoming.values()]) c.destroy();
    this.#incoming.clear();
    this.#undecided.clear();
    for (const cb of this.#writableWaiters.splice(0)) cb();
  }

  #onDisconnect(): void {
    if (this.#state !== "open") return;
    this.#state = "reconnecting";
    this.#ws = undefined;
    this.#failInFlight(
      new CliError(
        "SWITCHYARD_CLI_DISCONNECTED",
        `the connection to router ${this.#url} was lost; reconnecting`,
      ),
    );
    const urls = this.#o.urls;
    let tried = "";
    retryWithBackoff(this.#backoff, {
      attempt: async (n) => {
        // Prefer another router first: the one we lost is likely the one that died.
        const index = (this.#urlIndex + 1 + n) % urls.length;
        tried = urls[index]!;
        const d = await dialRouter(tried, this.#o.secret, this.#dialOptions());
        if (this.#state !== "reconnecting") {
          d.ws.terminate();
          throw new CliError("SWITCHYARD_CLI_CLOSED", "closed while reconnecting");
        }
        this.#attach(d, tried, index);
        return d;
      },
      isFatal: (err) => isFatalDialError(err) || (err as CliError).code === "SWITCHYARD_CLI_CLOSED",
      suggestedDelayMs: (err) => (err instanceof RouterDialError ? err.retryAfterMs : undefined),
      onRetry: ({ attempt, delayMs, error }) =>
        this.emit("reconnecting", {
          attempt: attempt + 1,
          delayMs,
          error: (error as Error | undefined)?.message ?? "connection lost",
        }),
    }).then(
      async () => {
        const refused: string[] = [];
        let resubscribed = 0;
        for (const sub of this.#subscriptions.values()) {
          try {
            await this.#sendSubscribe(sub);
            resubscribed++;
          } catch (err) {
            refused.push(`${sub.mode} port ${sub.port}: ${(err as Error).message}`);
          }
        }
        this.emit("reconnected", { url: tried, resubscribed, refused });
      },
      (err: unknown) => {
        if (this.#state === "closed") return;
        const gone = err instanceof CliError && err.code === "SWITCHYARD_CLI_SESSION_NOT_FOUND";
        this.#lose(
          new CliError(
            "SWITCHYARD_CLI_SESSION_LOST",
            gone
              ? `session ${this.sessionId} is gone: ${(err as Error).message}`
              : `lost session ${this.sessionId}: no router could be reached after ${this.#backoff.maxAttempts} attempts (last error: ${(err as Error)?.message ?? "unknown"})`,
            { cause: err },
          ),
        );
      },
    );
  }

  #lose(err: CliError): void {
    if (this.#state === "lost" || this.#state === "closed") return;
    this.#state = "lost";
    this.#lostError = err;
    this.#stopTimers();
    this.#failInFlight(err);
    this.emit("lost", err);
  }

  // ---- incoming frames ----

  #onFrame(data: Buffer): void {
    let h;
    try {
      h = readHeader(data);
    } catch (err) {
      this.emit(
        "remoteError",
        new RemoteError((err as CliError).code, `router sent a bad frame: ${(err as Error).message}`),
      );
      return;
    }
    try {
      this.#dispatch(data, h.family, h.kind, h.requestId, h.connectionId);
    } catch (err) {
      this.emit(
        "remoteError",
        new RemoteError(
          (err as { code?: string }).code ?? "SWITCHYARD_FRAME_BAD_PAYLOAD",
          (err as Error).message,
        ),
      );
    }
  }

  #settle(requestId: number, family: number, data: Buffer): boolean {
    const p = this.#pending.get(requestId);
    if (!p || p.family !== family) return false;
    this.#pending.delete(requestId);
    p.resolve(data);
    return true;
  }

  #dispatch(data: Buffer, family: number, kind: number, requestId: number, connectionId: number): void {
    switch (family) {
      case F.CONTROL:
        return this.#control(data, kind, requestId);
      case F.PING:
      case F.ENV:
      case F.FILE:
      case F.DNS:
      case F.SUBSCRIPTION:
        this.#settle(requestId, family, data);
        return;
      case F.OUTGOING_TCP: {
        if (kind === pb.OutgoingKind.CONNECT_RESULT) return void this.#settle(requestId, family, data);
        const s = this.#tcp.get(connectionId);
        if (!s) return;
        if (kind === pb.OutgoingKind.DATA) s.remoteData(decodeStreamData(data));
        else if (kind === pb.OutgoingKind.CLOSE) {
          this.#tcp.delete(connectionId);
          s.remoteClose(decodePayload(data, pb.StreamCloseSchema).error);
        }
        return;
      }
      case F.OUTGOING_UDP: {
        if (kind === pb.OutgoingKind.CONNECT_RESULT) return void this.#settle(requestId, family, data);
        const u = this.#udp.get(connectionId);
        if (!u) return;
        if (kind === pb.OutgoingKind.DATA) u.remoteDatagram(decodePayload(data, pb.UdpDatagramSchema));
        else if (kind === pb.OutgoingKind.CLOSE) {
          this.#udp.delete(connectionId);
          u.remoteClose(decodePayload(data, pb.StreamCloseSchema).error);
        }
        return;
      }
      case F.TRAFFIC:
        return this.#traffic(data, kind, requestId, connectionId);
    }
  }

  #control(data: Buffer, kind: number, requestId: number): void {
    if (kind === pb.ControlKind.ERROR) {
      const e = decodePayload(data, pb.ProtocolErrorSchema);
      const err = new RemoteError(
        e.code,
        `${e.cluster ? `${e.cluster}: ` : ""}${e.code}: ${e.message}`,
        e.cluster,
      );
      const p = requestId ? this.#pending.get(requestId) : undefined;
      if (p) {
        this.#pending.delete(requestId);
        p.reject(err);
      } else this.emit("remoteError", err);
      return;
    }
    if (kind === pb.ControlKind.UPSTREAM_STATUS) {
      const s = decodePayload(data, pb.UpstreamStatusSchema);
      const ev: UpstreamEvent = {
        cluster: s.cluster,
        up: s.state === pb.UpstreamState.UP,
        isDefault: s.isDefault,
        error: s.error,
        retryInMs: s.retryInMs,
        connectionsClosed: s.connectionsClosed,
      };
      this.upstreams.set(s.cluster, ev);
      this.emit("upstream", ev);
      return;
    }
    if (kind === pb.ControlKind.LOG) {
      const l = decodePayload(data, pb.LogSchema);
      this.emit("log", { level: l.level, message: l.message });
    }
  }

  #traffic(data: Buffer, kind: number, requestId: number, id: number): void {
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
        const sub = this.#subscriptions.get(n.subscriptionId);
        if (info.mode === "steal" && sub?.filter) this.#undecided.set(id, info);
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
          Buffer.from(r.body),
          this,
        );
        if (this.listenerCount("httpRequest") === 0)
          req.respond({ status: 502, body: Buffer.from("no local handler for stolen HTTP requests\n") });
        else this.emit("httpRequest", req);
        return;
      }
      case pb.TrafficKind.DATA: {
        const undecided = this.#undecided.get(id);
        if (undecided) {
          this.#undecided.delete(id);
          this.#openIncoming(undecided);
        }
        this.#incoming.get(id)?.remoteData(decodeStreamData(data));
        return;
      }
      case pb.TrafficKind.CLOSE:
        this.#undecided.delete(id);
        this.#incoming.get(id)?.remoteClose();
        this.#incoming.delete(id);
        return;
    }
  }

  #openIncoming(info: IncomingConnectionInfo): void {
    const c = new IncomingConnection(info, this, (gone) => this.#incoming.delete(gone));
    this.#incoming.set(info.id, c);
    if (this.listenerCount("connection") === 0) c.destroy();
    else this.emit("connection", c);
  }
}
