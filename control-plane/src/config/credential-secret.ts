// The per-cluster credential Secret: `switchyard-cluster-<name>` in the control plane's
// namespace, labelled `switchyard.dev/remote-cluster-credentials=true`. Which keys it
// must hold depends on the cluster's authType:
//   bearerToken → `token`   (a ServiceAccount JWT, e.g. from `kubectl create token`), and
//                 `renewed-token`, written by the control plane after each TokenRequest
//                 renewal so that a restarted or failed-over control plane starts from the
//                 newest token, not from one that expired long ago (renewed-token-writer.ts)
//   mtls        → `tls.crt`, `tls.key` (PEM client certificate and key; a kubernetes.io/tls Secret works)
//   eks         → no Secret: AWS credentials come from the default provider chain.
// A bad Secret fails only its own cluster: the error goes to that cluster's status.
import { X509Certificate, createPrivateKey } from "node:crypto";
import {
  JwtClaimsError,
  readServiceAccountClaims,
  type ServiceAccountTokenClaims,
} from "../credentials/jwt-claims.js";
import type { AuthType } from "../credentials/credential-source.js";
import { ClusterConfigError } from "./cluster-config-error.js";

export const CREDENTIALS_LABEL = "switchyard.dev/remote-cluster-credentials";
export const CREDENTIALS_SECRET_PREFIX = "switchyard-cluster-";
export const SECRET_KEYS = { bearerToken: ["token"], mtls: ["tls.crt", "tls.key"], eks: [] } as const;
/** Key of the newest renewed bearer token, written by the control plane (never by Helm). */
export const RENEWED_TOKEN_KEY = "renewed-token";

export const credentialSecretName = (cluster: string): string => `${CREDENTIALS_SECRET_PREFIX}${cluster}`;

export type ClusterCredentialMaterial =
  | {
      readonly authType: "bearerToken";
      /** The token to start from: the newer of `token` and `renewed-token` (see pickBearerToken). */
      readonly token: string;
      /**
       * Saves a renewed token into this Secret's `renewed-token`. Set by ClusterConfigSource;
       * a function, so comparing materials (JSON) still compares the token only.
       */
      readonly saveRenewedToken?: (token: string) => Promise<void>;
    }
  | { readonly authType: "mtls"; readonly certPem: string; readonly keyPem: string }
  | { readonly authType: "eks" };

const secretError = (cluster: string, field: string, problem: string, fix: string) =>
  new ClusterConfigError("SWITCHYARD_CLUSTER_SECRET_INVALID", cluster, field, problem, fix);

/**
 * Reads the credential material for one cluster from its Secret's `data` (base64 values,
 * as the API returns them). `data` undefined means the Secret does not exist.
 * Throws ClusterConfigError naming the Secret key and the fix; never includes secret values.
 * `nowMs` decides which bearer token is still valid (see pickBearerToken).
 */
export function parseCredentialSecret(
  cluster: string,
  authType: AuthType,
  data: Record<string, string> | undefined,
  nowMs: number = Date.now(),
): ClusterCredentialMaterial {
  if (authType === "eks") return { authType };
  const secret = credentialSecretName(cluster);
  const label = `labelled ${CREDENTIALS_LABEL}=true`;
  if (data === undefined)
    throw secretError(
      cluster,
      `Secret ${secret}`,
      "does not exist",
      `create Secret ${secret} ${label} with key${authType === "mtls" ? "s tls.crt and tls.key" : " token"}`,
    );
  const get = (key: string): string => {
    const v = data[key];
    if (v === undefined || v === "")
      throw secretError(
        cluster,
        `Secret ${secret} key ${key}`,
        `is missing (authType ${authType} needs ${SECRET_KEYS[authType].join(" and ")})`,
        `add key ${key} to Secret ${secret}`,
      );
    return Buffer.from(v, "base64").toString("utf8").trim();
  };
  if (authType === "bearerToken") {
    const token = get("token");
    if (token.split(".").length !== 3)
      throw secretError(
        cluster,
        `Secret ${secret} key token`,
        "is not a JWT",
        "store a ServiceAccount token (kubectl create token <sa> -n <ns> --duration=24h)",
      );
    const renewed = data[RENEWED_TOKEN_KEY];
    const renewedToken = renewed ? Buffer.from(renewed, "base64").toString("utf8").trim() : undefined;
    const picked = pickBearerToken(token, renewedToken, nowMs);
    // Renewal needs the claims (lifetime, ServiceAccount): a token without them would only
    // fail later, as "credentials unusable", without naming the Secret key.
    try {
      readServiceAccountClaims(picked);
    } catch (err) {
      if (!(err instanceof JwtClaimsError)) throw err;
      throw secretError(
        cluster,
        `Secret ${secret} key ${picked === token ? "token" : RENEWED_TOKEN_KEY}`,
        `is not a usable ServiceAccount token: ${err.message.replace(/^token /, "")}`,
        "store a bound ServiceAccount token (kubectl create token <sa> -n <ns> --duration=24h)",
      );
    }
    return { authType, token: picked };
  }
  const certPem = get("tls.crt");
  const keyPem = get("tls.key");
  try {
    new X509Certificate(certPem);
  } catch {
    throw secretError(
      cluster,
      `Secret ${secret} key tls.crt`,
      "is not a PEM certificate",
      "store the PEM client certificate",
    );
  }
  try {
    createPrivateKey(keyPem);
  } catch {
    throw secretError(
      cluster,
      `Secret ${secret} key tls.key`,
      "is not a PEM private key",
      "store the PEM private key",
    );
  }
  if (!new X509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem)))
    throw secretError(
      cluster,
      `Secret ${secret} key tls.key`,
      "does not match the certificate in tls.crt",
      "store the key that belongs to the certificate",
    );
  return { authType, certPem, keyPem };
}

/**
 * The token a control plane starts from: `token` (what the operator put in the Secret) or
 * `renewed-token` (what a control plane renewed and saved). One that has not expired wins
 * over one that has; between two of the same kind the one issued later wins, and on a tie
 * `token`, so a fresh token an operator stores always takes over. A token whose claims
 * cannot be read loses to one whose claims can (its lifetime is unknown).
 */
export function pickBearerToken(token: string, renewedToken: string | undefined, nowMs: number): string {
  if (!renewedToken || renewedToken === token) return token;
  const rank = (t: string): [number, number] | undefined => {
    let c: ServiceAccountTokenClaims;
    try {
      c = readServiceAccountClaims(t);
    } catch {
      return undefined;
    }
    return [c.exp * 1000 > nowMs ? 1 : 0, c.iat];
  };
  const a = rank(token);
  const b = rank(renewedToken);
  if (b === undefined) return token;
  if (a === undefined) return renewedToken;
  return b[0] > a[0] || (b[0] === a[0] && b[1] > a[1]) ? renewedToken : token;
}
