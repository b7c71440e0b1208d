// Saves a renewed bearer token into its cluster's credential Secret (key `renewed-token`),
// so a control plane that restarts or takes over after the Secret's own `token` expired
// still reaches the cluster: tokens renewed through TokenRequest would otherwise live only
// in the memory of the process that renewed them. `token` stays as the operator (or Helm)
// wrote it; Helm never renders `renewed-token`, so an upgrade leaves it alone.
//
// Several replicas renew independently. The write is a merge patch guarded by the Secret's
// resourceVersion and skipped when the stored token was issued no earlier than ours, so
// the Secret only ever moves to a newer token and concurrent writers converge on the
// newest. RBAC: `patch` on exactly the `switchyard-cluster-<name>` Secrets (the chart
// grants it by resourceNames); `get` of them comes with the Role that watches them.
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from "@kubernetes/client-node";
import { apiStatus, describeApiError } from "../../../lib/api-error.js";
import { integerIn, OptionError } from "../../../lib/option-error.js";
import { readServiceAccountClaims } from "../credentials/jwt-claims.js";
import { credentialSecretName, RENEWED_TOKEN_KEY } from "./credential-secret.js";

export interface RenewedTokenWriterOptions {
  /** The Primary's own KubeConfig (the control plane's identity). */
  kubeConfig: KubeConfig;
  /** The control plane's namespace, where the credential Secrets live. */
  namespace: string;
  /** Writes lost to a concurrent writer (409) are retried this many times in all (default 3). */
  attempts?: number;
}

export type SaveOutcome = "saved" | "newer-stored";

export class RenewedTokenWriteError extends Error {
  override readonly name = "RenewedTokenWriteError";
  readonly code = "SWITCHYARD_RENEWED_TOKEN_NOT_SAVED";
}

export const RENEWED_TOKEN_FIELD_MANAGER = "switchyard-credential-renewal";

export class RenewedTokenWriter {
  private readonly core: CoreV1Api;
  private readonly attempts: number;

  constructor(private readonly options: RenewedTokenWriterOptions) {
    if (!options.kubeConfig) throw new OptionError("kubeConfig", "is required (the Primary's own)");
    if (!options.namespace) throw new OptionError("namespace", "is required (the control plane's)");
    this.attempts = integerIn("attempts", options.attempts, 3, 1, 10);
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
  }

  /**
   * Stores `token` as `renewed-token` of cluster `cluster`'s Secret unless a token issued no
   * earlier is already there. Throws RenewedTokenWriteError (never containing a token).
   */
  async save(cluster: string, token: string): Promise<SaveOutcome> {
    const name = credentialSecretName(cluster);
    const namespace = this.options.namespace;
    const issuedAt = readServiceAccountClaims(token).iat;
    const fail = (what: string, err: unknown) =>
      new RenewedTokenWriteError(
        `saving the renewed token in Secret ${namespace}/${name} failed: ${what}: ${describeApiError(err)}`,
      );
    for (let attempt = 1; ; attempt++) {
      let secret;
      try {
        secret = await this.core.readNamespacedSecret({ name, namespace });
      } catch (err) {
        throw fail("reading it", err);
      }
      const stored = secret.data?.[RENEWED_TOKEN_KEY];
      if (stored !== undefined && storedIssuedAt(stored) >= issuedAt) return "newer-stored";
      try {
        await this.core.patchNamespacedSecret(
          {
            name,
            namespace,
            fieldManager: RENEWED_TOKEN_FIELD_MANAGER,
            body: {
              metadata: { resourceVersion: secret.metadata?.resourceVersion },
              data: { [RENEWED_TOKEN_KEY]: Buffer.from(token, "utf8").toString("base64") },
            },
          },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        );
        return "saved";
      } catch (err) {
        // Someone wrote the Secret since we read it: read again and decide again.
        if (apiStatus(err) === 409 && attempt < this.attempts) continue;
        throw fail("patching it", err);
      }
    }
  }
}

/** iat of a stored token; -1 when unreadable (then ours replaces it). */
function storedIssuedAt(base64: string): number {
  try {
    return readServiceAccountClaims(Buffer.from(base64, "base64").toString("utf8").trim()).iat;
  } catch {
    return -1;
  }
}
