// Prometheus metrics of the RouteDiscovery server, on a per-instance Registry. Events are
// counted in plain numbers and published at scrape time (collect), so the protocol path
// never touches prom-client objects. Labels are bounded: push type, NACK/auth reasons and
// gRPC codes; never a router id or session id.
import { Counter, Gauge, Histogram, Registry } from "prom-client";

export type PushType = "full" | "delta";

/**
 * The gRPC codes StreamServer.violation ends a router stream with; their counters are published
 * from 0, so "no protocol errors" is a value, not a missing series.
 */
const PROTOCOL_ERROR_CODES = ["INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"];
export type AuthResult = "ok" | "unauthenticated" | "permission_denied" | "unavailable";

export class RouteDiscoveryMetrics {
  readonly registry: Registry;
  /** Plain counters, published at scrape. */
  readonly counts = {
    pushes: { full: 0, delta: 0 } as Record<PushType, number>,
    acks: 0,
    nacks: 0,
    staleNonces: 0,
    liveSessionReports: 0,
    notReady: 0,
    auth: { ok: 0, unauthenticated: 0, permission_denied: 0, unavailable: 0 } as Record<AuthResult, number>,
    protocolErrors: new Map<string, number>(),
  };
  private readonly pushLatency: Histogram;

  constructor(
    source: { connectedRouters(): number; version(): string; sessions(): number },
    registry: Registry = new Registry(),
  ) {
    this.registry = registry;
    const counts = this.counts;
    new Gauge({
      name: "switchyard_route_discovery_connected_routers",
      help: "Router streams currently connected and authenticated.",
      registers: [registry],
      collect() {
        this.set(source.connectedRouters());
      },
    });
    new Gauge({
      name: "switchyard_route_discovery_snapshot_sessions",
      help: "Sessions in the current routing snapshot.",
      registers: [registry],
      collect() {
        this.set(source.sessions());
      },
    });
    new Gauge({
      name: "switchyard_route_discovery_snapshot_info",
      help: "Current routing snapshot version (value is always 1).",
      labelNames: ["version"],
      registers: [registry],
      collect() {
        // One series only: the current version replaces the previous one.
        this.reset();
        this.set({ version: source.version() }, 1);
      },
    });
    new Counter({
      name: "switchyard_route_discovery_pushes_total",
      help: "Responses pushed to routers, by type (full snapshot or delta).",
      labelNames: ["type"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [type, n] of Object.entries(counts.pushes)) this.inc({ type }, n);
      },
    });
    const single = (name: string, help: string, read: () => number) =>
      new Counter({
        name,
        help,
        registers: [registry],
        collect() {
          this.reset();
          this.inc(read());
        },
      });
    single("switchyard_route_discovery_acks_total", "Pushes acknowledged by routers.", () => counts.acks);
    single("switchyard_route_discovery_nacks_total", "Pushes rejected by routers.", () => counts.nacks);
    single(
      "switchyard_route_discovery_stale_nonces_total",
      "ACK/NACK requests ignored because their nonce was not the outstanding one.",
      () => counts.staleNonces,
    );
    single(
      "switchyard_route_discovery_live_session_reports_total",
      "Live-session reports received from routers.",
      () => counts.liveSessionReports,
    );
    single(
      "switchyard_route_discovery_not_ready_refusals_total",
      "Router streams refused with UNAVAILABLE because this replica's cache is not ready (not leader or not synced).",
      () => counts.notReady,
    );
    new Counter({
      name: "switchyard_route_discovery_auth_total",
      help: "Router stream authentication outcomes.",
      labelNames: ["result"],
      registers: [registry],
      collect() {
        this.reset();
        for (const [result, n] of Object.entries(counts.auth)) this.inc({ result }, n);
      },
    });
    new Counter({
      name: "switchyard_route_discovery_protocol_errors_total",
      help: "Router streams ended for a protocol violation, by gRPC status code.",
      labelNames: ["code"],
      registers: [registry],
      collect() {
        this.reset();
        for (const code of PROTOCOL_ERROR_CODES) this.inc({ code }, 0);
        for (const [code, n] of counts.protocolErrors) this.inc({ code }, n);
      },
    });
    this.pushLatency = new Histogram({
      name: "switchyard_route_discovery_push_latency_seconds",
      help: "From a routing change being published to the router's ACK of a push carrying it.",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.35, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
  }

  /** Called once per ACK (a few per change, never per frame): direct observe is fine. */
  observePushLatency(seconds: number): void {
    this.pushLatency.observe(seconds);
  }

  protocolError(code: string): void {
    this.counts.protocolErrors.set(code, (this.counts.protocolErrors.get(code) ?? 0) + 1);
  }
}
