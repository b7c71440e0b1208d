// Delivers a session's incoming traffic to the developer's local process:
// - raw connections (mirrored, or stolen without an HTTP filter) become local TCP
//   connections to the mapped local port; for a steal the local answer goes back to the
//   caller, for a mirror it is discarded;
// - stolen HTTP requests (filtered steals) are replayed as local HTTP requests and the
//   local response is sent back; a local failure answers 502 with the reason.
// Port mapping: a target port maps to itself unless `--port 8080:3000` says otherwise.
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import type { IncomingConnection, IncomingHttpRequest } from "../session/incoming-traffic.js";
import type { SessionClient } from "../session/session-client.js";

export interface TrafficDeliveryOptions {
  /** Target port → local port. Unlisted ports go to the same local port number. */
  ports?: ReadonlyMap<number, number>;
  /** Local host to connect to (default 127.0.0.1). */
  localHost?: string;
  /** Called on each delivery failure (local app not listening, …), for the CLI's log. */
  onError?: (what: string, err: Error) => void;
}

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
]);

export class TrafficDelivery {
  /** Counters for the status line and tests. */
  readonly stats = { connections: 0, httpRequests: 0, failures: 0 };
  readonly #o: Required<Omit<TrafficDeliveryOptions, "onError">> & Pick<TrafficDeliveryOptions, "onError">;
  readonly #onConn = (c: IncomingConnection) => this.#connection(c);
  readonly #onReq = (r: IncomingHttpRequest) => void this.#httpRequest(r);

  constructor(
    private readonly session: SessionClient,
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
  }

  start(): void {
    this.session.on("connection", this.#onConn);
    this.session.on("httpRequest", this.#onReq);
  }

  stop(): void {
    this.session.off("connection", this.#onConn);
    this.session.off("httpRequest", this.#onReq);
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
    const local = connect({ host: this.#o.localHost, port });
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
    const headers: Array<[string, string]> = [];
    for (const h of r.headers) if (!HOP_BY_HOP.has(h.name.toLowerCase())) headers.push([h.name, h.value]);
    headers.push(["content-length", String(r.body.length)]);
    // HTTP/1.1 servers (Node's included) refuse requests without Host.
    if (!headers.some(([n]) => n.toLowerCase() === "host"))
      headers.push(["host", `${this.#o.localHost}:${port}`]);
    try {
      const answer = await new Promise<{
        status: number;
        headers: Array<{ name: string; value: string }>;
        body: Buffer;
      }>((resolve, reject) => {
        const req = httpRequest(
          {
            host: this.#o.localHost,
            port,
            method: r.method,
            path: r.path,
            headers: headers.flat(),
            agent: false,
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("error", reject);
            res.on("end", () => {
              const out: Array<{ name: string; value: string }> = [];
              for (let i = 0; i < res.rawHeaders.length; i += 2) {
                const name = res.rawHeaders[i]!;
                if (!HOP_BY_HOP.has(name.toLowerCase()) && name.toLowerCase() !== "content-length")
                  out.push({ name, value: res.rawHeaders[i + 1]! });
              }
              resolve({ status: res.statusCode ?? 502, headers: out, body: Buffer.concat(chunks) });
            });
          },
        );
        req.on("error", reject);
        req.end(r.body);
      });
      r.respond(answer);
    } catch (err) {
      this.#fail(`stolen ${r.method} ${r.path} to local port ${port}`, err as Error);
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
