// Baseline for `npm run bench -- delivery`: how the CLI delivered stolen HTTP requests to
// the local process before it used undici — one fresh node:http connection per request
// (agent: false), the answer collected from the response stream. Copied verbatim from
// cli/src/sdk/local/traffic-delivery.ts as it was (only the HTTP path, the import paths
// and the class name differ); product code no longer contains it. Kept so the bench can
// run the old and the new way side by side in one run.
import { request as httpRequest } from "node:http";
import type { IncomingHttpRequest } from "../../cli/src/sdk/session/incoming-traffic.js";
import type { TrafficSource } from "../../cli/src/sdk/local/traffic-delivery.js";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
]);

export class NodeHttpDelivery {
  readonly stats = { httpRequests: 0, failures: 0 };
  readonly #onReq = (r: IncomingHttpRequest) => void this.#httpRequest(r);

  constructor(
    private readonly session: TrafficSource,
    private readonly localPort: number,
    private readonly localHost = "127.0.0.1",
  ) {}

  start(): void {
    this.session.on("httpRequest", this.#onReq);
  }

  stop(): void {
    this.session.off("httpRequest", this.#onReq);
  }

  async #httpRequest(r: IncomingHttpRequest): Promise<void> {
    this.stats.httpRequests++;
    const port = this.localPort;
    const headers: Array<[string, string]> = [];
    for (const h of r.headers) if (!HOP_BY_HOP.has(h.name.toLowerCase())) headers.push([h.name, h.value]);
    // The bench's stolen requests carry whole bodies.
    headers.push(["content-length", String((r.body as Buffer).length)]);
    // HTTP/1.1 servers (Node's included) refuse requests without Host.
    if (!headers.some(([n]) => n.toLowerCase() === "host"))
      headers.push(["host", `${this.localHost}:${port}`]);
    try {
      const answer = await new Promise<{
        status: number;
        headers: Array<{ name: string; value: string }>;
        body: Buffer;
      }>((resolve, reject) => {
        const req = httpRequest(
          {
            host: this.localHost,
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
      this.stats.failures++;
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
