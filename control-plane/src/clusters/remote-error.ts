// Turns what a failed call to a remote API server throws (HTTP status, TLS or socket
// error, our timeout) into a short message that says what is wrong and what to check.
// These messages go to SwitchyardOperator status and logs, so they never carry
// credentials: we build them from codes, not from request data. Calls to the Primary's
// own API server use lib/api-error.ts (`describeApiError`) directly; this adds the hints
// that only make sense for a remote cluster (auth type, TLS trust, reachability).
import { apiStatus, apiStatusMessage, firstLine } from "../../../lib/api-error.js";
import type { AuthType } from "../credentials/credential-source.js";
import { RemoteRequestTimeoutError } from "./request-timeout.js";

const TLS_TRUST_CODES = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE",
  "CERT_UNTRUSTED",
]);

const AUTH_HINT: Record<AuthType, string> = {
  bearerToken: "the token is invalid or expired; put a fresh token in the cluster's Secret (key token)",
  eks: "the IAM principal is not mapped on the cluster; add an access entry for the control plane's role",
  mtls: "the client certificate is not signed by a CA the cluster trusts, or has expired; check tls.crt/tls.key",
};

export function describeRemoteError(err: unknown, authType: AuthType, server: string): string {
  if (err instanceof RemoteRequestTimeoutError) return err.message.replace(/^cluster "[^"]*": /, "");
  const e = err as { code?: unknown; body?: unknown };
  const status = apiStatus(err);
  if (status !== undefined) {
    const reason = apiStatusMessage(e.body);
    if (status === 401)
      return `the API server rejected our credentials (401 Unauthorized): ${AUTH_HINT[authType]}`;
    if (status === 403)
      return `forbidden (403): ${reason || "the control plane's identity lacks permissions"}; install the member ClusterRoles (multiClusterMember=true)`;
    return `the API server answered ${status}${reason ? `: ${reason}` : ""}`;
  }
  const code = typeof e.code === "string" ? e.code : undefined;
  if (code && TLS_TRUST_CODES.has(code))
    return `TLS: the certificate of ${server} is not signed by the CA in caData (${code}); set caData to the cluster's CA bundle`;
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID")
    return `TLS: the certificate of ${server} does not name that host; use the server address the certificate was issued for`;
  if (code === "CERT_HAS_EXPIRED") return `TLS: the certificate of ${server} has expired`;
  if (code === "ECONNREFUSED") return `unreachable: connection refused by ${server}`;
  if (code === "ECONNRESET") return `unreachable: connection reset by ${server}`;
  if (code === "ENOTFOUND" || code === "EAI_AGAIN")
    return `unreachable: cannot resolve the host of ${server}`;
  if (code === "ETIMEDOUT" || code === "EHOSTUNREACH" || code === "ENETUNREACH")
    return `unreachable: ${code} to ${server}`;
  const msg = firstLine(err);
  return code ? `${msg} (${code})` : msg;
}
