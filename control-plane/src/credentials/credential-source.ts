// The seam between "how we prove who we are to a remote cluster" (bearer token, EKS
// token, client certificate) and the Kubernetes client that uses it. A source is asked
// for credentials on every request, so a renewal is picked up by the next request
// without rebuilding any client.

/** How the control plane proves who it is to a remote cluster (a cluster's `authType`). */
export const AUTH_TYPES = ["bearerToken", "eks", "mtls"] as const;
export type AuthType = (typeof AUTH_TYPES)[number];

/** Request options a source may set (a subset of https.RequestOptions). */
export interface RequestCredentials {
  headers?: Record<string, unknown>;
  cert?: string | Buffer | Array<string | Buffer>;
  key?: string | Buffer | Array<string | Buffer | object>;
}

export interface CredentialStatus {
  readonly authType: AuthType;
  /** When the credential in use stops working (ms since epoch), when known. */
  readonly expiresAt?: number;
  /** When the credential in use was obtained (ms since epoch). */
  readonly obtainedAt?: number;
  /** Consecutive renewal failures since the last success. */
  readonly failures: number;
  /** The last renewal/refresh problem, cleared on success. Never contains secret material. */
  readonly error?: string;
  /** Something that will break soon (e.g. a client certificate close to expiry). */
  readonly warning?: string;
}

/** Renewal outcomes, for metrics. */
export type RenewalRecorder = (authType: AuthType, outcome: "success" | "failure") => void;

export interface CredentialSource {
  readonly authType: AuthType;
  /** Puts the current credential on a request. Rejects when none can be produced. */
  apply(opts: RequestCredentials): Promise<void>;
  status(): CredentialStatus;
  /** Runs background renewal until `signal` aborts. */
  start(signal: AbortSignal): Promise<void>;
}

export class CredentialError extends Error {
  constructor(
    readonly code:
      | "SWITCHYARD_CREDENTIAL_RENEWAL_FAILED"
      | "SWITCHYARD_CREDENTIAL_UNAVAILABLE"
      | "SWITCHYARD_CREDENTIAL_EXPIRED",
    message: string,
  ) {
    super(message);
  }
}
