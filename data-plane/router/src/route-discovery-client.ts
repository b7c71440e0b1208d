// The router's end of RouteDiscovery: keeps one gRPC stream to the control plane open,
// applies pushed routing tables to a RouteSink, ACKs what applied and NACKs what did not,
// and reports which sessions have a live client. When the control plane is away the sink
// is left alone (the router keeps serving its last good table); on reconnect the client
// resends the version it has, so the control plane sends only what changed — or a full
// snapshot (fullResync) when it does not know that version.
//
// A control plane bounds connection age (GOAWAY, see route-discovery-server.ts) so streams
// rebalance across replicas. The client sees its connection leave READY while the stream
// still runs, ends that stream and opens the next one at once, on a new connection: no
// backoff, no error recorded, the table served throughout.
import { create } from "@bufbuild/protobuf";
import {
  connectivityState,
  credentials as channelCredentials,
  Metadata,
  status as Status,
  type ChannelCredentials,
  type Client,
  type ClientDuplexStream,
} from "@grpc/grpc-js";
import { pino, type Logger } from "pino";
import { sleep } from "../../../lib/abortable-sleep.js";
import { Backoff, type BackoffPolicy } from "../../../lib/backoff.js";
import { OptionError, positive } from "../../../lib/option-error.js";
import { SessionRouteSchema, type SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import {
  RouteDiscoveryGrpcClient,
  routeDiscoveryTarget,
  statusName,
  type DiscoveryRequest,
  type DiscoveryResponse__Output,
} from "../../../proto/route-discovery-service.js";

export type { SessionRoute };

/**
 * Reconnect delays: exponential with jitter (delay × [0.8, 1.2]), so a fleet of routers
 * that lost the control plane at the same moment does not reconnect in lockstep.
 */
export const RECONNECT_BACKOFF: Required<BackoffPolicy> = {
  initialMs: 250,
  maxMs: 10_000,
  multiplier: 2,
  jitter: 0.2,
};

/** One push from the control plane, as the routing table must apply it. */
export interface RouteDelta {
  /** True: `upserts` is the complete table; drop every session not in it. */
  fullResync: boolean;
  upserts: SessionRoute[];
  removes: string[];
  version: string;
}

/** Where pushed tables go (the router's routing table). Throw to NACK; the message becomes the error detail. */
export interface RouteSink {
  apply(delta: RouteDelta): void;
}

export interface RouteDiscoveryClientCredentials {
  /** ServiceAccount token, read at every (re)connect so a rotated token is picked up. */
  token?: () => string | Promise<string>;
  /** CA to verify the control plane (required for https://), and an optional client certificate for mTLS. */
  tls?: { ca: string; cert?: string; key?: string };
  /** Allow an http:// URL (embedded environment only); must be set explicitly. */
  plaintext?: boolean;
}

export interface RouteDiscoveryClientOptions {
  /** https://host:port of the control plane's RouteDiscovery service. */
  url: string;
  /** Stable id of this router (e.g. its pod name). */
  routerId: string;
  sink: RouteSink;
  /** Session ids that have a live client on this router now. */
  liveSessions: () => string[];
  credentials: RouteDiscoveryClientCredentials;
  /** Reconnect delays; each field defaults to RECONNECT_BACKOFF's. */
  backoff?: Partial<BackoffPolicy>;
  /** Period of live-session reports, ms (default 5 000; heartbeats are written every 10 s). */
  liveSessionsIntervalMs?: number;
  /** HTTP/2 PING period to detect a dead control plane on an idle stream, ms (default 15 000). */
  keepaliveIntervalMs?: number;
  /** A stream open this long without error resets the backoff, ms (default 5 000). */
  stableAfterMs?: number;
  /**
   * A connection not established (TCP, TLS, HTTP/2) within this is abandoned and the next
   * attempt dials anew, ms (default 5 000). Through a Service, a dial may reach a control-plane
   * pod that is gone (an endpoint not yet removed): its SYNs go unanswered for a minute or more.
   */
  connectTimeoutMs?: number;
  /** Called once for every push NACKed, with the error detail sent (the router counts them). */
  onRejected?: (detail: string) => void;
  logger?: Logger;
}

export interface RouteDiscoveryClientStatus {
  /** A stream is open (it may be idle: an up-to-date router receives nothing). */
  streaming: boolean;
  /** Version of the last applied push; "" before the first. */
  version: string;
  streamsOpened: number;
  pushesApplied: number;
  pushesRejected: number;
  /**
   * Streams ended because the control plane closed their connection gracefully (GOAWAY:
   * maximum connection age, or a replica draining) and reopened at once. Routine, not errors.
   */
  goawayReconnects: number;
  /** Why the last stream ended, if it failed (gRPC code name and message). */
  lastError: { code: string; message: string; at: Date } | undefined;
}

/** A PING unanswered this long means the control plane is gone, ms. */
const KEEPALIVE_TIMEOUT_MS = 15_000;

type DiscoveryCall = ClientDuplexStream<DiscoveryRequest, DiscoveryResponse__Output>;

export class RouteDiscoveryClient {
  private readonly opts: RouteDiscoveryClientOptions;
  private readonly keepaliveMs: number;
  private readonly target: string;
  private readonly backoff: Backoff;
  private readonly log: Logger;
  private readonly liveIntervalMs: number;
  private readonly stableAfterMs: number;
  private readonly connectTimeoutMs: number;
  private appliedVersion = "";
  private call: DiscoveryCall | undefined;
  private reportScheduled = false;
  private readonly stats = { streamsOpened: 0, pushesApplied: 0, pushesRejected: 0, goawayReconnects: 0 };
  private lastError: RouteDiscoveryClientStatus["lastError"];
  private running = false;

  constructor(opts: RouteDiscoveryClientOptions) {
    let url: URL;
    try {
      url = new URL(opts.url);
    } catch {
      throw new OptionError("url", `"${opts.url}" is not a URL; expected https://host:port`);
    }
    if (url.protocol === "https:") {
      if (!opts.credentials?.tls?.ca) {
        throw new OptionError("credentials.tls.ca", "required to verify the control plane over https");
      }
    } else if (url.protocol === "http:") {
      if (opts.credentials?.plaintext !== true) {
        throw new OptionError(
          "url",
          "http:// sends routing secrets in clear; use https:// or set credentials.plaintext: true explicitly",
        );
      }
    } else {
      throw new OptionError("url", `protocol ${url.protocol} unsupported; use https://`);
    }
    const tls = opts.credentials.tls;
    if (tls && (tls.cert === undefined) !== (tls.key === undefined)) {
      throw new OptionError("credentials.tls", "cert and key go together for mTLS");
    }
    if (!opts.credentials.token && !tls?.cert && opts.credentials.plaintext !== true) {
      throw new OptionError(
        "credentials",
        "give a ServiceAccount token or a client certificate: the control plane refuses anonymous routers",
      );
    }
    if (!opts.routerId) throw new OptionError("routerId", "required (e.g. the pod name)");
    if (typeof opts.sink?.apply !== "function") throw new OptionError("sink", "must have apply()");
    if (typeof opts.liveSessions !== "function") {
      throw new OptionError("liveSessions", "must be a function returning session ids");
    }
    this.liveIntervalMs = positive("liveSessionsIntervalMs", opts.liveSessionsIntervalMs, 5_000);
    this.stableAfterMs = positive("stableAfterMs", opts.stableAfterMs, 5_000);
    this.connectTimeoutMs = positive("connectTimeoutMs", opts.connectTimeoutMs, 5_000);
    const keepalive = positive("keepaliveIntervalMs", opts.keepaliveIntervalMs, 15_000);
    const b = opts.backoff ?? {};
    const d = RECONNECT_BACKOFF;
    this.backoff = new Backoff({
      initialMs: b.initialMs ?? d.initialMs,
      maxMs: b.maxMs ?? d.maxMs,
      multiplier: b.multiplier ?? d.multiplier,
      jitter: b.jitter ?? d.jitter,
    });
    this.opts = opts;
    this.log = (opts.logger ?? pino({ level: "silent" })).child({
      component: "route-discovery-client",
      routerId: opts.routerId,
    });
    this.keepaliveMs = keepalive;
    this.target = routeDiscoveryTarget(url);
  }

  /** TLS (or, explicitly, plaintext) credentials; built per connection so a bad PEM is a retried error. */
  private channelCredentials(): ChannelCredentials {
    const tls = this.opts.credentials.tls;
    if (!tls) return channelCredentials.createInsecure();
    return channelCredentials.createSsl(
      Buffer.from(tls.ca),
      tls.key !== undefined ? Buffer.from(tls.key) : null,
      tls.cert !== undefined ? Buffer.from(tls.cert) : null,
    );
  }

  /**
   * A fresh HTTP/2 connection per stream attempt (a local subchannel pool: grpc-js would
   * otherwise share one connection among clients of the same target): after UNAVAILABLE
   * (e.g. a replica that is not the leader) or GOAWAY the next attempt is balanced anew.
   */
  private connect(): InstanceType<typeof RouteDiscoveryGrpcClient> {
    return new RouteDiscoveryGrpcClient(this.target, this.channelCredentials(), {
      "grpc.use_local_subchannel_pool": 1,
      "grpc.keepalive_time_ms": this.keepaliveMs,
      "grpc.keepalive_timeout_ms": KEEPALIVE_TIMEOUT_MS,
      "grpc.keepalive_permit_without_calls": 1,
      // A full snapshot of a large table is one message; its size is the table's.
      "grpc.max_receive_message_length": -1,
    });
  }

  /** Resolves once `client`'s connection is established; rejects UNAVAILABLE after connectTimeoutMs. */
  private connected(
    client: InstanceType<typeof RouteDiscoveryGrpcClient>,
    signal: AbortSignal,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(new Error("stopped"));
      signal.addEventListener("abort", onAbort, { once: true });
      client.waitForReady(Date.now() + this.connectTimeoutMs, (err) => {
        signal.removeEventListener("abort", onAbort);
        if (!err) return resolve();
        const details = `no connection to ${this.target} within ${this.connectTimeoutMs} ms (${err.message}); dialling again`;
        reject(Object.assign(new Error(details), { code: Status.UNAVAILABLE, details }));
      });
    });
  }

  /** Version of the table last applied to the sink ("" before the first push). */
  version(): string {
    return this.appliedVersion;
  }

  status(): RouteDiscoveryClientStatus {
    return {
      streaming: this.call !== undefined,
      version: this.appliedVersion,
      ...this.stats,
      lastError: this.lastError,
    };
  }

  /** Tells the client the set of live sessions changed; a report goes out promptly (coalesced). */
  liveSessionsChanged(): void {
    if (this.reportScheduled || !this.call) return;
    this.reportScheduled = true;
    setImmediate(() => {
      this.reportScheduled = false;
      this.reportLive();
    });
  }

  /** Streams until `signal` aborts, reconnecting with backoff. Never clears the sink. */
  async start(signal: AbortSignal): Promise<void> {
    if (this.running) throw new Error("RouteDiscoveryClient.start() called twice");
    this.running = true;
    try {
      while (!signal.aborted) {
        const openedAt = Date.now();
        let outcome: StreamOutcome = { received: false, goaway: false };
        try {
          outcome = await this.runStream(signal);
          if (!signal.aborted && !outcome.goaway) {
            this.recordError({ code: Status.UNAVAILABLE, details: "control plane ended the stream" });
          }
        } catch (err) {
          if (signal.aborted) break;
          this.recordError(err);
        }
        if (signal.aborted) break;
        if (outcome.goaway) {
          this.stats.goawayReconnects++;
          this.backoff.reset();
          this.log.info(
            { version: this.appliedVersion },
            "control plane closed the connection; reopening the stream",
          );
          continue;
        }
        if (outcome.received || Date.now() - openedAt >= this.stableAfterMs) this.backoff.reset();
        const delay = this.backoff.next();
        this.log.warn(
          { code: this.lastError?.code, err: this.lastError?.message, delayMs: delay },
          "reconnecting",
        );
        await sleep(delay, signal);
      }
    } finally {
      this.running = false;
    }
  }

  /** One stream's life. */
  private async runStream(signal: AbortSignal): Promise<StreamOutcome> {
    const token = this.opts.credentials.token ? await this.opts.credentials.token() : undefined;
    const metadata = new Metadata();
    if (token !== undefined) metadata.set("authorization", `Bearer ${token}`);
    const client = this.connect();
    try {
      await this.connected(client, signal);
    } catch (err) {
      client.close();
      throw err;
    }
    const call: DiscoveryCall = client.streamRoutes(metadata);
    // Failures reach the loop below; a late one (a write racing the end) must not throw.
    call.on("error", () => undefined);
    let goaway = false;
    const stopWatching = onConnectionClosing(client.getChannel(), () => {
      goaway = true;
      call.cancel();
    });
    const onAbort = () => call.cancel();
    signal.addEventListener("abort", onAbort, { once: true });
    let received = false;
    let timer: NodeJS.Timeout | undefined;
    try {
      call.write({
        routerId: this.opts.routerId,
        versionInfo: this.appliedVersion,
        liveSessions: { sessionIds: this.opts.liveSessions() },
      });
      this.call = call;
      this.stats.streamsOpened++;
      timer = setInterval(() => this.reportLive(), this.liveIntervalMs);
      try {
        for await (const res of call as AsyncIterable<DiscoveryResponse__Output>) {
          received = true;
          this.backoff.reset();
          send(call, this.apply(res));
        }
      } catch (err) {
        // Routine only when our own cancel at GOAWAY ended it; a status the stream got
        // first (shutdown, a dropped connection) is an error even if GOAWAY came too.
        if (!(goaway && isStatus(err) && err.code === Status.CANCELLED)) throw err;
      }
      return { received, goaway };
    } finally {
      stopWatching();
      clearInterval(timer);
      if (this.call === call) this.call = undefined;
      signal.removeEventListener("abort", onAbort);
      call.cancel();
      client.close();
    }
  }

  /** Applies one push to the sink and returns its ACK or NACK. */
  private apply(res: DiscoveryResponse__Output): DiscoveryRequest {
    const nack = (message: string): DiscoveryRequest => {
      this.stats.pushesRejected++;
      const detail = message.slice(0, 1024) || "rejected";
      // What a control plane sent may be anything: the log line stays bounded.
      this.log.warn(
        { version: res.versionInfo.slice(0, 256), nonce: res.nonce.slice(0, 64), err: detail },
        "routing push rejected (NACK)",
      );
      this.opts.onRejected?.(detail);
      return { versionInfo: this.appliedVersion, responseNonce: res.nonce, errorDetail: { message: detail } };
    };
    if (res.versionInfo === "") return nack("push carries no version_info");
    if (res.nonce === "") return nack("push carries no nonce");
    try {
      this.opts.sink.apply({
        fullResync: res.fullSnapshot,
        upserts: res.upserts.map((u) => create(SessionRouteSchema, u)),
        removes: res.removes,
        version: res.versionInfo,
      });
    } catch (err) {
      return nack(err instanceof Error ? err.message : String(err));
    }
    this.appliedVersion = res.versionInfo;
    this.stats.pushesApplied++;
    return { versionInfo: res.versionInfo, responseNonce: res.nonce };
  }

  private reportLive(): void {
    const call = this.call;
    if (!call) return;
    let ids: string[];
    try {
      ids = this.opts.liveSessions();
    } catch (err) {
      this.log.error({ err }, "liveSessions() threw; report skipped");
      return;
    }
    send(call, { versionInfo: this.appliedVersion, liveSessions: { sessionIds: ids } });
  }

  private recordError(err: unknown): void {
    // A failed call rejects with a grpc-js ServiceError: its `details` are the peer's message.
    this.lastError = isStatus(err)
      ? { code: statusName(err.code), message: err.details, at: new Date() }
      : { code: "Unknown", message: err instanceof Error ? err.message : String(err), at: new Date() };
  }
}

interface StreamOutcome {
  /** Any response arrived. */
  received: boolean;
  /** The control plane closed the connection gracefully while the stream was healthy. */
  goaway: boolean;
}

function isStatus(v: unknown): v is { code: number; details: string } {
  const s = v as { code?: unknown; details?: unknown } | null;
  return typeof s === "object" && s !== null && typeof s.code === "number" && typeof s.details === "string";
}

/** Writes unless the stream has already ended (a report timer can race the end). */
function send(call: DiscoveryCall, req: DiscoveryRequest): void {
  if (!call.writableEnded && !call.destroyed) call.write(req);
}

/**
 * Calls `onClosing` once when the channel leaves READY after reaching it: the server sent
 * GOAWAY (maximum connection age, draining) and new calls would need a new connection,
 * while the open stream may go on until the server's grace ends. A connection that simply
 * drops leaves READY too, but its stream then ends with a status of its own, which the
 * caller records as an error. Returns a function that stops watching.
 */
function onConnectionClosing(channel: ReturnType<Client["getChannel"]>, onClosing: () => void): () => void {
  let stopped = false;
  // The stream starts on an established connection (`connected`): READY from the start.
  let wasReady = channel.getConnectivityState(false) === connectivityState.READY;
  const watch = (from: connectivityState): void => {
    if (stopped) return;
    channel.watchConnectivityState(from, Infinity, () => {
      if (stopped) return;
      const now = channel.getConnectivityState(false);
      if (wasReady && now !== connectivityState.READY) {
        stopped = true;
        onClosing();
        return;
      }
      if (now === connectivityState.READY) wasReady = true;
      watch(now);
    });
  };
  watch(channel.getConnectivityState(false));
  return () => {
    stopped = true;
  };
}
