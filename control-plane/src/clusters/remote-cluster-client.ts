// One Kubernetes client per remote cluster: the cluster's server and CA from the
// configuration, credentials from its CredentialSource on every request (so renewals
// apply at once), and a per-request timeout. Reconcilers that act on a workload cluster
// take `kubeConfig` (for watches/informers) or `makeApiClient` (typed APIs with the
// timeout) from here and never see a token or key. API calls share kept-alive connections
// (connection-reuse.ts).
import {
  KubeConfig,
  ServerConfiguration,
  createConfiguration,
  type ApiConstructor,
  type ApiType,
  type User,
} from "@kubernetes/client-node";
import { OptionError, positive } from "../../../lib/option-error.js";
import type { RemoteClusterConfig } from "../config/cluster-config.js";
import type { CredentialSource, RequestCredentials } from "../credentials/credential-source.js";
import { reuseConnections } from "./connection-reuse.js";
import { TimeoutHttpLibrary } from "./request-timeout.js";

export interface RemoteClusterClientOptions {
  cluster: RemoteClusterConfig;
  credential: CredentialSource;
  /** Deadline of each API request in ms (default 10 000). Watches are not limited. */
  requestTimeoutMs?: number;
}

export class RemoteClusterClient {
  readonly name: string;
  readonly cluster: RemoteClusterConfig;
  readonly credential: CredentialSource;
  /** KubeConfig whose requests carry this cluster's current credentials. */
  readonly kubeConfig: KubeConfig;
  readonly requestTimeoutMs: number;
  private readonly userName: string;

  constructor(options: RemoteClusterClientOptions) {
    if (!options.cluster?.server) throw new OptionError("cluster.server", "is required");
    if (!options.credential) throw new OptionError("credential", "is required");
    this.requestTimeoutMs = positive("requestTimeoutMs", options.requestTimeoutMs, 10_000);
    this.cluster = options.cluster;
    this.name = options.cluster.name;
    this.credential = options.credential;
    this.userName = `switchyard-remote-${this.name}`;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: this.name,
          server: this.cluster.server,
          skipTLSVerify: false,
          ...(this.cluster.caPem ? { caData: Buffer.from(this.cluster.caPem).toString("base64") } : {}),
        },
      ],
      users: [{ name: this.userName }],
      contexts: [{ name: this.name, cluster: this.name, user: this.userName }],
      currentContext: this.name,
    });
    // client-node consults authenticators on every request (API calls and watches).
    kc.addAuthenticator({
      isAuthProvider: (user: User) => user.name === this.userName,
      applyAuthentication: (_user: User, opts) => this.credential.apply(opts as RequestCredentials),
    });
    this.kubeConfig = reuseConnections(kc);
  }

  /** A typed API client for this cluster whose requests time out after requestTimeoutMs. */
  makeApiClient<T extends ApiType>(apiClientType: ApiConstructor<T>): T {
    const config = createConfiguration({
      baseServer: new ServerConfiguration(this.cluster.server, {}),
      authMethods: { default: this.kubeConfig },
      httpApi: new TimeoutHttpLibrary(this.name, this.requestTimeoutMs),
    });
    return new apiClientType(config);
  }
}
