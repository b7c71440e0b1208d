// /metrics (Prometheus text from the process's Registry), /healthz (the process runs) and
// /readyz (the routing table is ready to serve routers) on a plain-HTTP port.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";

export interface HealthServerOptions {
  registry: Registry;
  host: string;
  port: number;
  ready: () => boolean;
}

export class HealthServer {
  private server: Server | undefined;

  constructor(private readonly opts: HealthServerOptions) {}

  async listen(): Promise<number> {
    const server = createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0];
      if (path === "/healthz") {
        res.writeHead(200, { "content-type": "text/plain" }).end("ok\n");
      } else if (path === "/readyz") {
        const ready = this.opts.ready();
        res
          .writeHead(ready ? 200 : 503, { "content-type": "text/plain" })
          .end(ready ? "ready\n" : "routing table not ready\n");
      } else if (path === "/metrics") {
        this.opts.registry
          .metrics()
          .then((text) => res.writeHead(200, { "content-type": this.opts.registry.contentType }).end(text))
          .catch((err: Error) => res.writeHead(500).end(`${err.message}\n`));
      } else {
        res
          .writeHead(404, { "content-type": "text/plain" })
          .end("not found: try /metrics, /healthz or /readyz\n");
      }
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.opts.port, this.opts.host, () => resolve());
    });
    return (server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
