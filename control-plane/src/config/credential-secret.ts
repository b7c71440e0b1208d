// The per-cluster credential Secret: `switchyard-cluster-<name>` in the control plane's
// namespace, labelled `switchyard.dev/remote-cluster-credentials=true`. Which keys it
// must hold depends on the cluster's authType:
//   bearerToken → `token`   (a ServiceAccount JWT, e.g. from `kubectl create token`)
//   mtls        → `tls.crt`, `tls.key` (PEM client certificate and key; a kubernetes.io/tls Secret works)
//   eks         → no Secret: AWS credentials come from the default provider chain.
// A bad Secret fails only its own cluster: the error goes to that cluster's status.
import { X509Certificate, createPrivateKey } from "node:crypto";
import type { AuthType } from "./cluster-config.js";
import { ClusterConfigError } from "./cluster-config-error.js";

export const CREDENTIALS_LABEL = "switchyard.dev/remote-cluster-credentials";
export const CREDENTIALS_SECRET_PREFIX = "switchyard-cluster-";
export const SECRET_KEYS = { bearerToken: ["token"], mtls: ["tls.crt", "tls.key"], eks: [] } as const;

export const credentialSecretName = (cluster: string): string => `${CREDENTIALS_SECRET_PREFIX}${cluster}`;

export type ClusterCredentialMaterial =
  | { readonly authType: "bearerToken"; readonly token: string }
  | { readonly authType: "mtls"; readonly certPem: string; readonly keyPem: string }
  | { readonly authType: "eks" };

const secretError = (cluster: string, field: string, problem: string, fix: string) =>
  new ClusterConfigError("SWITCHYARD_CLUSTER_SECRET_INVALID", cluster, field, problem, fix);

/**
 * Reads the credential material for one cluster from its Secret's `data` (base64 values,
 * as the API returns them). `data` undefined means the Secret does not exist.
 * Throws ClusterConfigError naming the Secret key and the fix; never includes secret values.
 */
export function parseCredentialSecret(
  cluster: string,
  authType: AuthType,
  data: Record<string, string> | undefined,
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
    return { authType, token };
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
