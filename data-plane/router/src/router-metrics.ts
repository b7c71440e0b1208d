// The router's Prometheus metrics (DESIGN §8). Hot paths increment plain numbers on
// objects they already hold (a per-cluster TrafficCounters, the BadFrameCounters);
// prom-client objects are filled from those numbers only when /metrics is scraped.
// Labels are bounded: cluster (an upstream's `metrics_cluster`, else its cluster, from the
// routing table; counters of labels no longer in the table are dropped), family, direction,
// reason. Never a session id.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { ErrorCode } from "../../../proto/error-codes.js";
import { FrameFamily } from "../../../proto/gen/session_pb.js";

const FAMILY_NAMES: string[] = [];
for (const [name, value] of Object.entries(FrameFamily)) {
  if (typeof value === "number") FAMILY_NAMES[value] = name.toLowerCase();
}
const FAMILY_SLOTS = 16;

/** The `cluster` label of an upstream: member gateways name every agent "agent". */
export function metricsCluster(u: { cluster: string; metricsCluster?: string }): string {
  return u.metricsCluster || u.cluster;
}

/** Per-cluster frame and byte counts, indexed by family. One instance per cluster name, shared by all links. */
export class TrafficCounters {
  readonly toUpstreamFrames = new Float64Array(FAMILY_SLOTS);
  readonly toUpstreamBytes = new Float64Array(FAMILY_SLOTS);
  readonly fromUpstreamFrames = new Float64Array(FAMILY_SLOTS);
  readonly fromUpstreamBytes = new Float64Array(FAMILY_SLOTS);
  reconnects = 0;
  constructor(readonly cluster: string) {}
}

export interface LiveGauges {
  /** Sessions with an attached client. */
  activeSessions(): number;
  /** Upstream links by cluster and state. */
  upstreamLinks(): Iterable<{ cluster: string; state: string; count: number }>;
  /** Bytes queued toward clients and upstreams (WebSocket bufferedAmount sums). */
  bufferedBytes(): { client: number; upstream: number };
  /** Sessions in the routing table and its version-change timestamp (seconds), or 0. */
  table(): { sessions: number; updatedAtSeconds: number };
  /** Multiplexed gateway connections and their channels: dialled (to gateways) and accepted (from Primary routers). */
  mux(): Record<"dialled" | "accepted", { connections: number; channels: number }>;
}

export class RouterMetrics {
  readonly registry = new Registry();
  private readonly clusters = new Map<string, TrafficCounters>();
  /** `${source}|${code}` → count. */
  private readonly badFrames = new Map<string, number>();
  private readonly events = new Map<string, number>();
  readonly fanoutLatency: Histogram<"family">;

  constructor(gauges: LiveGauges) {
    const clusters = this.clusters;
    const badFrames = this.badFrames;
    const events = this.events;
    new Counter({
      name: "switchyard_router_frames_total",
      help: "Frames routed, by direction (to_upstream, from_upstream), cluster and family.",
      labelNames: ["direction", "cluster", "family"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const c of clusters.values()) publish(this, c, c.toUpstreamFrames, c.fromUpstreamFrames);
      },
    });
    new Counter({
      name: "switchyard_router_bytes_total",
      help: "Frame bytes routed (header + payload), by direction, cluster and family.",
      labelNames: ["direction", "cluster", "family"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const c of clusters.values()) publish(this, c, c.toUpstreamBytes, c.fromUpstreamBytes);
      },
    });
    new Counter({
      name: "switchyard_router_upstream_reconnects_total",
      help: "Reconnect attempts to upstreams, by cluster.",
      labelNames: ["cluster"],
      registers: [this.registry],
      collect() {
        this.reset();
        // Every cluster a link was made for, from 0: "no reconnects" is a value, not a gap.
        for (const c of clusters.values()) this.inc({ cluster: c.cluster }, c.reconnects);
      },
    });
    new Counter({
      name: "switchyard_router_bad_frames_total",
      help: "Frames rejected with a protocol error, by source (client, upstream) and error code.",
      labelNames: ["source", "code"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [key, n] of badFrames) {
          const [source, code] = key.split("|") as [string, string];
          this.inc({ source, code }, n);
        }
      },
    });
    new Counter({
      name: "switchyard_router_events_total",
      help:
        "Notable router events by name: backpressure_pause_client, backpressure_pause_upstream, " +
        "shed_ping_congested, client_too_slow, upstream_too_slow, merge_timeout, auth_failed, " +
        "session_not_found, session_creating, client_replaced, session_removed, resubscribe_refused, " +
        "routes_rejected (a RouteDiscovery push NACKed).",
      labelNames: ["event"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [event, n] of events) this.inc({ event }, n);
      },
    });
    this.fanoutLatency = new Histogram({
      name: "switchyard_router_fanout_latency_seconds",
      help: "Broadcast client frame in to merged reply out, by family (ping, subscription).",
      labelNames: ["family"],
      buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      registers: [this.registry],
    });
    new Gauge({
      name: "switchyard_router_active_sessions",
      help: "Sessions with an attached client on this router.",
      registers: [this.registry],
      collect() {
        this.set(gauges.activeSessions());
      },
    });
    new Gauge({
      name: "switchyard_router_upstream_links",
      help: "Upstream links by cluster and state (connecting, open, down).",
      labelNames: ["cluster", "state"],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const l of gauges.upstreamLinks()) this.set({ cluster: l.cluster, state: l.state }, l.count);
      },
    });
    new Gauge({
      name: "switchyard_router_buffered_bytes",
      help: "Bytes queued in WebSocket send buffers, by side (client, upstream). Bounded by the high-water marks.",
      labelNames: ["side"],
      registers: [this.registry],
      collect() {
        const b = gauges.bufferedBytes();
        this.set({ side: "client" }, b.client);
        this.set({ side: "upstream" }, b.upstream);
      },
    });
    new Gauge({
      name: "switchyard_router_mux_connections",
      help: "Multiplexed gateway connections, by side (dialled: to member gateways; accepted: from Primary routers).",
      labelNames: ["side"],
      registers: [this.registry],
      collect() {
        const m = gauges.mux();
        this.set({ side: "dialled" }, m.dialled.connections);
        this.set({ side: "accepted" }, m.accepted.connections);
      },
    });
    new Gauge({
      name: "switchyard_router_mux_channels",
      help: "Sessions carried on multiplexed gateway connections, by side (dialled, accepted).",
      labelNames: ["side"],
      registers: [this.registry],
      collect() {
        const m = gauges.mux();
        this.set({ side: "dialled" }, m.dialled.channels);
        this.set({ side: "accepted" }, m.accepted.channels);
      },
    });
    new Gauge({
      name: "switchyard_router_routing_table_sessions",
      help: "Sessions in the routing table this router serves.",
      registers: [this.registry],
      collect() {
        this.set(gauges.table().sessions);
      },
    });
    new Gauge({
      name: "switchyard_router_routing_table_updated_timestamp_seconds",
      help: "When the routing table last changed (Unix seconds); 0 before the first table.",
      registers: [this.registry],
      collect() {
        this.set(gauges.table().updatedAtSeconds);
      },
    });
  }

  /** The shared counters of one cluster; callers keep the reference and increment fields directly. */
  clusterCounters(cluster: string): TrafficCounters {
    let c = this.clusters.get(cluster);
    if (!c) {
      c = new TrafficCounters(cluster);
      this.clusters.set(cluster, c);
    }
    return c;
  }

  /**
   * Drops the counters of labels no routing-table upstream carries any more (a Primary cluster
   * taken out of the configuration; agents named by id in routes written before
   * `metrics_cluster`): their series leave /metrics, and count from 0 if the label returns.
   */
  retainClusters(inUse: ReadonlySet<string>): void {
    for (const label of this.clusters.keys()) if (!inUse.has(label)) this.clusters.delete(label);
  }

  /** Counts a rejected frame; `code` is a catalogue code, so the label set stays bounded. */
  badFrame(source: "client" | "upstream", code: ErrorCode): void {
    const key = `${source}|${code}`;
    this.badFrames.set(key, (this.badFrames.get(key) ?? 0) + 1);
  }

  event(name: string): void {
    this.events.set(name, (this.events.get(name) ?? 0) + 1);
  }

  /** For tests and /debug: current value of an event counter. */
  eventCount(name: string): number {
    return this.events.get(name) ?? 0;
  }
}

function publish(counter: Counter<string>, c: TrafficCounters, to: Float64Array, from: Float64Array): void {
  for (let f = 1; f < FAMILY_SLOTS; f++) {
    const family = FAMILY_NAMES[f];
    if (family === undefined) continue;
    if (to[f]! > 0) counter.inc({ direction: "to_upstream", cluster: c.cluster, family }, to[f]!);
    if (from[f]! > 0) counter.inc({ direction: "from_upstream", cluster: c.cluster, family }, from[f]!);
  }
}
