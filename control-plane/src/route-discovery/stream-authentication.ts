// Who is on the other end of a router stream, settled before anything is read or sent: the
// credentials a call presents (its `authorization` metadata and the TLS client certificate
// the listener verified) go to the RouterAuthenticator; a refusal is counted by its kind,
// logged without the credentials, and becomes the gRPC status that ends the stream —
// UNAUTHENTICATED, PERMISSION_DENIED, or UNAVAILABLE when the authenticator could not decide.
import { status as Status, type Metadata } from "@grpc/grpc-js";
import type { Logger } from "pino";
import { DiscoveryStreamError, RouterAuthError } from "./errors.js";
import type { RouteDiscoveryMetrics } from "./route-discovery-metrics.js";
import type { RouterAuthenticator, RouterIdentity, RouterPeer } from "./router-authenticator.js";

/** The credentials a call presents. */
export function routerPeer(
  metadata: Metadata,
  clientCertificate: RouterPeer["clientCertificate"],
): RouterPeer {
  return { authorization: metadataText(metadata.get("authorization")[0]), clientCertificate };
}

/** The router's identity, or the DiscoveryStreamError that refuses it (counted and logged). */
export async function authenticateRouter(
  authenticator: RouterAuthenticator,
  peer: RouterPeer,
  metrics: RouteDiscoveryMetrics,
  log: Logger,
): Promise<RouterIdentity> {
  try {
    const identity = await authenticator.authenticate(peer);
    metrics.counts.auth.ok++;
    return identity;
  } catch (err) {
    throw authFailure(err, metrics, log);
  }
}

function authFailure(err: unknown, metrics: RouteDiscoveryMetrics, log: Logger): DiscoveryStreamError {
  const failure = err instanceof RouterAuthError ? err.failure : "unavailable";
  metrics.counts.auth[failure]++;
  const message = err instanceof Error ? err.message : String(err);
  log.warn({ failure, reason: message }, "router refused");
  const code =
    failure === "unauthenticated"
      ? Status.UNAUTHENTICATED
      : failure === "permission_denied"
        ? Status.PERMISSION_DENIED
        : Status.UNAVAILABLE;
  return new DiscoveryStreamError(code, message);
}

/** A metadata value as text (binary `-bin` values are not credentials). */
function metadataText(value: string | Buffer | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}
