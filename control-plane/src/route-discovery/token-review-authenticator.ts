// Authenticates routers by ServiceAccount bearer token with a real TokenReview against
// the control plane's own Kubernetes API server, then checks the ServiceAccount against
// an allow-list. Results are cached briefly (keyed by the token's sha256, never the token)
// so a reconnect storm of N routers costs N reviews, not N per retry.
import { createHash } from "node:crypto";
import { AuthenticationV1Api, type KubeConfig } from "@kubernetes/client-node";
import { nonNegative, OptionError } from "../../../lib/option-error.js";
import { RouterAuthError } from "./errors.js";
import type { BearerTokenAuthenticator, RouterIdentity } from "./router-authenticator.js";

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

export interface TokenReviewResult {
  authenticated: boolean;
  username: string;
  /** Audiences the API server says the token is valid for. */
  audiences: string[];
  error: string;
}

/** Performs one TokenReview; injectable so the cache and allow-list logic stay testable. */
export type TokenReviewer = (token: string, audiences: readonly string[]) => Promise<TokenReviewResult>;

export interface TokenReviewAuthenticatorOptions {
  /** The API server to review tokens with (the control plane's in-cluster config). */
  kubeConfig?: KubeConfig;
  /** Alternative to kubeConfig (tests, other transports). */
  reviewer?: TokenReviewer;
  /** ServiceAccounts whose tokens may stream routes. Required, non-empty. */
  allowedServiceAccounts: readonly ServiceAccountRef[];
  /** Audiences the token must be valid for (default: the API server's own). */
  audiences?: readonly string[];
  /** How long a positive review is trusted, ms (default 30 000). */
  cacheTtlMs?: number;
  /** How long a negative review is remembered, ms (default 5 000). */
  negativeCacheTtlMs?: number;
  /** Upper bound for one TokenReview call, ms (default 5 000); beyond it the router gets UNAVAILABLE. */
  reviewTimeoutMs?: number;
  /** Cache entries at most (default 1 024). */
  maxCacheEntries?: number;
  now?: () => number;
}

const saPrefix = "system:serviceaccount:";
const dnsSubdomain = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

interface CacheEntry {
  expiresAt: number;
  outcome: Promise<RouterIdentity>;
}

export class TokenReviewAuthenticator implements BearerTokenAuthenticator {
  private readonly reviewer: TokenReviewer;
  private readonly allowed: ReadonlySet<string>;
  private readonly audiences: readonly string[];
  private readonly ttl: number;
  private readonly negativeTtl: number;
  private readonly maxEntries: number;
  private readonly reviewTimeoutMs: number;
  private readonly now: () => number;
  private readonly cache = new Map<string, CacheEntry>();

  constructor(opts: TokenReviewAuthenticatorOptions) {
    if (!opts.reviewer && !opts.kubeConfig) {
      throw new OptionError("kubeConfig", "required to run TokenReviews (or pass `reviewer`)");
    }
    if (!opts.allowedServiceAccounts || opts.allowedServiceAccounts.length === 0) {
      throw new OptionError(
        "allowedServiceAccounts",
        "list the router ServiceAccounts (namespace/name) allowed to receive routing tables",
      );
    }
    for (const sa of opts.allowedServiceAccounts) {
      if (!dnsSubdomain.test(sa.namespace) || !dnsSubdomain.test(sa.name)) {
        throw new OptionError(
          "allowedServiceAccounts",
          `"${sa.namespace}/${sa.name}" is not a valid namespace/name pair`,
        );
      }
    }
    this.ttl = nonNegative("cacheTtlMs", opts.cacheTtlMs, 30_000);
    this.negativeTtl = nonNegative("negativeCacheTtlMs", opts.negativeCacheTtlMs, 5_000);
    this.reviewTimeoutMs = nonNegative("reviewTimeoutMs", opts.reviewTimeoutMs, 5_000);
    this.maxEntries = Math.max(1, nonNegative("maxCacheEntries", opts.maxCacheEntries, 1024));
    this.allowed = new Set(opts.allowedServiceAccounts.map((sa) => `${saPrefix}${sa.namespace}:${sa.name}`));
    this.audiences = opts.audiences ?? [];
    this.now = opts.now ?? Date.now;
    this.reviewer = opts.reviewer ?? kubeTokenReviewer(opts.kubeConfig!);
  }

  authenticate(token: string): Promise<RouterIdentity> {
    const key = createHash("sha256").update(token).digest("hex");
    const now = this.now();
    const hit = this.cache.get(key);
    if (hit && hit.expiresAt > now) return hit.outcome;
    if (hit) this.cache.delete(key);

    const outcome = this.review(token);
    // In-flight reviews are shared; the entry's lifetime is fixed once the answer is known.
    const entry: CacheEntry = { expiresAt: Number.POSITIVE_INFINITY, outcome };
    this.cache.set(key, entry);
    this.evict();
    outcome.then(
      () => (entry.expiresAt = this.now() + this.ttl),
      (err: unknown) => {
        // An unreachable API server says nothing about the token: do not remember it.
        if (err instanceof RouterAuthError && err.failure !== "unavailable") {
          entry.expiresAt = this.now() + this.negativeTtl;
        } else if (this.cache.get(key) === entry) {
          this.cache.delete(key);
        }
      },
    );
    return outcome;
  }

  private async review(token: string): Promise<RouterIdentity> {
    let result: TokenReviewResult;
    try {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${this.reviewTimeoutMs} ms`)),
          this.reviewTimeoutMs,
        );
      });
      try {
        result = await Promise.race([this.reviewer(token, this.audiences), timeout]);
      } finally {
        clearTimeout(timer);
      }
    } catch (err) {
      throw new RouterAuthError(
        "unavailable",
        `TokenReview failed, cannot authenticate the router right now: ${(err as Error).message ?? String(err)}`,
      );
    }
    if (!result.authenticated) {
      throw new RouterAuthError(
        "unauthenticated",
        `ServiceAccount token rejected by TokenReview${result.error ? `: ${result.error}` : ""}`,
      );
    }
    if (this.audiences.length > 0 && !result.audiences.some((a) => this.audiences.includes(a))) {
      throw new RouterAuthError(
        "unauthenticated",
        `token is not valid for audiences ${this.audiences.join(", ")}`,
      );
    }
    if (!this.allowed.has(result.username)) {
      throw new RouterAuthError(
        "permission_denied",
        `"${result.username}" is not an allowed router ServiceAccount; add it to allowedServiceAccounts`,
      );
    }
    return { kind: "serviceAccount", name: result.username };
  }

  private evict(): void {
    if (this.cache.size <= this.maxEntries) return;
    const now = this.now();
    for (const [k, e] of this.cache) if (e.expiresAt <= now) this.cache.delete(k);
    // Still full: drop the oldest insertions (Map keeps insertion order).
    for (const k of this.cache.keys()) {
      if (this.cache.size <= this.maxEntries) break;
      this.cache.delete(k);
    }
  }
}

/** A TokenReviewer backed by the authentication.k8s.io/v1 API of `kc`'s cluster. */
export function kubeTokenReviewer(kc: KubeConfig): TokenReviewer {
  const api = kc.makeApiClient(AuthenticationV1Api);
  return async (token, audiences) => {
    const review = await api.createTokenReview({
      body: {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenReview",
        spec: { token, ...(audiences.length > 0 ? { audiences: [...audiences] } : {}) },
      },
    });
    const s = review.status;
    return {
      authenticated: s?.authenticated === true,
      username: s?.user?.username ?? "",
      audiences: s?.audiences ?? [],
      error: s?.error ?? "",
    };
  };
}
