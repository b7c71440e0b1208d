// The router's end of RouteDiscovery: keeps one gRPC stream to the control plane open,
// applies pushed routing tables to a RouteSink, ACKs what applied and NACKs what did not,
// and reports which sessions have a live client. When the control plane is away the sink
// is left alone (the router keeps serving its last good table); on reconnect the client
// resends the version it has, so the control plane sends only what changed — or a full
// snapshot (fullResync) when it does not know that version.
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { pino, type Logger } from "pino";
import { sleep } from "../../../lib/abortable-sleep.js";
import { AsyncQueue } from "../../../lib/async-queue.js";
import { Backoff, type BackoffPolicy } from "../../../lib/backoff.js";
import { OptionError, positive } from "../../../lib/option-error.js";
import {
  DiscoveryRequestSchema,
  RouteDiscovery,
  type DiscoveryRequest,
  type DiscoveryResponse,
  type SessionRoute,
} from "../../../proto/gen/route_discovery_pb.js";

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
  /** Why the last stream ended, if it failed (gRPC code name and message). */
  lastError: { code: string; message: string; at: Date } | undefined;
}

export class RouteDiscoveryClient {
  private readonly opts: RouteDiscoveryClientOptions;
  private readonly keepaliveMs: number;
  private readonly tlsOptions: { ca?: string; cert?: string; key?: string };
  private readonly backoff: Backoff;
  private readonly log: Logger;
  private readonly liveIntervalMs: number;
  private readonly stableAfterMs: number;
  private appliedVersion = "";
  private queue: AsyncQueue<DiscoveryRequest> | undefined;
  private reportScheduled = false;
  private readonly stats = { streamsOpened: 0, pushesApplied: 0, pushesRejected: 0 };
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
    this.tlsOptions = tls ? { ca: tls.ca, ...(tls.cert ? { cert: tls.cert, key: tls.key } : {}) } : {};
  }

  /**
   * A fresh HTTP/2 connection per stream attempt: after UNAVAILABLE (e.g. a replica that
   * is not the leader) the next attempt is balanced anew instead of reusing that replica.
   */
  private connect(): { client: Client<typeof RouteDiscovery>; close: () => void } {
    const sessionManager = new Http2SessionManager(
      this.opts.url,
      { pingIntervalMs: this.keepaliveMs },
      this.tlsOptions,
    );
    const transport = createGrpcTransport({ baseUrl: this.opts.url, sessionManager });
    return { client: createClient(RouteDiscovery, transport), close: () => sessionManager.abort() };
  }

  /** Version of the table last applied to the sink ("" before the first push). */
  version(): string {
    return this.appliedVersion;
  }

  status(): RouteDiscoveryClientStatus {
    return {
      streaming: this.queue !== undefined,
      version: this.appliedVersion,
      ...this.stats,
      lastError: this.lastError,
    };
  }

  /** Tells the client the set of live sessions changed; a report goes out promptly (coalesced). */
  liveSessionsChanged(): void {
    if (this.reportScheduled || !this.queue) return;
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
        let received = false;
        try {
          received = await this.runStream(signal);
          if (!signal.aborted)
            this.recordError(new ConnectError("control plane ended the stream", Code.Unavailable));
        } catch (err) {
          if (signal.aborted) break;
          this.recordError(err);
        }
        if (signal.aborted) break;
        if (received || Date.now() - openedAt >= this.stableAfterMs) this.backoff.reset();
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

  /** One stream's life; resolves true if any response arrived. */
  private async runStream(signal: AbortSignal): Promise<boolean> {
    const call = new AbortController();
    const onAbort = () => call.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    const queue = new AsyncQueue<DiscoveryRequest>();
    let received = false;
    let timer: NodeJS.Timeout | undefined;
    const conn = this.connect();
    try {
      const token = this.opts.credentials.token ? await this.opts.credentials.token() : undefined;
      queue.push(
        create(DiscoveryRequestSchema, {
          routerId: this.opts.routerId,
          versionInfo: this.appliedVersion,
          liveSessions: { sessionIds: this.opts.liveSessions() },
        }),
      );
      this.queue = queue;
      this.stats.streamsOpened++;
      timer = setInterval(() => this.reportLive(), this.liveIntervalMs);
      const responses = conn.client.streamRoutes(queue, {
        signal: call.signal,
        ...(token !== undefined ? { headers: { authorization: `Bearer ${token}` } } : {}),
      });
      for await (const res of responses) {
        received = true;
        this.backoff.reset();
        queue.push(this.apply(res));
      }
      return received;
    } finally {
      clearInterval(timer);
      if (this.queue === queue) this.queue = undefined;
      queue.close();
      signal.removeEventListener("abort", onAbort);
      call.abort();
      conn.close();
    }
  }

  /** Applies one push to the sink and returns its ACK or NACK. */
  private apply(res: DiscoveryResponse): DiscoveryRequest {
    const nack = (message: string): DiscoveryRequest => {
      this.stats.pushesRejected++;
      this.log.warn(
        { version: res.versionInfo, nonce: res.nonce, err: message },
        "routing push rejected (NACK)",
      );
      return create(DiscoveryRequestSchema, {
        versionInfo: this.appliedVersion,
        responseNonce: res.nonce,
        errorDetail: { message: message.slice(0, 1024) || "rejected" },
      });
    };
    if (res.versionInfo === "") return nack("push carries no version_info");
    if (res.nonce === "") return nack("push carries no nonce");
    try {
      this.opts.sink.apply({
        fullResync: res.fullSnapshot,
        upserts: res.upserts,
        removes: res.removes,
        version: res.versionInfo,
      });
    } catch (err) {
      return nack(err instanceof Error ? err.message : String(err));
    }
    this.appliedVersion = res.versionInfo;
    this.stats.pushesApplied++;
    return create(DiscoveryRequestSchema, { versionInfo: res.versionInfo, responseNonce: res.nonce });
  }

  private reportLive(): void {
    const q = this.queue;
    if (!q) return;
    let ids: string[];
    try {
      ids = this.opts.liveSessions();
    } catch (err) {
      this.log.error({ err }, "liveSessions() threw; report skipped");
      return;
    }
    q.push(
      create(DiscoveryRequestSchema, { versionInfo: this.appliedVersion, liveSessions: { sessionIds: ids } }),
    );
  }

  private recordError(err: unknown): void {
    const e = ConnectError.from(err);
    this.lastError = { code: Code[e.code] ?? String(e.code), message: e.rawMessage, at: new Date() };
  }
}
