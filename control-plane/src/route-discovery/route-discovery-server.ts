// The network half of RouteDiscovery: a @grpc/grpc-js server (TLS unless plaintext is
// explicitly requested) hosting the stream server. With a router CA it asks TLS for a
// client certificate without requiring one, so token-authenticated and
// certificate-authenticated routers share one port; the authenticator decides, per stream,
// before anything is sent.
//
// Connections are bounded in age (default 30 minutes, as Istio bounds its proxies'): the
// server sends GOAWAY, routers reopen their stream on a new connection, and behind a
// Service that new connection may land on another replica, so streams rebalance after a
// scale-up instead of staying where they first landed. Keepalive pings find dead peers on
// idle streams (an up-to-date router receives nothing for hours).
import {
  experimental,
  Server,
  ServerCredentials,
  type ChannelOptions,
  type ServerDuplexStream,
} from "@grpc/grpc-js";
import { integerIn, OptionError } from "../../../lib/option-error.js";
import {
  RouteDiscoveryService,
  type RouteDiscoveryHandlers,
} from "../../../proto/route-discovery-service.js";
import { tolerantDecoder } from "./malformed-request.js";
import type { RouterPeer } from "./router-authenticator.js";
import type { RouteDiscoveryStreamServer } from "./stream-server.js";

/** Longest delay a Node timer holds (2^31-1 ms); longer ones fire at once. */
const TIMER_LIMIT_MS = 2_147_483_647;
/** Longest connection age such a timer holds with grpc-js's +10 % jitter (about 22 days). */
export const MAX_CONNECTION_AGE_LIMIT_MS = 1_950_000_000;

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
  /**
   * A connection older than this gets GOAWAY and its routers reconnect, ms (default
   * 1 800 000 = 30 min; grpc-js adds ±10 % jitter so a fleet does not reconnect at once).
   */
  maxConnectionAgeMs?: number;
  /** After GOAWAY, how long streams may go on before the connection is closed, ms (default 10 000). */
  maxConnectionAgeGraceMs?: number;
  /** Period of the server's HTTP/2 PINGs on every connection, ms (default 30 000). */
  keepaliveTimeMs?: number;
  /** A PING unanswered this long drops the connection, ms (default 10 000). */
  keepaliveTimeoutMs?: number;
  /** Shortest client PING interval this server allows, ms (default 10 000; routers ping every 15 000). */
  minClientPingIntervalMs?: number;
}

/**
 * Channel arguments of the server. grpc-js acts on the connection-age, keepalive and size
 * arguments; it never refuses client PINGs, so the ping policy arguments only state the
 * allowance (routers ping every 15 s, also on an idle stream) for any gRPC implementation
 * that enforces one — C-core and Go answer faster pings with GOAWAY "too_many_pings".
 */
function channelOptions(o: RouteDiscoveryServerOptions): ChannelOptions {
  return {
    "grpc.max_receive_message_length": integerIn("readMaxBytes", o.readMaxBytes, 4 * 1024 * 1024, 1),
    "grpc.max_connection_age_ms": integerIn(
      "maxConnectionAgeMs",
      o.maxConnectionAgeMs,
      30 * 60_000,
      1,
      MAX_CONNECTION_AGE_LIMIT_MS,
    ),
    "grpc.max_connection_age_grace_ms": integerIn(
      "maxConnectionAgeGraceMs",
      o.maxConnectionAgeGraceMs,
      10_000,
      1,
      MAX_CONNECTION_AGE_LIMIT_MS,
    ),
    "grpc.keepalive_time_ms": integerIn("keepaliveTimeMs", o.keepaliveTimeMs, 30_000, 1, TIMER_LIMIT_MS),
    "grpc.keepalive_timeout_ms": integerIn(
      "keepaliveTimeoutMs",
      o.keepaliveTimeoutMs,
      10_000,
      1,
      TIMER_LIMIT_MS,
    ),
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.http2.min_ping_interval_without_data_ms": integerIn(
      "minClientPingIntervalMs",
      o.minClientPingIntervalMs,
      10_000,
      1,
      TIMER_LIMIT_MS,
    ),
  };
}

export class RouteDiscoveryServer {
  private readonly opts: RouteDiscoveryServerOptions;
  private readonly channelOptions: ChannelOptions;
  private server: Server | undefined;

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
    this.channelOptions = channelOptions(opts);
    this.opts = opts;
  }

  /** Starts listening; resolves with the bound port and the URL routers dial. */
  async listen(): Promise<{ port: number; url: string }> {
    if (this.server) throw new Error("RouteDiscoveryServer is already listening");
    const server = new Server(this.channelOptions);
    const streams = this.opts.streams;
    const handlers: RouteDiscoveryHandlers = {
      StreamRoutes: (call) => streams.serve(call, verifiedCertificate(call)),
    };
    // Bytes that are not a DiscoveryRequest reach the stream server as a marker, which ends
    // the stream with INVALID_ARGUMENT (counted) instead of grpc-js's bare INTERNAL.
    const method = RouteDiscoveryService.StreamRoutes;
    server.addService(
      {
        ...RouteDiscoveryService,
        StreamRoutes: { ...method, requestDeserialize: tolerantDecoder(method.requestDeserialize) },
      },
      handlers,
    );
    this.server = server;
    const host = this.opts.host ?? "0.0.0.0";
    const address = host.includes(":") ? `[${host}]` : host;
    let port: number;
    try {
      port = await new Promise<number>((resolve, reject) =>
        server.bindAsync(`${address}:${this.opts.port ?? 0}`, this.credentials(), (err, bound) =>
          err ? reject(err) : resolve(bound),
        ),
      );
    } catch (err) {
      this.server = undefined;
      server.forceShutdown();
      throw err;
    }
    const urlHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : address;
    return { port, url: `${this.opts.tls ? "https" : "http"}://${urlHost}:${port}` };
  }

  /** Ends every stream (UNAVAILABLE) and stops listening. Safe to call twice. */
  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    this.opts.streams.closeAll();
    // Let the handlers write their UNAVAILABLE status before the connections go.
    const deadline = Date.now() + 1000;
    while (this.opts.streams.connectedRouters().length > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, 100);
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }

  /** Listens until `signal` aborts, then closes. */
  async start(signal: AbortSignal): Promise<void> {
    await this.listen();
    if (!signal.aborted)
      await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
    await this.close();
  }

  private credentials(): ServerCredentials {
    const tls = this.opts.tls;
    if (!tls) return ServerCredentials.createInsecure();
    const identity = { certificate: Buffer.from(tls.certPem), privateKey: Buffer.from(tls.keyPem) };
    if (!tls.clientCaPem) {
      return ServerCredentials.createSsl(
        null,
        [{ cert_chain: identity.certificate, private_key: identity.privateKey }],
        false,
      );
    }
    // Ask for a client certificate but do not require one (tokens share the port).
    // createSsl can only do "never ask" or "require"; certificate providers can do both.
    const certificates = new StaticCertificates(identity, { caCertificate: Buffer.from(tls.clientCaPem) });
    return experimental.createCertificateProviderServerCredentials(certificates, certificates, false);
  }
}

/**
 * Fixed certificates for grpc-js's certificate-provider credentials. Listeners are called
 * on the next microtask, as a real provider would: grpc-js registers its own watcher only
 * after adding the listener, and drops an update delivered synchronously (the listener
 * then serves no certificate at all and refuses every connection).
 */
class StaticCertificates implements experimental.CertificateProvider {
  constructor(
    private readonly identity: experimental.IdentityCertificateUpdate,
    private readonly ca: experimental.CaCertificateUpdate,
  ) {}
  addCaCertificateListener(listener: experimental.CaCertificateUpdateListener): void {
    queueMicrotask(() => listener(this.ca));
  }
  removeCaCertificateListener(): void {}
  addIdentityCertificateListener(listener: experimental.IdentityCertificateUpdateListener): void {
    queueMicrotask(() => listener(this.identity));
  }
  removeIdentityCertificateListener(): void {}
}

/**
 * The client certificate TLS verified against the router CA, if any. grpc-js exposes a
 * peer certificate only when it verified, so one the CA did not sign looks like none (the
 * router is refused as unauthenticated either way).
 */
function verifiedCertificate(call: ServerDuplexStream<unknown, unknown>): RouterPeer["clientCertificate"] {
  const cert = call.getAuthContext().sslPeerCertificate;
  if (!cert || Object.keys(cert).length === 0) return undefined;
  const cn = cert.subject?.CN;
  return {
    authorized: true,
    commonName: Array.isArray(cn) ? cn[0] : cn,
    authorizationError: undefined,
  };
}
