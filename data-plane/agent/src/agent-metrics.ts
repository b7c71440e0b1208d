// The agent's Prometheus metrics (DESIGN §8), on a per-instance Registry. Hot paths add
// to plain numbers in AgentCounters; prom-client objects are filled from those numbers
// and from live gauges only when /metrics is scraped. Labels are bounded (mode, kind,
// direction, family, route, code from a fixed set) — never a session id.
import { Counter, Gauge, Registry } from "prom-client";
import { COUNTED_ERROR_CODES } from "./agent-errors.js";

/** Plain counters the sessions increment. */
export class AgentCounters {
  /** Payload bytes of data frames sent toward the client, by family name. */
  readonly bytesToClient = { traffic: 0, outgoing_tcp: 0, outgoing_udp: 0 };
  /** Payload bytes of data frames received from the client, by family name. */
  readonly bytesFromClient = { traffic: 0, outgoing_tcp: 0, outgoing_udp: 0 };
  /** Mirror bytes the session layer dropped because its peer was congested. */
  mirrorDroppedBytes = 0;
  /** Sessions dropped because their peer went silent (no frame, protocol ping included) in time. */
  pingTimeouts = 0;
  /** Sources paused because the session's WebSocket passed its high-water mark. */
  backpressurePauses = 0;
  private readonly errors = new Map<string, number>();

  error(code: string): void {
    const key = COUNTED_ERROR_CODES.has(code) ? code : "other";
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1);
  }

  errorCount(code: string): number {
    return this.errors.get(code) ?? 0;
  }

  errorEntries(): IterableIterator<[string, number]> {
    return this.errors.entries();
  }
}

export type DataFamily = keyof AgentCounters["bytesToClient"];

/** Values read at scrape time from the live agent. */
export interface AgentGauges {
  sessions(): number;
  subscriptions(): { mirror: number; steal: number; filtered_steal: number; held: number };
  connections(): {
    incoming_steal: number;
    incoming_mirror: number;
    outgoing_tcp: number;
    outgoing_udp: number;
  };
  /** Bytes queued in the sessions' WebSockets toward their peers. */
  bufferedBytes(): number;
  /** Summed over the agent's port proxies. */
  proxy(): {
    requestsApp: number;
    requestsStolen: number;
    requestsFailed: number;
    mirrorDroppedBytes: number;
    /** Connections and requests that waited for a held steal. */
    held: number;
  };
}

export class AgentMetrics {
  readonly registry = new Registry();
  readonly counters = new AgentCounters();

  constructor(gauges: AgentGauges) {
    const c = this.counters;
    const reg = [this.registry];
    new Gauge({
      name: "switchyard_agent_sessions",
      help: "Sessions with an open protocol connection.",
      registers: reg,
      collect() {
        this.set(gauges.sessions());
      },
    });
    new Gauge({
      name: "switchyard_agent_subscriptions",
      help: "Port subscriptions, by mode (mirror, steal, filtered_steal; held: any mode, waiting for its lost session to return).",
      labelNames: ["mode"],
      registers: reg,
      collect() {
        for (const [mode, n] of Object.entries(gauges.subscriptions())) this.set({ mode }, n);
      },
    });
    new Gauge({
      name: "switchyard_agent_connections",
      help: "Open connections, by kind (incoming_steal, incoming_mirror, outgoing_tcp, outgoing_udp).",
      labelNames: ["kind"],
      registers: reg,
      collect() {
        for (const [kind, n] of Object.entries(gauges.connections())) this.set({ kind }, n);
      },
    });
    new Gauge({
      name: "switchyard_agent_buffered_bytes",
      help: "Bytes queued in session WebSockets toward their peers.",
      registers: reg,
      collect() {
        this.set(gauges.bufferedBytes());
      },
    });
    new Counter({
      name: "switchyard_agent_bytes_total",
      help: "Payload bytes of data frames, by direction (to_client, from_client) and family.",
      labelNames: ["direction", "family"],
      registers: reg,
      collect() {
        this.reset();
        for (const [family, n] of Object.entries(c.bytesToClient))
          this.inc({ direction: "to_client", family }, n);
        for (const [family, n] of Object.entries(c.bytesFromClient))
          this.inc({ direction: "from_client", family }, n);
      },
    });
    new Counter({
      name: "switchyard_agent_http_requests_total",
      help: "HTTP requests seen in filtered-steal mode, by route (stolen, app, failed).",
      labelNames: ["route"],
      registers: reg,
      collect() {
        this.reset();
        const p = gauges.proxy();
        this.inc({ route: "stolen" }, p.requestsStolen);
        this.inc({ route: "app" }, p.requestsApp);
        this.inc({ route: "failed" }, p.requestsFailed);
      },
    });
    new Counter({
      name: "switchyard_agent_held_traffic_total",
      help: "Incoming connections and requests that waited for a held steal (its session was reconnecting).",
      registers: reg,
      collect() {
        this.reset();
        this.inc(gauges.proxy().held);
      },
    });
    new Counter({
      name: "switchyard_agent_mirror_dropped_bytes_total",
      help: "Mirrored bytes dropped because a mirroring session could not keep up.",
      registers: reg,
      collect() {
        this.reset();
        this.inc(gauges.proxy().mirrorDroppedBytes);
      },
    });
    new Counter({
      name: "switchyard_agent_ping_timeouts_total",
      help: "Sessions dropped because no frame (a protocol ping at least) arrived within the ping timeout of reading.",
      registers: reg,
      collect() {
        this.reset();
        this.inc(c.pingTimeouts);
      },
    });
    new Counter({
      name: "switchyard_agent_backpressure_pauses_total",
      help: "Times a source was paused because a session's WebSocket passed its high-water mark.",
      registers: reg,
      collect() {
        this.reset();
        this.inc(c.backpressurePauses);
      },
    });
    new Counter({
      name: "switchyard_agent_errors_total",
      help: "Errors answered or counted, by stable error code.",
      labelNames: ["code"],
      registers: reg,
      collect() {
        this.reset();
        for (const [code, n] of c.errorEntries()) this.inc({ code }, n);
      },
    });
  }
}
