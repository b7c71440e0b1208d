// The protocol half of RouteDiscovery (xDS-style): one DiscoveryStream per connected
// router keeps the nonce counter, the single outstanding push, the version the router
// last ACKed, and asks the snapshot cache for "changes since that version" whenever it
// may push. It never computes differences itself and never holds routing state.
//
// Rules (see proto/route_discovery.proto): authenticate before anything is read or sent;
// the first request names the router; every response gets a strictly increasing nonce;
// at most one push is unacknowledged; an ACK moves the stream's acked version, a NACK
// keeps it and waits for the next change; a nonce that is not the outstanding one is
// stale (ignored, counted); malformed requests end the stream with a precise status.
//
// This file is the server: options, one grpc-js call adapted to a request queue and a
// response stream, the checks before a stream exists (authentication, a cache that is
// serving, the first request within its deadline naming the router), the streams connected
// and live-session listeners. One stream's protocol state is discovery-stream.ts; who the
// router is, stream-authentication.ts.
import { status as Status, type ServerDuplexStream } from "@grpc/grpc-js";
import { pino, type Logger } from "pino";
import type { Registry } from "prom-client";
import { AsyncQueue } from "../../../lib/async-queue.js";
import { integerIn, OptionError, positive } from "../../../lib/option-error.js";
import {
  statusName,
  type DiscoveryRequest__Output,
  type DiscoveryResponse,
} from "../../../proto/route-discovery-service.js";
import {
  DiscoveryStream,
  MAX_VERSION_CHARS,
  notMalformed,
  type ConnectedRouter,
  type LiveSessionsReport,
  type StreamHost,
} from "./discovery-stream.js";
import { DiscoveryStreamError } from "./errors.js";
import { RouteDiscoveryMetrics } from "./route-discovery-metrics.js";
import type { RouterAuthenticator, RouterPeer } from "./router-authenticator.js";
import type { RouteSnapshotCache } from "./snapshot-cache.js";
import { authenticateRouter, routerPeer } from "./stream-authentication.js";

/** One StreamRoutes call as grpc-js hands it to the server. */
export type RouteDiscoveryCall = ServerDuplexStream<DiscoveryRequest__Output, DiscoveryResponse>;

export interface RouteDiscoveryStreamServerOptions {
  cache: RouteSnapshotCache;
  authenticator: RouterAuthenticator;
  logger?: Logger;
  /** Registry the metrics are registered in (default: a new per-instance Registry). */
  registry?: Registry;
  /** How long a router may take to send its first request after connecting, ms (default 10 000). */
  firstRequestTimeoutMs?: number;
  /** Largest live-session list accepted in one report (default 100 000). */
  maxLiveSessionsPerReport?: number;
}

type LiveListener = (report: LiveSessionsReport) => void;

const routerIdFormat = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$/;

export class RouteDiscoveryStreamServer implements StreamHost {
  readonly metrics: RouteDiscoveryMetrics;
  private readonly cache: RouteSnapshotCache;
  private readonly authenticator: RouterAuthenticator;
  private readonly log: Logger;
  private readonly firstRequestTimeoutMs: number;
  private readonly maxLiveSessions: number;
  private readonly streams = new Map<number, DiscoveryStream>();
  private readonly liveListeners = new Set<LiveListener>();
  private nextStreamId = 1;

  constructor(opts: RouteDiscoveryStreamServerOptions) {
    if (!opts.cache) throw new OptionError("cache", "a RouteSnapshotCache is required");
    if (!opts.authenticator) {
      throw new OptionError("authenticator", "a RouterAuthenticator is required: routes carry secrets");
    }
    const timeout = positive("firstRequestTimeoutMs", opts.firstRequestTimeoutMs, 10_000);
    const maxLive = integerIn("maxLiveSessionsPerReport", opts.maxLiveSessionsPerReport, 100_000, 1);
    this.cache = opts.cache;
    this.authenticator = opts.authenticator;
    this.log = (opts.logger ?? pino({ level: "silent" })).child({ component: "route-discovery" });
    this.firstRequestTimeoutMs = timeout;
    this.maxLiveSessions = maxLive;
    this.metrics = new RouteDiscoveryMetrics(
      {
        connectedRouters: () => this.streams.size,
        version: () => this.cache.version(),
        sessions: () => this.cache.size,
      },
      opts.registry,
    );
  }

  /**
   * Serves one StreamRoutes call (the listener's handler, see route-discovery-server.ts).
   * `clientCertificate` is the TLS client certificate the listener verified, if any.
   */
  serve(call: RouteDiscoveryCall, clientCertificate: RouterPeer["clientCertificate"]): void {
    const requests = new AsyncQueue<DiscoveryRequest__Output>();
    const cancelled = new AbortController();
    call.on("data", (req: DiscoveryRequest__Output) => requests.push(req));
    call.on("end", () => requests.close());
    call.on("cancelled", () => {
      cancelled.abort();
      requests.close();
    });
    const peer = routerPeer(call.metadata, clientCertificate);
    void (async () => {
      try {
        // No write backpressure to handle: at most one push is unacknowledged per stream.
        for await (const res of this.streamRoutes(requests, peer, cancelled.signal)) call.write(res);
        if (!cancelled.signal.aborted) call.end();
      } catch (err) {
        if (cancelled.signal.aborted) return;
        const e =
          err instanceof DiscoveryStreamError
            ? err
            : new DiscoveryStreamError(Status.UNKNOWN, err instanceof Error ? err.message : String(err));
        call.emit("error", { code: e.status, details: e.message });
      }
    })();
  }

  /** Subscribes to live-session reports (the heartbeat writer consumes these). */
  onLiveSessions(listener: LiveListener): () => void {
    this.liveListeners.add(listener);
    return () => this.liveListeners.delete(listener);
  }

  /** Connected, authenticated router streams with their ACK state (for status and debug views). */
  connectedRouters(): ConnectedRouter[] {
    return [...this.streams.values()].map((s) => s.view());
  }

  /** Ends every stream with UNAVAILABLE (shutdown); routers reconnect elsewhere. */
  closeAll(reason = "control plane is shutting down"): void {
    for (const s of this.streams.values()) s.end(new DiscoveryStreamError(Status.UNAVAILABLE, reason));
  }

  private async *streamRoutes(
    requests: AsyncIterable<DiscoveryRequest__Output>,
    peer: RouterPeer,
    signal: AbortSignal,
  ): AsyncGenerator<DiscoveryResponse> {
    const identity = await authenticateRouter(this.authenticator, peer, this.metrics, this.log);

    if (!this.cache.ready()) {
      // Typically a replica that is not the leader: its cache is empty, and a full snapshot
      // of it would wipe every router. The router retries and lands on the leader.
      this.metrics.counts.notReady++;
      throw new DiscoveryStreamError(
        Status.UNAVAILABLE,
        "this control-plane replica is not serving routes (not the leader, or its first sync is not done); retry",
      );
    }
    const it = requests[Symbol.asyncIterator]();
    const first = await this.firstRequest(it, signal);
    if (first === undefined) return;
    notMalformed(first, this);
    if (!routerIdFormat.test(first.routerId)) {
      throw this.violation(
        Status.INVALID_ARGUMENT,
        "the first DiscoveryRequest must carry router_id (1-253 characters of [A-Za-z0-9-_.])",
      );
    }

    const streamId = this.nextStreamId++;
    const outbox = new AsyncQueue<DiscoveryResponse>();
    const stream = new DiscoveryStream(streamId, first.routerId, identity.name, outbox, this, this.cache);
    this.streams.set(streamId, stream);
    const unsubscribe = this.cache.onChange(() => stream.schedulePump());
    const log = this.log.child({ routerId: first.routerId, streamId });
    log.info(
      { identity: identity.name, version: first.versionInfo.slice(0, MAX_VERSION_CHARS) },
      "router connected",
    );

    const reader = (async () => {
      stream.handleFirst(first);
      for (let r = await it.next(); !r.done; r = await it.next()) stream.handle(r.value);
    })();
    reader.then(
      () => outbox.close(),
      (err: unknown) => outbox.fail(err),
    );
    try {
      yield* outbox;
    } catch (err) {
      if (
        err instanceof DiscoveryStreamError &&
        err.status !== Status.UNAVAILABLE &&
        err.status !== Status.CANCELLED
      ) {
        log.warn(
          { code: statusName(err.status), err: err.message },
          "router stream ended by protocol violation",
        );
      }
      throw err;
    } finally {
      unsubscribe();
      this.streams.delete(streamId);
      outbox.close();
      it.return?.()?.catch(() => undefined);
      log.info({ ackedVersion: stream.ackedVersion }, "router disconnected");
    }
  }

  private async firstRequest(
    it: AsyncIterator<DiscoveryRequest__Output>,
    signal: AbortSignal,
  ): Promise<DiscoveryRequest__Output | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            this.violation(
              Status.DEADLINE_EXCEEDED,
              `no DiscoveryRequest within ${this.firstRequestTimeoutMs} ms of connecting; send router_id first`,
            ),
          ),
        this.firstRequestTimeoutMs,
      );
    });
    try {
      const r = await Promise.race([it.next(), timeout]);
      if (signal.aborted) return undefined;
      return r.done ? undefined : r.value;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Records a protocol violation and returns the error to end the stream with. */
  violation(code: Status, message: string): DiscoveryStreamError {
    this.metrics.protocolError(statusName(code));
    return new DiscoveryStreamError(code, message);
  }

  emitLiveSessions(report: LiveSessionsReport): void {
    this.metrics.counts.liveSessionReports++;
    for (const l of this.liveListeners) {
      try {
        l(report);
      } catch (err) {
        this.log.error({ err }, "live-session listener threw; report dropped for that listener");
      }
    }
  }

  get maxLiveSessionsPerReport(): number {
    return this.maxLiveSessions;
  }

  get logger(): Logger {
    return this.log;
  }
}
