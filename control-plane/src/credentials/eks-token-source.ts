// eks auth: mints an EKS token (eks-token.ts) from AWS credentials of the default
// provider chain (IRSA web identity, EKS pod identity, env, …) and reuses it for
// `refreshIntervalMs` (10 minutes: well inside the URL's 15-minute validity), then
// mints a new one on the next request. Minting is single-flight so a burst of requests
// does not sign a burst of URLs.
import { defaultProvider } from "@aws-sdk/credential-provider-node";
import type { Logger } from "pino";
import { pino } from "pino";
import { untilAborted } from "../../../lib/abortable-sleep.js";
import { firstLine } from "../../../lib/api-error.js";
import { OptionError } from "../../../lib/option-error.js";
import { systemClock, type Clock } from "./clock.js";
import {
  CredentialError,
  type CredentialSource,
  type CredentialStatus,
  type RenewalRecorder,
  type RequestCredentials,
} from "./credential-source.js";
import { createEksToken, EKS_TOKEN_URL_TTL_SECONDS, type AwsCredentials } from "./eks-token.js";

export interface EksTokenSourceOptions {
  /** EKS cluster name, signed into every token. */
  cluster: string;
  region: string;
  /** Where AWS credentials come from (default: the AWS SDK default provider chain). */
  credentialProvider?: () => Promise<AwsCredentials>;
  clock?: Clock;
  /** Mint a new token after this many ms (default 600 000). */
  refreshIntervalMs?: number;
  logger?: Logger;
  recordRenewal?: RenewalRecorder;
}

export class EksTokenSource implements CredentialSource {
  readonly authType = "eks" as const;
  private token: string | undefined;
  private mintedAt = 0;
  private minting: Promise<string> | undefined;
  private failures = 0;
  private lastError: string | undefined;
  private readonly clock: Clock;
  private readonly refreshIntervalMs: number;
  private readonly credentialProvider: () => Promise<AwsCredentials>;
  private readonly logger: Logger;

  constructor(private readonly options: EksTokenSourceOptions) {
    if (!options.cluster) throw new OptionError("cluster", "is required (the EKS cluster name)");
    if (!options.region) throw new OptionError("region", "is required (the STS region)");
    const r = options.refreshIntervalMs ?? 600_000;
    if (!(r > 0 && r < EKS_TOKEN_URL_TTL_SECONDS * 1000))
      throw new OptionError(
        "refreshIntervalMs",
        `must be between 0 and ${EKS_TOKEN_URL_TTL_SECONDS * 1000} (the URL's validity), got ${r}`,
      );
    this.refreshIntervalMs = r;
    this.clock = options.clock ?? systemClock;
    this.credentialProvider = options.credentialProvider ?? defaultProvider();
    this.logger = (options.logger ?? pino({ level: "silent" })).child({
      cluster: options.cluster,
      authType: "eks",
    });
  }

  async apply(opts: RequestCredentials): Promise<void> {
    const token = await this.current();
    opts.headers = { ...(opts.headers ?? {}), Authorization: `Bearer ${token}` };
  }

  /** The token in use, minting a new one when it is older than the refresh interval. */
  async current(): Promise<string> {
    if (this.token && this.clock.now() - this.mintedAt < this.refreshIntervalMs) return this.token;
    this.minting ??= this.mint().finally(() => (this.minting = undefined));
    return this.minting;
  }

  status(): CredentialStatus {
    return {
      authType: this.authType,
      ...(this.token
        ? { obtainedAt: this.mintedAt, expiresAt: this.mintedAt + EKS_TOKEN_URL_TTL_SECONDS * 1000 }
        : {}),
      failures: this.failures,
      ...(this.lastError ? { error: this.lastError } : {}),
    };
  }

  async start(signal: AbortSignal): Promise<void> {
    // Minting is on demand; nothing runs in the background.
    await untilAborted(signal);
  }

  private async mint(): Promise<string> {
    const now = this.clock.now();
    try {
      const credentials = await this.credentialProvider();
      const token = await createEksToken({
        clusterName: this.options.cluster,
        region: this.options.region,
        credentials,
        signingDate: new Date(now),
      });
      this.token = token;
      this.mintedAt = now;
      this.failures = 0;
      this.lastError = undefined;
      this.options.recordRenewal?.(this.authType, "success");
      this.logger.debug("eks token minted");
      return token;
    } catch (err) {
      this.failures++;
      this.lastError = `could not sign an EKS token with AWS credentials from the default provider chain: ${firstLine(err)}`;
      this.options.recordRenewal?.(this.authType, "failure");
      this.logger.warn({ failures: this.failures }, this.lastError);
      throw new CredentialError("SWITCHYARD_CREDENTIAL_UNAVAILABLE", this.lastError);
    }
  }
}
