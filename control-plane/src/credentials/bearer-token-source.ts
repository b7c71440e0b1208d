// bearerToken auth: starts from the token in the cluster's Secret, reads its lifetime
// from the JWT (exp − iat) and, `renewBeforeExpiryMs` before it expires, asks the
// remote cluster for a new one through the TokenRequest API
// (serviceaccounts/<sa>/token, authenticated with the current token) with the same
// lifetime (at least the API's minimum of 10 minutes) and audiences. Every request uses
// the newest token. A failed renewal is retried with capped exponential backoff and shows
// in status() at once, while the old token still works, so an operator sees the problem
// before the cluster is lost. Each renewed token is handed to `saveToken` (the cluster's
// Secret) so a restarted control plane does not start from a token that expired long
// ago; a failed save is retried with the same backoff and shows as a warning. Waits run
// on the injectable Clock (not lib/abortable-sleep) so tests move time forward.
import type { Logger } from "pino";
import { pino } from "pino";
import { firstLine } from "../../../lib/api-error.js";
import { backoffDelay, type BackoffPolicy } from "../../../lib/backoff.js";
import { OptionError, positive } from "../../../lib/option-error.js";
import { systemClock, type Clock } from "./clock.js";
import {
  CredentialError,
  type CredentialSource,
  type CredentialStatus,
  type RenewalRecorder,
  type RequestCredentials,
} from "./credential-source.js";
import { readServiceAccountClaims, type ServiceAccountTokenClaims } from "./jwt-claims.js";

/** The API server refuses TokenRequests for less than 10 minutes (expirationSeconds ≥ 600). */
export const MIN_TOKEN_REQUEST_SECONDS = 600;

export interface TokenRequestInput {
  namespace: string;
  serviceAccount: string;
  /** Requested lifetime in seconds (the current token's exp − iat, at least MIN_TOKEN_REQUEST_SECONDS). */
  expirationSeconds: number;
  audiences: string[];
}

export interface BearerTokenSourceOptions {
  cluster: string;
  /** The token from the Secret. */
  initialToken: string;
  /** Calls TokenRequest on the remote cluster (with this source's current token) and returns the new token. */
  requestToken: (input: TokenRequestInput) => Promise<string>;
  /**
   * Saves each renewed token where a restarted control plane reads it (the cluster's Secret).
   * Default: none, the renewed token lives in memory only.
   */
  saveToken?: (token: string) => Promise<void>;
  clock?: Clock;
  /** Renew this long before expiry, in ms. Default: a fifth of the token's lifetime. */
  renewBeforeExpiryMs?: number;
  /** First retry delay after a failed renewal, in ms (default 1 000); doubles per failure. */
  initialBackoffMs?: number;
  /** Cap of the retry delay, in ms (default 60 000). */
  maxBackoffMs?: number;
  logger?: Logger;
  recordRenewal?: RenewalRecorder;
}

export class BearerTokenSource implements CredentialSource {
  readonly authType = "bearerToken" as const;
  private token: string;
  private claims: ServiceAccountTokenClaims;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private failures = 0;
  private lastError: string | undefined;
  /** A renewed token not saved yet, and why the last save failed. */
  private unsaved: string | undefined;
  private saveFailures = 0;
  private saveError: string | undefined;
  private kick = new AbortController();
  private readonly retry: BackoffPolicy;

  constructor(private readonly options: BearerTokenSourceOptions) {
    if (!options.cluster) throw new OptionError("cluster", "is required");
    if (typeof options.requestToken !== "function")
      throw new OptionError("requestToken", "is required (the TokenRequest call)");
    if (options.renewBeforeExpiryMs !== undefined)
      positive("renewBeforeExpiryMs", options.renewBeforeExpiryMs, 0);
    const initialMs = positive("initialBackoffMs", options.initialBackoffMs, 1_000);
    // A cap below the first delay means the delay never grows.
    const maxMs = Math.max(initialMs, positive("maxBackoffMs", options.maxBackoffMs, 60_000));
    this.retry = { initialMs, maxMs };
    this.clock = options.clock ?? systemClock;
    this.logger = (options.logger ?? pino({ level: "silent" })).child({
      cluster: options.cluster,
      authType: "bearerToken",
    });
    this.token = options.initialToken;
    this.claims = readServiceAccountClaims(options.initialToken);
  }

  /**
   * Replaces the token (the Secret changed): it becomes current and renewal reschedules.
   * The token in use already (our own save coming back through the watch) changes nothing.
   */
  replaceToken(token: string): void {
    if (token === this.token) {
      if (token === this.unsaved) this.saved();
      return;
    }
    const claims = readServiceAccountClaims(token);
    this.token = token;
    this.claims = claims;
    this.failures = 0;
    this.lastError = undefined;
    // The Secret holds a token at least as good as the unsaved one; nothing to save.
    this.saved();
    this.kick.abort();
  }

  async apply(opts: RequestCredentials): Promise<void> {
    opts.headers = { ...(opts.headers ?? {}), Authorization: `Bearer ${this.token}` };
  }

  status(): CredentialStatus {
    return {
      authType: this.authType,
      expiresAt: this.claims.exp * 1000,
      obtainedAt: this.claims.iat * 1000,
      failures: this.failures,
      ...(this.lastError ? { error: this.lastError } : {}),
      ...(this.saveError ? { warning: this.saveError } : {}),
    };
  }

  /** ms since epoch when the current token will be renewed. */
  renewAt(): number {
    const lifetimeMs = (this.claims.exp - this.claims.iat) * 1000;
    const before = this.options.renewBeforeExpiryMs ?? lifetimeMs / 5;
    return this.claims.exp * 1000 - Math.min(before, lifetimeMs);
  }

  /** Delay before the next renewal attempt after `failures` consecutive failures, ms. */
  private retryDelay(): number {
    return backoffDelay(this.retry, this.failures - 1);
  }

  async start(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const untilRenewal = this.renewAt() - this.clock.now();
      const saving = this.unsaved !== undefined && this.failures === 0;
      let wait = untilRenewal;
      if (this.failures > 0) wait = this.retryDelay();
      // A save is tried at once, then with backoff, never past the next renewal (which saves anew).
      else if (saving && this.saveFailures > 0)
        wait = Math.min(untilRenewal, backoffDelay(this.retry, this.saveFailures - 1));
      else if (saving) wait = 0;
      // Woken early: either stopped, or the token was replaced (failures are then 0).
      if (wait > 0 && !(await this.sleep(wait, signal))) continue;
      if (signal.aborted) break;
      if (saving && this.clock.now() < this.renewAt()) {
        await this.save();
        continue;
      }
      try {
        await this.renew();
      } catch (err) {
        this.failures++;
        const expiresIn = Math.round((this.claims.exp * 1000 - this.clock.now()) / 1000);
        this.lastError =
          `token renewal via TokenRequest for serviceaccount ${this.claims.namespace}/${this.claims.serviceAccount} failed ` +
          `(attempt ${this.failures}): ${firstLine(err)}; ` +
          (expiresIn > 0
            ? `the current token expires in ${expiresIn}s`
            : `the current token has expired; put a fresh token in the cluster's Secret`);
        this.logger.warn(
          { failures: this.failures, retryInMs: this.retryDelay(), expiresInSeconds: expiresIn },
          this.lastError,
        );
        this.options.recordRenewal?.(this.authType, "failure");
      }
    }
  }

  private async renew(): Promise<void> {
    const c = this.claims;
    const token = await this.options.requestToken({
      namespace: c.namespace,
      serviceAccount: c.serviceAccount,
      expirationSeconds: Math.max(c.exp - c.iat, MIN_TOKEN_REQUEST_SECONDS),
      audiences: c.audiences,
    });
    const claims = readServiceAccountClaims(token);
    if (claims.exp * 1000 <= this.clock.now())
      throw new CredentialError(
        "SWITCHYARD_CREDENTIAL_RENEWAL_FAILED",
        "TokenRequest returned an already expired token",
      );
    this.token = token;
    this.claims = claims;
    this.failures = 0;
    this.lastError = undefined;
    this.logger.info({ expiresAt: new Date(claims.exp * 1000).toISOString() }, "bearer token renewed");
    this.options.recordRenewal?.(this.authType, "success");
    if (this.options.saveToken) {
      this.unsaved = token;
      this.saveFailures = 0;
    }
  }

  /** Saves the renewed token; a failure is kept for status() and retried by start(). */
  private async save(): Promise<void> {
    const token = this.unsaved;
    if (token === undefined || !this.options.saveToken) return;
    try {
      await this.options.saveToken(token);
      if (this.unsaved === token) this.saved();
      this.logger.info("renewed bearer token saved in the cluster's Secret");
    } catch (err) {
      if (this.unsaved !== token) return; // replaced meanwhile
      this.saveFailures++;
      this.saveError =
        `the renewed token could not be saved in the cluster's Secret (attempt ${this.saveFailures}): ` +
        `${firstLine(err)}; a restarted control plane would start from the Secret's older token`;
      this.logger.warn({ failures: this.saveFailures }, this.saveError);
    }
  }

  private saved(): void {
    this.unsaved = undefined;
    this.saveFailures = 0;
    this.saveError = undefined;
  }

  /** Sleeps on the clock; false when woken early by stop or replaceToken. */
  private async sleep(ms: number, signal: AbortSignal): Promise<boolean> {
    if (this.kick.signal.aborted) this.kick = new AbortController();
    try {
      await this.clock.sleep(ms, AbortSignal.any([signal, this.kick.signal]));
      return true;
    } catch {
      if (this.kick.signal.aborted) this.kick = new AbortController();
      return false;
    }
  }
}
