// Builds the credential source and client for one remote cluster from its configuration
// and Secret material. The bearer source renews through the TokenRequest API of the
// same cluster, authenticated with its own current token, so the two are wired here.
import { CoreV1Api } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { RemoteClusterConfig } from "../config/cluster-config.js";
import type { ClusterCredentialMaterial } from "../config/credential-secret.js";
import { BearerTokenSource, type TokenRequestInput } from "../credentials/bearer-token-source.js";
import type { Clock } from "../credentials/clock.js";
import {
  CredentialError,
  type CredentialSource,
  type RenewalRecorder,
} from "../credentials/credential-source.js";
import type { AwsCredentials } from "../credentials/eks-token.js";
import { EksTokenSource } from "../credentials/eks-token-source.js";
import { MtlsCredentialSource } from "../credentials/mtls-credential-source.js";
import { RemoteClusterClient } from "./remote-cluster-client.js";
import { describeRemoteError } from "./remote-error.js";

export interface ConnectionDeps {
  clock?: Clock;
  logger: Logger;
  recordRenewal?: RenewalRecorder;
  /** AWS credentials for eks clusters (default: the SDK's default provider chain). */
  awsCredentialProvider?: () => Promise<AwsCredentials>;
  requestTimeoutMs?: number;
  /** bearerToken: renew this long before expiry (default a fifth of the lifetime). */
  bearerRenewBeforeExpiryMs?: number;
  /** mtls: warn this long before the certificate expires. */
  mtlsWarnBeforeExpiryMs?: number;
}

export interface RemoteClusterConnection {
  readonly client: RemoteClusterClient;
  readonly credential: CredentialSource;
  /** Applies new Secret material of the same authType without rebuilding the client. */
  update(material: ClusterCredentialMaterial): void;
}

export function connectRemoteCluster(
  cluster: RemoteClusterConfig,
  material: ClusterCredentialMaterial,
  deps: ConnectionDeps,
): RemoteClusterConnection {
  if (material.authType !== cluster.authType)
    throw new CredentialError(
      "SWITCHYARD_CREDENTIAL_UNAVAILABLE",
      `cluster "${cluster.name}": Secret material is for ${material.authType}, config says ${cluster.authType}`,
    );
  const clientOptions =
    deps.requestTimeoutMs !== undefined ? { requestTimeoutMs: deps.requestTimeoutMs } : {};
  switch (material.authType) {
    case "bearerToken": {
      const ref: { client?: RemoteClusterClient } = {};
      const source = new BearerTokenSource({
        cluster: cluster.name,
        initialToken: material.token,
        requestToken: (input) => requestServiceAccountToken(ref.client!, input),
        ...(material.saveRenewedToken ? { saveToken: material.saveRenewedToken } : {}),
        ...(deps.clock ? { clock: deps.clock } : {}),
        ...(deps.bearerRenewBeforeExpiryMs ? { renewBeforeExpiryMs: deps.bearerRenewBeforeExpiryMs } : {}),
        logger: deps.logger,
        ...(deps.recordRenewal ? { recordRenewal: deps.recordRenewal } : {}),
      });
      const client = new RemoteClusterClient({ cluster, credential: source, ...clientOptions });
      ref.client = client;
      return {
        client,
        credential: source,
        update: (m) => {
          if (m.authType === "bearerToken") source.replaceToken(m.token);
        },
      };
    }
    case "eks": {
      if (!cluster.region)
        throw new CredentialError(
          "SWITCHYARD_CREDENTIAL_UNAVAILABLE",
          `cluster "${cluster.name}": region is required for eks`,
        );
      const source = new EksTokenSource({
        // Tokens sign the EKS name as AWS spells it; `name` may be the label derived from it.
        cluster: cluster.eksClusterName ?? cluster.name,
        region: cluster.region,
        ...(deps.awsCredentialProvider ? { credentialProvider: deps.awsCredentialProvider } : {}),
        ...(deps.clock ? { clock: deps.clock } : {}),
        logger: deps.logger,
        ...(deps.recordRenewal ? { recordRenewal: deps.recordRenewal } : {}),
      });
      return {
        client: new RemoteClusterClient({ cluster, credential: source, ...clientOptions }),
        credential: source,
        update: () => {},
      };
    }
    case "mtls": {
      const source = new MtlsCredentialSource({
        cluster: cluster.name,
        certPem: material.certPem,
        keyPem: material.keyPem,
        ...(deps.clock ? { clock: deps.clock } : {}),
        ...(deps.mtlsWarnBeforeExpiryMs !== undefined
          ? { warnBeforeExpiryMs: deps.mtlsWarnBeforeExpiryMs }
          : {}),
      });
      return {
        client: new RemoteClusterClient({ cluster, credential: source, ...clientOptions }),
        credential: source,
        update: (m) => {
          if (m.authType === "mtls") source.update(m.certPem, m.keyPem);
        },
      };
    }
  }
}

/** TokenRequest for a ServiceAccount on the remote cluster (needs create on serviceaccounts/token). */
async function requestServiceAccountToken(
  client: RemoteClusterClient,
  input: TokenRequestInput,
): Promise<string> {
  const core = client.makeApiClient(CoreV1Api);
  let res;
  try {
    res = await core.createNamespacedServiceAccountToken({
      name: input.serviceAccount,
      namespace: input.namespace,
      body: {
        spec: {
          expirationSeconds: input.expirationSeconds,
          audiences: input.audiences,
        },
      },
    });
  } catch (err) {
    // ApiException messages carry the raw response; keep only what explains the failure.
    throw new CredentialError(
      "SWITCHYARD_CREDENTIAL_RENEWAL_FAILED",
      describeRemoteError(err, "bearerToken", client.cluster.server),
    );
  }
  const token = res.status?.token;
  if (!token)
    throw new CredentialError(
      "SWITCHYARD_CREDENTIAL_RENEWAL_FAILED",
      "TokenRequest answered without a token",
    );
  return token;
}
