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
//
// This file is the stream loop: one stream's life, the reconnect backoff, live-session
// reports and status. Options are route-discovery-options.ts, the connection (dial, connect
// deadline, GOAWAY watch) route-discovery-connection.ts, and applying a push with its
// ACK/NACK route-discovery-push.ts, which also defines the RouteSink contract.
import { Metadata, status as Status } from "@grpc/grpc-js";
import { pino, type Logger } from "pino";
import { sleep } from "../../../lib/abortable-sleep.js";
import { Backoff } from "../../../lib/backoff.js";
import type { SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import {
  routeDiscoveryTarget,
  statusName,
  type DiscoveryRequest,
  type DiscoveryResponse__Output,
} from "../../../proto/route-discovery-service.js";
import {
  connected,
  dialControlPlane,
  onConnectionClosing,
  type DiscoveryCall,
} from "./route-discovery-connection.js";
import {
  resolveClientOptions,
  type ClientSettings,
  type RouteDiscoveryClientOptions,
} from "./route-discovery-options.js";
import { RoutePushApplier } from "./route-discovery-push.js";

// The sink contract comes with the client: the routing table implements it.
export type { SessionRoute };
export type { RouteDelta, RouteSink } from "./route-discovery-push.js";

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

export class RouteDiscoveryClient {
  private readonly opts: RouteDiscoveryClientOptions;
  private readonly settings: ClientSettings;
  private readonly target: string;
  private readonly backoff: Backoff;
  private readonly log: Logger;
  private readonly pushes: RoutePushApplier;
  private call: DiscoveryCall | undefined;
  private reportScheduled = false;
  private readonly stats = { streamsOpened: 0, goawayReconnects: 0 };
  private lastError: RouteDiscoveryClientStatus["lastError"];
  private running = false;

  constructor(opts: RouteDiscoveryClientOptions) {
    this.settings = resolveClientOptions(opts);
    this.backoff = new Backoff(this.settings.backoff);
    this.opts = opts;
    this.log = (opts.logger ?? pino({ level: "silent" })).child({
      component: "route-discovery-client",
      routerId: opts.routerId,
    });
    this.pushes = new RoutePushApplier(opts.sink, this.log, opts.onRejected);
    this.target = routeDiscoveryTarget(this.settings.url);
  }

  /** Version of the table last applied to the sink ("" before the first push). */
  version(): string {
    return this.pushes.version;
  }

  status(): RouteDiscoveryClientStatus {
    return {
      streaming: this.call !== undefined,
      version: this.pushes.version,
      streamsOpened: this.stats.streamsOpened,
      pushesApplied: this.pushes.applied,
      pushesRejected: this.pushes.rejected,
      goawayReconnects: this.stats.goawayReconnects,
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
            { version: this.pushes.version },
            "control plane closed the connection; reopening the stream",
          );
          continue;
        }
        if (outcome.received || Date.now() - openedAt >= this.settings.stableAfterMs) this.backoff.reset();
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
    const { keepaliveMs, connectTimeoutMs } = this.settings;
    const client = dialControlPlane(this.target, this.opts.credentials.tls, keepaliveMs);
    try {
      await connected(client, this.target, connectTimeoutMs, signal);
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
        versionInfo: this.pushes.version,
        liveSessions: { sessionIds: this.opts.liveSessions() },
      });
      this.call = call;
      this.stats.streamsOpened++;
      timer = setInterval(() => this.reportLive(), this.settings.liveIntervalMs);
      try {
        for await (const res of call as AsyncIterable<DiscoveryResponse__Output>) {
          received = true;
          this.backoff.reset();
          send(call, this.pushes.apply(res));
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
    send(call, { versionInfo: this.pushes.version, liveSessions: { sessionIds: ids } });
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
