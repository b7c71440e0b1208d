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
import { SESSION_ID_MAX_LENGTH } from "../../../proto/session-endpoint.js";
import { DiscoveryStreamError, RouterAuthError } from "./errors.js";
import { malformedReason } from "./malformed-request.js";
import { RouteDiscoveryMetrics } from "./route-discovery-metrics.js";
import type { RouterAuthenticator, RouterIdentity, RouterPeer } from "./router-authenticator.js";
import type { RouteSnapshotCache } from "./snapshot-cache.js";

/** One StreamRoutes call as grpc-js hands it to the server. */
export type RouteDiscoveryCall = ServerDuplexStream<DiscoveryRequest__Output, DiscoveryResponse>;

export interface LiveSessionsReport {
  routerId: string;
  streamId: number;
  /** Authenticated identity of the router, e.g. system:serviceaccount:ns:name. */
  identity: string;
  /** Complete list of sessions with a live client on that router right now. */
  sessionIds: readonly string[];
}

export interface ConnectedRouter {
  streamId: number;
  routerId: string;
  identity: string;
  connectedAt: Date;
  /** The version the router last ACKed (or claimed on connect); "" when it has none. */
  ackedVersion: string;
  /** Nonce of the push waiting for an ACK/NACK, if any. */
  pendingNonce: string | undefined;
  lastNack: { version: string; nonce: string; message: string; at: Date } | undefined;
  liveSessions: number;
}

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

const nonceFormat = /^[1-9][0-9]{0,15}$/;
/** Versions this server issues are short ("<epoch>.<seq>"); a longer claim is not one of them. */
const MAX_VERSION_CHARS = 256;
const routerIdFormat = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$/;

export class RouteDiscoveryStreamServer {
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
    const peer: RouterPeer = {
      authorization: metadataText(call.metadata.get("authorization")[0]),
      clientCertificate,
    };
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
    let identity: RouterIdentity;
    try {
      identity = await this.authenticator.authenticate(peer);
      this.metrics.counts.auth.ok++;
    } catch (err) {
      throw this.authFailure(err);
    }

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

  private authFailure(err: unknown): DiscoveryStreamError {
    const failure = err instanceof RouterAuthError ? err.failure : "unavailable";
    this.metrics.counts.auth[failure]++;
    const message = err instanceof Error ? err.message : String(err);
    this.log.warn({ failure, reason: message }, "router refused");
    const code =
      failure === "unauthenticated"
        ? Status.UNAUTHENTICATED
        : failure === "permission_denied"
          ? Status.PERMISSION_DENIED
          : Status.UNAVAILABLE;
    return new DiscoveryStreamError(code, message);
  }
}

/** Protocol state of one router stream. */
class DiscoveryStream {
  ackedVersion = "";
  private lastNonce = 0;
  private outstanding: { nonce: number; version: string; changeAtMs: number } | undefined;
  /** A version this router refused: not pushed again until the cache moves on. */
  private nackedVersion: string | undefined;
  private lastNack: ConnectedRouter["lastNack"];
  private liveSessions = 0;
  private pumpScheduled = false;
  private readonly connectedAt = new Date();

  constructor(
    private readonly id: number,
    private readonly routerId: string,
    private readonly identity: string,
    private readonly outbox: AsyncQueue<DiscoveryResponse>,
    private readonly server: RouteDiscoveryStreamServer,
    private readonly cache: RouteSnapshotCache,
  ) {}

  view(): ConnectedRouter {
    return {
      streamId: this.id,
      routerId: this.routerId,
      identity: this.identity,
      connectedAt: this.connectedAt,
      ackedVersion: this.ackedVersion,
      pendingNonce: this.outstanding ? String(this.outstanding.nonce) : undefined,
      lastNack: this.lastNack,
      liveSessions: this.liveSessions,
    };
  }

  end(err: DiscoveryStreamError): void {
    this.outbox.fail(err);
  }

  handleFirst(req: DiscoveryRequest__Output): void {
    // A nonce on the first request belongs to an earlier stream: nothing to ACK here.
    if (req.responseNonce !== "") this.server.metrics.counts.staleNonces++;
    if (req.errorDetail !== null && req.responseNonce === "") {
      throw this.server.violation(Status.INVALID_ARGUMENT, "error_detail (NACK) requires response_nonce");
    }
    if (req.versionInfo.length > MAX_VERSION_CHARS) {
      throw this.server.violation(
        Status.INVALID_ARGUMENT,
        `version_info is ${req.versionInfo.length} characters, longer than any version this server issues (${MAX_VERSION_CHARS}); send the version you applied, or "" for none`,
      );
    }
    this.ackedVersion = req.versionInfo;
    this.live(req);
    this.pump();
  }

  handle(req: DiscoveryRequest__Output): void {
    notMalformed(req, this.server);
    if (req.routerId !== "" && req.routerId !== this.routerId) {
      throw this.server.violation(
        Status.INVALID_ARGUMENT,
        `router_id changed from ${quote(this.routerId)} to ${quote(req.routerId)} on one stream; open a new stream`,
      );
    }
    this.live(req);
    const nonceText = req.responseNonce;
    if (nonceText === "") {
      if (req.errorDetail !== null) {
        throw this.server.violation(Status.INVALID_ARGUMENT, "error_detail (NACK) requires response_nonce");
      }
      return; // a live-session report only
    }
    if (!nonceFormat.test(nonceText)) {
      throw this.server.violation(
        Status.INVALID_ARGUMENT,
        `response_nonce ${quote(nonceText)} was not issued by this server; echo the nonce of the response you ACK or NACK`,
      );
    }
    const nonce = Number(nonceText);
    if (nonce > this.lastNonce) {
      throw this.server.violation(
        Status.INVALID_ARGUMENT,
        `response_nonce ${nonce} was never sent on this stream (last sent ${this.lastNonce})`,
      );
    }
    const pending = this.outstanding;
    if (pending === undefined || nonce !== pending.nonce) {
      this.server.metrics.counts.staleNonces++;
      return;
    }
    this.outstanding = undefined;
    if (req.errorDetail !== null) {
      this.server.metrics.counts.nacks++;
      this.nackedVersion = pending.version;
      const message = req.errorDetail.message.slice(0, 1024);
      this.lastNack = { version: pending.version, nonce: nonceText, message, at: new Date() };
      this.server.logger.warn(
        {
          routerId: this.routerId,
          streamId: this.id,
          version: pending.version,
          nonce: nonceText,
          error: message,
        },
        "router rejected routing push; keeping its previous version",
      );
    } else {
      if (req.versionInfo !== pending.version) {
        throw this.server.violation(
          Status.INVALID_ARGUMENT,
          `ACK of nonce ${nonce} carries version_info ${quote(req.versionInfo)} but that push was version ${quote(pending.version)}`,
        );
      }
      this.server.metrics.counts.acks++;
      this.server.metrics.observePushLatency((performance.now() - pending.changeAtMs) / 1000);
      this.ackedVersion = pending.version;
      this.nackedVersion = undefined;
    }
    this.pump();
  }

  /**
   * Reconcilers often publish several changes in one tick (upsert this, remove that):
   * waiting for the microtask queue to drain folds them into one push.
   */
  schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    queueMicrotask(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Pushes what the router lacks, if nothing is outstanding. */
  pump(): void {
    if (this.outstanding !== undefined || this.outbox.closed || !this.cache.ready()) return;
    const changes = this.cache.changesSince(this.ackedVersion);
    if (changes === undefined || changes.version === this.nackedVersion) return;
    const nonce = ++this.lastNonce;
    this.outstanding = { nonce, version: changes.version, changeAtMs: changes.oldestChangeAtMs };
    this.server.metrics.counts.pushes[changes.full ? "full" : "delta"]++;
    // The cache's routes go out as they are: the serializer reads their fields (the
    // protobuf-es message type adds nothing it would encode).
    this.outbox.push({
      versionInfo: changes.version,
      nonce: String(nonce),
      fullSnapshot: changes.full,
      upserts: [...changes.upserts],
      removes: changes.removes as string[],
    });
  }

  private live(req: DiscoveryRequest__Output): void {
    const ls = req.liveSessions;
    if (ls === null) return;
    if (ls.sessionIds.length > this.server.maxLiveSessionsPerReport) {
      throw this.server.violation(
        Status.RESOURCE_EXHAUSTED,
        `live_sessions lists ${ls.sessionIds.length} sessions; at most ${this.server.maxLiveSessionsPerReport} per report`,
      );
    }
    const bad = ls.sessionIds.findIndex((id) => id.length === 0 || id.length > SESSION_ID_MAX_LENGTH);
    if (bad >= 0) {
      throw this.server.violation(
        Status.INVALID_ARGUMENT,
        `live_sessions.session_ids[${bad}] is ${ls.sessionIds[bad]!.length} characters; each must be 1-${SESSION_ID_MAX_LENGTH}`,
      );
    }
    this.liveSessions = ls.sessionIds.length;
    this.server.emitLiveSessions({
      routerId: this.routerId,
      streamId: this.id,
      identity: this.identity,
      sessionIds: ls.sessionIds,
    });
  }
}

/** A router's value in a status or log message: quoted, cut short so garbage stays small. */
function quote(value: string): string {
  const q = JSON.stringify(value.slice(0, 64));
  return value.length <= 64 ? q : `${q}… (${value.length} characters)`;
}

/** Ends the stream when a message did not decode as a DiscoveryRequest (malformed-request.ts). */
function notMalformed(req: DiscoveryRequest__Output, server: RouteDiscoveryStreamServer): void {
  const why = malformedReason(req);
  if (why !== undefined)
    throw server.violation(
      Status.INVALID_ARGUMENT,
      `a message is not a DiscoveryRequest of route_discovery.proto (${why}); send DiscoveryRequest messages only`,
    );
}

/** A metadata value as text (binary `-bin` values are not credentials). */
function metadataText(value: string | Buffer | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}
