// Delivers a session's incoming traffic to the developer's local process:
// - raw connections (mirrored, or stolen without an HTTP filter) become local TCP
//   connections to the mapped local port; for a steal the local answer goes back to the
//   caller, for a mirror it is discarded;
// - stolen HTTP requests (filtered steals) are replayed as local HTTP requests and the
//   local response is sent back, bodies streamed both ways; a local failure answers 502
//   with the reason (or cuts an answer already under way). Requests go over kept-alive
//   connections (local-http-client.ts).
// Port mapping: a target port maps to itself unless `--port 8080:3000` says otherwise.
import { connect, type NetConnectOpts } from "node:net";
import type { IncomingConnection, IncomingHttpRequest } from "../session/incoming-traffic.js";
import { STREAM_WRITE_HIGH_WATER_BYTES } from "../session/stream-chunks.js";
import { LocalHttpClient, type LocalHttpOptions } from "./local-http-client.js";

export interface TrafficDeliveryOptions {
  /** Target port → local port. Unlisted ports go to the same local port number. */
  ports?: ReadonlyMap<number, number>;
  /** Local host to connect to (default 127.0.0.1). */
  localHost?: string;
  /** Called on each delivery failure (local app not listening, …), for the CLI's log. */
  onError?: (what: string, err: Error) => void;
  /**
   * Connections and deadlines toward the local process for stolen HTTP requests; its
   * `socketPathFor` applies to raw connections too.
   */
  http?: LocalHttpOptions;
}

/** What delivery needs of a session: its incoming-traffic events (a SessionClient has them). */
export interface TrafficSource {
  on(event: "connection", listener: (c: IncomingConnection) => void): unknown;
  on(event: "httpRequest", listener: (r: IncomingHttpRequest) => void): unknown;
  off(event: "connection", listener: (c: IncomingConnection) => void): unknown;
  off(event: "httpRequest", listener: (r: IncomingHttpRequest) => void): unknown;
}

export class TrafficDelivery {
  /** Counters for the status line and tests. */
  readonly stats = { connections: 0, httpRequests: 0, failures: 0 };
  readonly #o: Required<Omit<TrafficDeliveryOptions, "onError" | "http">> &
    Pick<TrafficDeliveryOptions, "onError">;
  readonly #http: LocalHttpClient;
  readonly #socketPathFor: ((port: number) => string | undefined) | undefined;
  readonly #onConn = (c: IncomingConnection) => this.#connection(c);
  readonly #onReq = (r: IncomingHttpRequest) => void this.#httpRequest(r);

  constructor(
    private readonly session: TrafficSource,
    options: TrafficDeliveryOptions = {},
  ) {
    for (const [from, to] of options.ports ?? [])
      for (const p of [from, to])
        if (!Number.isInteger(p) || p < 1 || p > 65535)
          throw new RangeError(`TrafficDelivery: port ${p} in option ports is not a TCP port`);
    this.#o = {
      ports: options.ports ?? new Map(),
      localHost: options.localHost ?? "127.0.0.1",
      onError: options.onError,
    };
    this.#socketPathFor = options.http?.socketPathFor;
    this.#http = new LocalHttpClient(this.#o.localHost, options.http);
  }

  start(): void {
    this.session.on("connection", this.#onConn);
    this.session.on("httpRequest", this.#onReq);
  }

  /** Stops taking traffic; requests in flight are still answered, then local connections close. */
  stop(): void {
    this.session.off("connection", this.#onConn);
    this.session.off("httpRequest", this.#onReq);
    void this.#http.close();
  }

  localPortFor(targetPort: number): number {
    return this.#o.ports.get(targetPort) ?? targetPort;
  }

  #fail(what: string, err: Error): void {
    this.stats.failures++;
    this.#o.onError?.(what, err);
  }

  #connection(c: IncomingConnection): void {
    this.stats.connections++;
    const port = this.localPortFor(c.info.port);
    const path = this.#socketPathFor?.(port);
    // A frame (up to 256 KiB) written at once does not report the socket full (Node takes
    // the stream option at run time; its types leave it out).
    const hwm = { writableHighWaterMark: STREAM_WRITE_HIGH_WATER_BYTES };
    const to: NetConnectOpts = path ? { path } : { host: this.#o.localHost, port };
    const local = connect(Object.assign(to, hwm));
    local.setNoDelay(true);
    local.on("error", (err) => {
      this.#fail(`${c.info.mode} connection from ${c.info.remoteAddress} to local port ${port}`, err);
      c.destroy();
    });
    c.on("error", () => local.destroy());
    c.on("close", () => local.destroySoon());
    local.on("close", () => c.destroy());
    c.pipe(local);
    // A mirror's copy is read-only: drain the local answer and drop it.
    if (c.info.mode === "mirror") local.resume();
    else local.pipe(c);
  }

  async #httpRequest(r: IncomingHttpRequest): Promise<void> {
    this.stats.httpRequests++;
    const port = this.localPortFor(r.info?.port ?? 0);
    try {
      await this.#http.send(
        port,
        { method: r.method, path: r.path, headers: r.headers, body: r.body, signal: r.signal },
        r,
      );
    } catch (err) {
      // The caller left (or the session dropped): nobody waits for an answer.
      if (r.closed) return;
      this.#fail(`stolen ${r.method} ${r.path} to local port ${port}`, err as Error);
      // A streamed answer that broke was cut already; only an unanswered request gets a 502.
      if (r.answered) return;
      r.respond({
        status: 502,
        headers: [{ name: "content-type", value: "text/plain" }],
        body: Buffer.from(
          `switchyard: the local process did not answer on port ${port}: ${(err as Error).message}\n`,
        ),
      });
    }
  }
}
