// mtls auth: the client certificate and key from the cluster's Secret. We do not rotate
// them (the issuer is outside our reach) but pick up a changed Secret on the next
// request, report the certificate's expiry, and warn `warnBeforeExpiryMs` before it lapses.
import { X509Certificate } from "node:crypto";
import { untilAborted } from "../../../lib/abortable-sleep.js";
import { nonNegative, OptionError } from "../../../lib/option-error.js";
import { systemClock, type Clock } from "./clock.js";
import type { CredentialSource, CredentialStatus, RequestCredentials } from "./credential-source.js";

export interface MtlsCredentialSourceOptions {
  cluster: string;
  certPem: string;
  keyPem: string;
  clock?: Clock;
  /** Warn this long before the certificate expires, in ms (default 7 days). */
  warnBeforeExpiryMs?: number;
}

export class MtlsCredentialSource implements CredentialSource {
  readonly authType = "mtls" as const;
  private certPem: string;
  private keyPem: string;
  private notAfter: number;
  private loadedAt: number;
  private readonly clock: Clock;
  private readonly warnBeforeMs: number;

  constructor(private readonly options: MtlsCredentialSourceOptions) {
    if (!options.cluster) throw new OptionError("cluster", "is required");
    this.warnBeforeMs = nonNegative("warnBeforeExpiryMs", options.warnBeforeExpiryMs, 7 * 86_400_000);
    this.clock = options.clock ?? systemClock;
    this.certPem = options.certPem;
    this.keyPem = options.keyPem;
    this.notAfter = Date.parse(new X509Certificate(options.certPem).validTo);
    this.loadedAt = this.clock.now();
  }

  /** The Secret changed: use the new pair from the next request on. */
  update(certPem: string, keyPem: string): void {
    this.notAfter = Date.parse(new X509Certificate(certPem).validTo);
    this.certPem = certPem;
    this.keyPem = keyPem;
    this.loadedAt = this.clock.now();
  }

  async apply(opts: RequestCredentials): Promise<void> {
    opts.cert = this.certPem;
    opts.key = this.keyPem;
  }

  status(): CredentialStatus {
    const left = this.notAfter - this.clock.now();
    const at = new Date(this.notAfter).toISOString();
    return {
      authType: this.authType,
      expiresAt: this.notAfter,
      obtainedAt: this.loadedAt,
      failures: 0,
      ...(left <= 0
        ? { error: `client certificate expired at ${at}; put a new tls.crt/tls.key in the cluster's Secret` }
        : left <= this.warnBeforeMs
          ? { warning: `client certificate expires at ${at}; rotate tls.crt/tls.key in the cluster's Secret` }
          : {}),
    };
  }

  async start(signal: AbortSignal): Promise<void> {
    await untilAborted(signal);
  }
}
