// What a RouteDiscoveryClient is given and how it is checked: the control plane's URL with
// the credentials it requires (TLS with a CA for https://, plaintext only when asked for; a
// token or a client certificate), the router's id, its sink, the timings, and the reconnect
// backoff. `resolveClientOptions` refuses a bad option with an OptionError naming it, before
// any connection is tried, and returns the settings the client runs with.
import type { Logger } from "pino";
import type { BackoffPolicy } from "../../../lib/backoff.js";
import { OptionError, positive } from "../../../lib/option-error.js";
import type { RouteSink } from "./route-discovery-push.js";

/**
 * Reconnect delays: exponential with jitter (delay × [0.8, 1.2]), so a fleet of routers
 * that lost the control plane at the same moment does not reconnect in lockstep.
 */
export const RECONNECT_BACKOFF: Required<BackoffPolicy> = {
  initialMs: 250,
  maxMs: 10_000,
  multiplier: 2,
  jitter: 0.2,
};

export interface RouteDiscoveryClientCredentials {
  /** ServiceAccount token, read at every (re)connect so a rotated token is picked up. */
  token?: () => string | Promise<string>;
  /** CA to verify the control plane (required for https://), and an optional client certificate for mTLS. */
  tls?: { ca: string; cert?: string; key?: string };
  /** Allow an http:// URL (embedded environment only); must be set explicitly. */
  plaintext?: boolean;
}

export interface RouteDiscoveryClientOptions {
  /** https://host:port of the control plane's RouteDiscovery service. */
  url: string;
  /** Stable id of this router (e.g. its pod name). */
  routerId: string;
  sink: RouteSink;
  /** Session ids that have a live client on this router now. */
  liveSessions: () => string[];
  credentials: RouteDiscoveryClientCredentials;
  /** Reconnect delays; each field defaults to RECONNECT_BACKOFF's. */
  backoff?: Partial<BackoffPolicy>;
  /** Period of live-session reports, ms (default 5 000; heartbeats are written every 10 s). */
  liveSessionsIntervalMs?: number;
  /** HTTP/2 PING period to detect a dead control plane on an idle stream, ms (default 15 000). */
  keepaliveIntervalMs?: number;
  /** A stream open this long without error resets the backoff, ms (default 5 000). */
  stableAfterMs?: number;
  /**
   * A connection not established (TCP, TLS, HTTP/2) within this is abandoned and the next
   * attempt dials anew, ms (default 5 000). Through a Service, a dial may reach a control-plane
   * pod that is gone (an endpoint not yet removed): its SYNs go unanswered for a minute or more.
   */
  connectTimeoutMs?: number;
  /** Called once for every push NACKed, with the error detail sent (the router counts them). */
  onRejected?: (detail: string) => void;
  logger?: Logger;
}

/** The checked options, with every default filled in. */
export interface ClientSettings {
  url: URL;
  backoff: Required<BackoffPolicy>;
  liveIntervalMs: number;
  stableAfterMs: number;
  connectTimeoutMs: number;
  keepaliveMs: number;
}

/** Checks `opts` whole (throws an OptionError naming the first bad option) and fills in the defaults. */
export function resolveClientOptions(opts: RouteDiscoveryClientOptions): ClientSettings {
  let url: URL;
  try {
    url = new URL(opts.url);
  } catch {
    throw new OptionError("url", `"${opts.url}" is not a URL; expected https://host:port`);
  }
  if (url.protocol === "https:") {
    if (!opts.credentials?.tls?.ca) {
      throw new OptionError("credentials.tls.ca", "required to verify the control plane over https");
    }
  } else if (url.protocol === "http:") {
    if (opts.credentials?.plaintext !== true) {
      throw new OptionError(
        "url",
        "http:// sends routing secrets in clear; use https:// or set credentials.plaintext: true explicitly",
      );
    }
  } else {
    throw new OptionError("url", `protocol ${url.protocol} unsupported; use https://`);
  }
  const tls = opts.credentials.tls;
  if (tls && (tls.cert === undefined) !== (tls.key === undefined)) {
    throw new OptionError("credentials.tls", "cert and key go together for mTLS");
  }
  if (!opts.credentials.token && !tls?.cert && opts.credentials.plaintext !== true) {
    throw new OptionError(
      "credentials",
      "give a ServiceAccount token or a client certificate: the control plane refuses anonymous routers",
    );
  }
  if (!opts.routerId) throw new OptionError("routerId", "required (e.g. the pod name)");
  if (typeof opts.sink?.apply !== "function") throw new OptionError("sink", "must have apply()");
  if (typeof opts.liveSessions !== "function") {
    throw new OptionError("liveSessions", "must be a function returning session ids");
  }
  const liveIntervalMs = positive("liveSessionsIntervalMs", opts.liveSessionsIntervalMs, 5_000);
  const stableAfterMs = positive("stableAfterMs", opts.stableAfterMs, 5_000);
  const connectTimeoutMs = positive("connectTimeoutMs", opts.connectTimeoutMs, 5_000);
  const keepaliveMs = positive("keepaliveIntervalMs", opts.keepaliveIntervalMs, 15_000);
  const b = opts.backoff ?? {};
  const d = RECONNECT_BACKOFF;
  const backoff = {
    initialMs: b.initialMs ?? d.initialMs,
    maxMs: b.maxMs ?? d.maxMs,
    multiplier: b.multiplier ?? d.multiplier,
    jitter: b.jitter ?? d.jitter,
  };
  return { url, backoff, liveIntervalMs, stableAfterMs, connectTimeoutMs, keepaliveMs };
}
