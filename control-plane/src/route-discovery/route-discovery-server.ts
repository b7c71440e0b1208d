// The network half of RouteDiscovery: an HTTP/2 gRPC listener (TLS unless plaintext is
// explicitly requested) hosting the stream server. It asks TLS for a client certificate
// without requiring one, so token-authenticated and certificate-authenticated routers
// share one port; the authenticator decides, per stream, before anything is sent.
import {
  createServer,
  createSecureServer,
  type Http2Server,
  type Http2ServerRequest,
  type ServerHttp2Session,
} from "node:http2";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { integerIn, OptionError } from "../../../lib/option-error.js";
import { RouteDiscovery } from "../../../proto/gen/route_discovery_pb.js";
import type { RouterPeer } from "./router-authenticator.js";
import { routerTlsPeerKey, type RouteDiscoveryStreamServer } from "./stream-server.js";

export interface RouteDiscoveryServerOptions {
  streams: RouteDiscoveryStreamServer;
  /** Listen address (default 0.0.0.0) and port (0 = pick one; see listen()). */
  host?: string;
  port?: number;
  /** Serving certificate; client CA enables mTLS router authentication. */
  tls?: { certPem: string; keyPem: string; clientCaPem?: string };
  /** Serve without TLS. Only for the embedded environment; must be set explicitly. */
  plaintext?: boolean;
  /** Largest request message accepted, bytes (default 4 MiB). */
  readMaxBytes?: number;
}

export class RouteDiscoveryServer {
  private readonly opts: RouteDiscoveryServerOptions;
  private server: Http2Server | undefined;
  private readonly sessions = new Set<ServerHttp2Session>();

  constructor(opts: RouteDiscoveryServerOptions) {
    if (!opts.streams) throw new OptionError("streams", "a RouteDiscoveryStreamServer is required");
    if (opts.tls && opts.plaintext) {
      throw new OptionError("plaintext", "cannot be combined with tls; choose one");
    }
    if (!opts.tls && opts.plaintext !== true) {
      throw new OptionError(
        "tls",
        "routing tables carry secrets: give tls.certPem/keyPem, or set plaintext: true explicitly (embedded use only)",
      );
    }
    if (opts.tls && (!opts.tls.certPem || !opts.tls.keyPem)) {
      throw new OptionError("tls", "certPem and keyPem are both required");
    }
    integerIn("port", opts.port, 0, 0, 65535);
    this.opts = opts;
  }

  /** Starts listening; resolves with the bound port and the URL routers dial. */
  async listen(): Promise<{ port: number; url: string }> {
    if (this.server) throw new Error("RouteDiscoveryServer is already listening");
    const handler = connectNodeAdapter({
      routes: (router) => router.service(RouteDiscovery, this.opts.streams.service),
      grpc: true,
      grpcWeb: false,
      connect: false,
      readMaxBytes: this.opts.readMaxBytes ?? 4 * 1024 * 1024,
      contextValues: (req) => createContextValues().set(routerTlsPeerKey, tlsPeer(req as Http2ServerRequest)),
    });
    const tls = this.opts.tls;
    const server = tls
      ? createSecureServer(
          {
            cert: tls.certPem,
            key: tls.keyPem,
            ...(tls.clientCaPem ? { ca: tls.clientCaPem, requestCert: true, rejectUnauthorized: false } : {}),
            allowHTTP1: false,
          },
          handler,
        )
      : createServer(handler);
    server.on("session", (s) => {
      this.sessions.add(s);
      s.once("close", () => this.sessions.delete(s));
    });
    this.server = server;
    const host = this.opts.host ?? "0.0.0.0";
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.opts.port ?? 0, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    const port = (server.address() as AddressInfo).port;
    const urlHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
    return { port, url: `${tls ? "https" : "http"}://${urlHost}:${port}` };
  }

  /** Ends every stream (UNAVAILABLE) and stops listening. Safe to call twice. */
  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    this.opts.streams.closeAll();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    // Let the handlers write their UNAVAILABLE status before the connections go.
    const deadline = Date.now() + 1000;
    while (this.opts.streams.connectedRouters().length > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
    for (const s of this.sessions) s.close();
    const grace = setTimeout(() => {
      for (const s of this.sessions) s.destroy();
    }, 100);
    await closed;
    clearTimeout(grace);
  }

  /** Listens until `signal` aborts, then closes. */
  async start(signal: AbortSignal): Promise<void> {
    await this.listen();
    if (!signal.aborted)
      await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
    await this.close();
  }
}

function tlsPeer(req: Http2ServerRequest): RouterPeer["clientCertificate"] {
  const socket = req.stream?.session?.socket as TLSSocket | undefined;
  if (!socket || typeof socket.getPeerCertificate !== "function") return undefined;
  const cert = socket.getPeerCertificate();
  if (!cert || Object.keys(cert).length === 0) return undefined;
  const cn = cert.subject?.CN;
  return {
    authorized: socket.authorized === true,
    commonName: Array.isArray(cn) ? cn[0] : cn,
    authorizationError: socket.authorizationError ? String(socket.authorizationError) : undefined,
  };
}
