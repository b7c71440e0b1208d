// Reads the claims of a Kubernetes ServiceAccount JWT without verifying it: we hold the
// token only to present it to the cluster that issued it (which verifies it); we need
// its lifetime (exp − iat) and the ServiceAccount it names to request the next one.

export interface ServiceAccountTokenClaims {
  /** Issued-at, seconds since the epoch. */
  iat: number;
  /** Expiry, seconds since the epoch. */
  exp: number;
  namespace: string;
  serviceAccount: string;
  audiences: string[];
}

export class JwtClaimsError extends Error {
  readonly code = "SWITCHYARD_TOKEN_CLAIMS_INVALID";
}

/** Decodes a ServiceAccount JWT's payload. Throws JwtClaimsError (without the token) when it lacks what we need. */
export function readServiceAccountClaims(token: string): ServiceAccountTokenClaims {
  const parts = token.split(".");
  if (parts.length !== 3) throw new JwtClaimsError("token is not a JWT (expected three dot-separated parts)");
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"));
  } catch {
    throw new JwtClaimsError("token payload is not base64url JSON");
  }
  if (payload === null || typeof payload !== "object" || Array.isArray(payload))
    throw new JwtClaimsError("token payload is not a JSON object of claims");
  return claimsOf(payload as Record<string, unknown>);
}

function claimsOf(payload: Record<string, unknown>): ServiceAccountTokenClaims {
  const { iat, exp } = payload;
  if (typeof iat !== "number" || typeof exp !== "number" || exp <= iat)
    throw new JwtClaimsError(
      "token has no usable iat/exp claims; issue a bound token with `kubectl create token <sa> --duration=<d>` (legacy non-expiring Secret tokens cannot be renewed)",
    );
  const k8s = payload["kubernetes.io"] as
    { namespace?: unknown; serviceaccount?: { name?: unknown } } | undefined;
  let namespace = k8s?.namespace;
  let serviceAccount = k8s?.serviceaccount?.name;
  if (
    (typeof namespace !== "string" || typeof serviceAccount !== "string") &&
    typeof payload.sub === "string"
  ) {
    const m = /^system:serviceaccount:([^:]+):([^:]+)$/.exec(payload.sub);
    if (m) [, namespace, serviceAccount] = m;
  }
  if (typeof namespace !== "string" || typeof serviceAccount !== "string")
    throw new JwtClaimsError(
      "token does not name a ServiceAccount (no kubernetes.io claims or system:serviceaccount subject)",
    );
  const aud = payload.aud;
  const audiences = Array.isArray(aud)
    ? aud.filter((a): a is string => typeof a === "string")
    : typeof aud === "string"
      ? [aud]
      : [];
  return { iat, exp, namespace, serviceAccount, audiences };
}
