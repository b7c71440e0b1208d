// Consistency checks a SessionRoute must pass before the snapshot cache publishes it:
// a router can only serve what is well-formed, so bad tables are stopped at the source
// with an error naming the field, instead of being NACKed by every router.
import { SessionState, type SessionRoute } from "../../../proto/gen/route_discovery_pb.js";
import { isSecretHash } from "../../../proto/session-auth.js";
import { parseSessionKey } from "../../../proto/session-endpoint.js";
import { RouteValidationError } from "./errors.js";

const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** An id that is not a session key (static tables, tests): a DNS subdomain-ish charset. */
const plainIdPattern = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Throws RouteValidationError when the route cannot be served as given. */
export function validateSessionRoute(route: SessionRoute): void {
  const id = route.sessionId;
  const fail = (msg: string): never => {
    throw new RouteValidationError(id, msg);
  };
  // The reconcilers publish session keys (<namespace>:<name>, sessionKey); a malformed key
  // is refused here rather than served under an id no client would ask for.
  if (id.includes(":") ? parseSessionKey(id) === undefined : !plainIdPattern.test(id)) {
    fail(
      "session_id must be a session key <namespace>:<name> (an RFC 1123 label, ':', a DNS subdomain) " +
        "or 1-253 lowercase alphanumerics, '-' or '.', starting and ending alphanumeric",
    );
  }
  if (!isSecretHash(route.clientKeyHash)) {
    fail("client_key_hash must be the lowercase hex sha256 (64 characters) of the client secret");
  }
  if (route.state !== SessionState.CREATING && route.state !== SessionState.READY) {
    fail(`state must be SESSION_STATE_CREATING or SESSION_STATE_READY, got ${route.state}`);
  }
  const seen = new Set<string>();
  let defaults = 0;
  for (const [i, up] of route.upstreams.entries()) {
    const where = `upstreams[${i}]`;
    if (!dnsLabel.test(up.cluster)) fail(`${where}.cluster "${up.cluster}" is not an RFC 1123 label`);
    if (seen.has(up.cluster)) fail(`${where}.cluster "${up.cluster}" appears twice`);
    seen.add(up.cluster);
    let url: URL | undefined;
    try {
      url = new URL(up.url);
    } catch {
      url = undefined;
    }
    if (url === undefined || (url.protocol !== "ws:" && url.protocol !== "wss:")) {
      fail(`${where}.url must be a ws:// or wss:// URL`);
    }
    if (up.secret.length === 0)
      fail(`${where}.secret is empty: every upstream hop proves itself with a secret`);
    if (up.caPem !== "" && !up.caPem.includes("-----BEGIN CERTIFICATE-----")) {
      fail(`${where}.ca_pem is not a PEM certificate bundle`);
    }
    if (up.isDefault) defaults++;
  }
  if (route.state === SessionState.READY) {
    if (route.upstreams.length === 0) fail("a READY session needs at least one upstream");
    if (defaults !== 1) fail(`a READY session needs exactly one is_default upstream, found ${defaults}`);
  } else if (defaults > 1) {
    fail(`at most one upstream may be is_default, found ${defaults}`);
  }
}
