// Decides who a connecting router is, before it may receive a single route: routing
// tables carry upstream secrets. A router proves itself with a ServiceAccount bearer
// token (checked by TokenReview, see token-review-authenticator.ts) or with a client
// certificate the TLS layer verified against the configured router CA. Either way the
// identity must be on an allow-list; nothing else gets through.
import { OptionError } from "../../../lib/option-error.js";
import { RouterAuthError } from "./errors.js";

/** What the transport knows about the peer of one stream. */
export interface RouterPeer {
  /** The raw `authorization` request header, if any. */
  authorization: string | undefined;
  /** Present when the peer sent a client certificate over TLS. */
  clientCertificate:
    | {
        /** True when the TLS layer verified the chain against the configured client CA. */
        authorized: boolean;
        commonName: string | undefined;
        /** Why verification failed, from the TLS layer (e.g. UNABLE_TO_VERIFY_LEAF_SIGNATURE). */
        authorizationError: string | undefined;
      }
    | undefined;
}

export interface RouterIdentity {
  kind: "serviceAccount" | "clientCertificate";
  /** `system:serviceaccount:<ns>:<name>` or `cn:<common name>`: safe to log. */
  name: string;
}

/** Checks a bearer token; see TokenReviewAuthenticator. */
export interface BearerTokenAuthenticator {
  authenticate(token: string): Promise<RouterIdentity>;
}

export interface RouterAuthenticatorOptions {
  /** Bearer-token (ServiceAccount) authentication; omitted = tokens are refused. */
  bearer?: BearerTokenAuthenticator;
  /**
   * Client-certificate authentication. The CA itself is configured on the TLS listener
   * (RouteDiscoveryServer `tls.clientCaPem`); here only which verified subjects may pass.
   * `allowedCommonNames` omitted = any certificate the CA signed. Omitted = certificates ignored.
   */
  clientCertificate?: { allowedCommonNames?: readonly string[] };
}

export class RouterAuthenticator {
  private readonly bearer: BearerTokenAuthenticator | undefined;
  private readonly certAllowed: ReadonlySet<string> | undefined;
  private readonly certEnabled: boolean;

  constructor(opts: RouterAuthenticatorOptions) {
    if (!opts.bearer && !opts.clientCertificate) {
      throw new OptionError(
        "bearer/clientCertificate",
        "configure at least one way for routers to authenticate (ServiceAccount tokens or client certificates)",
      );
    }
    const cns = opts.clientCertificate?.allowedCommonNames;
    if (cns !== undefined && (cns.length === 0 || cns.some((c) => c.length === 0))) {
      throw new OptionError(
        "clientCertificate.allowedCommonNames",
        "must list at least one non-empty common name, or be omitted to accept any certificate the CA signed",
      );
    }
    this.bearer = opts.bearer;
    this.certEnabled = opts.clientCertificate !== undefined;
    this.certAllowed = cns ? new Set(cns) : undefined;
  }

  /** Resolves the router's identity or throws RouterAuthError. */
  async authenticate(peer: RouterPeer): Promise<RouterIdentity> {
    if (peer.authorization !== undefined) {
      const m = /^Bearer ([^\s]+)$/i.exec(peer.authorization.trim());
      if (!m) {
        throw new RouterAuthError(
          "unauthenticated",
          "authorization header must be `Bearer <ServiceAccount token>`",
        );
      }
      if (!this.bearer) {
        throw new RouterAuthError(
          "unauthenticated",
          "bearer tokens are not accepted by this control plane; authenticate with a client certificate",
        );
      }
      return this.bearer.authenticate(m[1]!);
    }
    const cert = peer.clientCertificate;
    if (this.certEnabled && cert !== undefined) {
      if (!cert.authorized) {
        throw new RouterAuthError(
          "unauthenticated",
          `client certificate not signed by the configured router CA (${cert.authorizationError ?? "unverified"})`,
        );
      }
      const cn = cert.commonName ?? "";
      if (this.certAllowed && !this.certAllowed.has(cn)) {
        throw new RouterAuthError(
          "permission_denied",
          `client certificate CN "${cn}" is not in the allowed router common names`,
        );
      }
      return { kind: "clientCertificate", name: `cn:${cn}` };
    }
    throw new RouterAuthError(
      "unauthenticated",
      "no credentials: present a ServiceAccount bearer token" +
        (this.certEnabled ? " or a client certificate signed by the router CA" : ""),
    );
  }
}
