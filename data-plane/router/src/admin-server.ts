// The router's admin listener: /metrics (Prometheus), /healthz, /readyz and the debug views
// /debug/routes (the routing table redacted, plus the attached sessions; ?session=<id> for
// one) and /debug/memory, on a plain-HTTP port of its own (--admin-listen, loopback unless
// told otherwise). They are not on the session port: session ids, upstream URLs and pod
// addresses are for operators and Prometheus, not for whoever reaches the routers' Service.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { integerIn } from "../../../lib/option-error.js";
import { ErrorCode } from "../../../proto/error-codes.js";
import type { RouterMetrics } from "./router-metrics.js";
import type { RoutingTable } from "./routing-table.js";
import type { SessionRegistry } from "./session-registry.js";

export interface AdminListen {
  /** Listen address; default "127.0.0.1" (reachable from the router's own host or pod only). */
  host?: string;
  /** Listen port; 0 picks a free one. Default 9091. */
  port?: number;
}

/** What the admin endpoints read: the router's own objects. */
export interface AdminView {
  metrics: RouterMetrics;
  table: RoutingTable;
  sessions: SessionRegistry;
  logger: Logger;
}

export const ADMIN_PATHS = ["/metrics", "/healthz", "/readyz", "/debug/routes", "/debug/memory"] as const;

export class AdminServer {
  private readonly server: Server;
  private readonly host: string;
  private readonly port: number;

  constructor(
    private readonly view: AdminView,
    listen: AdminListen = {},
  ) {
    this.port = integerIn("admin.port", listen.port, 9091, 0, 65535);
    this.host = listen.host ?? "127.0.0.1";
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  /** Starts listening; resolves with the bound address. */
  async listen(): Promise<AddressInfo> {
    await listenOn(this.server, this.host, this.port, "admin listener", "--admin-listen");
    return this.server.address() as AddressInfo;
  }

  /** The bound address; undefined before listen(). */
  address(): AddressInfo | undefined {
    return (this.server.address() as AddressInfo | null) ?? undefined;
  }

  async close(): Promise<void> {
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://admin");
    const path = url.pathname;
    const { metrics, table, sessions } = this.view;
    try {
      switch (path) {
        case "/metrics":
          res.writeHead(200, { "content-type": metrics.registry.contentType });
          res.end(await metrics.registry.metrics());
          return;
        case "/healthz":
          return text(res, 200, "ok\n");
        case "/readyz":
          return table.loaded ? text(res, 200, "ok\n") : text(res, 503, "no routing table yet\n");
        case "/debug/routes": {
          // ?session=<id>: that session only (a large table costs a poller and the router).
          const id = url.searchParams.get("session") ?? undefined;
          if (id !== undefined && !table.get(id))
            return json(res, 404, {
              code: ErrorCode.NOT_FOUND,
              message: `session ${JSON.stringify(id.slice(0, 320))} is not in this router's table (version ${JSON.stringify(table.version)}); /debug/routes lists them all`,
            });
          return json(res, 200, debugRoutes(table, sessions, id));
        }
        case "/debug/memory": {
          // ?gc=1 with --expose-gc: collect first, so benchmarks read live heap, not garbage.
          if (url.searchParams.get("gc") === "1") (globalThis as { gc?: () => void }).gc?.();
          return json(res, 200, {
            ...process.memoryUsage(),
            cpu: process.cpuUsage(),
            sessions: sessions.size,
          });
        }
        default:
          return json(res, 404, {
            code: ErrorCode.NOT_FOUND,
            message: `no handler for ${path}; the admin port serves ${ADMIN_PATHS.join(", ")}`,
          });
      }
    } catch (err) {
      this.view.logger.error({ err }, "admin handler failed");
      if (!res.headersSent) json(res, 500, { code: ErrorCode.INTERNAL, message: "internal error" });
    }
  }
}

/**
 * The table (secrets and hashes redacted) and what each attached session's links are doing;
 * `sessionId`'s only when given.
 */
function debugRoutes(table: RoutingTable, sessions: SessionRegistry, sessionId?: string): unknown {
  const one = sessionId === undefined ? undefined : sessions.get(sessionId);
  const attached = sessionId === undefined ? [...sessions.values()] : one ? [one] : [];
  return {
    ...table.redacted(sessionId),
    attached: attached.map((s) => ({
      sessionId: s.id,
      connections: s.connectionCount,
      clientBufferedBytes: s.clientBufferedBytes,
      upstreams: [...s.upstreamLinks()].map((l) => ({
        cluster: l.cluster,
        state: l.state,
        isDefault: l.isDefault,
        multiplexed: l.multiplexed,
        lastError: l.lastError,
        bufferedBytes: l.bufferedBytes,
        connections: s.connectionsOn(l),
      })),
    })),
  };
}

/**
 * Listens on host:port; a failure (e.g. EADDRINUSE) names the listener, the address and the
 * flag that moves it.
 */
export async function listenOn(
  server: Server,
  host: string,
  port: number,
  what: string,
  flag: string,
): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const fail = (err: NodeJS.ErrnoException) =>
      reject(
        new Error(
          `${what}: cannot listen on ${host}:${port} (${err.code ?? err.message}); give a free address with ${flag} (port 0 picks one)`,
        ),
      );
    server.once("error", fail);
    server.listen(port, host, () => {
      server.off("error", fail);
      resolve();
    });
  });
}

export function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
  res.end(body);
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}
