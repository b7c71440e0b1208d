// One router's stream as the protocol sees it (proto/route_discovery.proto): the nonce
// counter, the single outstanding push, the version the router last ACKed and the one it
// refused, and the live-session count of its last report. It handles each request — ACK,
// NACK, stale nonce, live-session report — and pumps what the snapshot cache says the
// router lacks whenever nothing is outstanding. A malformed request throws the status that
// ends the stream. What it needs of the server (metrics, the log, violations counted,
// live-session reports passed on) is a StreamHost, which stream-server.ts implements.
import { status as Status } from "@grpc/grpc-js";
import type { Logger } from "pino";
import type { AsyncQueue } from "../../../lib/async-queue.js";
import type { DiscoveryRequest__Output, DiscoveryResponse } from "../../../proto/route-discovery-service.js";
import { SESSION_ID_MAX_LENGTH } from "../../../proto/session-endpoint.js";
import type { DiscoveryStreamError } from "./errors.js";
import { malformedReason } from "./malformed-request.js";
import type { RouteDiscoveryMetrics } from "./route-discovery-metrics.js";
import type { RouteSnapshotCache } from "./snapshot-cache.js";

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

/** What a stream needs of the server that runs it. */
export interface StreamHost {
  readonly metrics: RouteDiscoveryMetrics;
  readonly logger: Logger;
  readonly maxLiveSessionsPerReport: number;
  /** Records a protocol violation and returns the error to end the stream with. */
  violation(code: Status, message: string): DiscoveryStreamError;
  emitLiveSessions(report: LiveSessionsReport): void;
}

const nonceFormat = /^[1-9][0-9]{0,15}$/;
/** Versions this server issues are short ("<epoch>.<seq>"); a longer claim is not one of them. */
export const MAX_VERSION_CHARS = 256;

/** Protocol state of one router stream. */
export class DiscoveryStream {
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
    private readonly server: StreamHost,
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
export function notMalformed(req: DiscoveryRequest__Output, server: StreamHost): void {
  const why = malformedReason(req);
  if (why !== undefined)
    throw server.violation(
      Status.INVALID_ARGUMENT,
      `a message is not a DiscoveryRequest of route_discovery.proto (${why}); send DiscoveryRequest messages only`,
    );
}
