// How the API server of a cluster with a real node reaches what runs in it — admission webhooks
// served by pods, aggregated APIs, the kubelet — the way a cluster whose control plane sits
// outside the pod network does (konnectivity): its "cluster" egress goes as HTTP CONNECT, over
// mutual TLS from the cluster's CA, to a proxy inside the node's network namespace
// (cluster-egress-proxy.mjs), which dials Service IPs (kube-proxy's rules) and pods by the node's
// own routes. The host gets no route to the pod range, so nothing else on it (a CLI playing the
// developer's laptop) can reach a pod directly; only the API server's client certificate opens
// a tunnel.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import type { CertificateAuthority } from "../pki.js";
import type { ManagedProcess } from "../processes.js";
import { eventually } from "../../support/poll.js";
import type { NodeAddresses } from "./node-network.js";
import type { NodeNamespaces } from "./node-namespaces.js";

/** Port of the egress proxy on the node's address (konnectivity's usual port). */
export const CLUSTER_EGRESS_PORT = 8132;
/** The API server's client certificate's subject: the only one the proxy tunnels for. */
export const CLUSTER_EGRESS_CLIENT = "kube-apiserver-cluster-egress";

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "cluster-egress-proxy.mjs");

/** Where a cluster's egress certificates are, under its directory. */
function files(clusterDir: string) {
  const dir = join(clusterDir, "egress");
  return {
    dir,
    config: join(dir, "egress-selector.yaml"),
    ca: join(dir, "ca.crt"),
    proxyCert: join(dir, "proxy.crt"),
    proxyKey: join(dir, "proxy.key"),
    clientCert: join(dir, "client.crt"),
    clientKey: join(dir, "client.key"),
  };
}

/**
 * Issues the proxy's serving and the API server's client certificate, writes the API server's
 * EgressSelectorConfiguration for a cluster whose node has `addresses`, and answers its
 * `--egress-selector-config-file` flag.
 */
export async function egressSelectorArgs(
  ca: CertificateAuthority,
  clusterDir: string,
  addresses: NodeAddresses,
): Promise<string[]> {
  const f = files(clusterDir);
  mkdirSync(f.dir, { recursive: true, mode: 0o700 });
  const serving = await ca.issue({
    commonName: "cluster-egress-proxy",
    usage: "server",
    ipAddresses: [addresses.nodeIp],
    validForSeconds: 30 * 86_400,
  });
  const client = await ca.issue({
    commonName: CLUSTER_EGRESS_CLIENT,
    usage: "client",
    validForSeconds: 30 * 86_400,
  });
  const write = (file: string, pem: string) => writeFileSync(file, pem, { mode: 0o600 });
  write(f.ca, ca.certPem);
  write(f.proxyCert, serving.certPem);
  write(f.proxyKey, serving.keyPem);
  write(f.clientCert, client.certPem);
  write(f.clientKey, client.keyPem);
  write(
    f.config,
    stringify({
      apiVersion: "apiserver.k8s.io/v1beta1",
      kind: "EgressSelectorConfiguration",
      egressSelections: [
        {
          name: "cluster",
          connection: {
            proxyProtocol: "HTTPConnect",
            transport: {
              tcp: {
                url: `https://${addresses.nodeIp}:${CLUSTER_EGRESS_PORT}`,
                tlsConfig: { caBundle: f.ca, clientCert: f.clientCert, clientKey: f.clientKey },
              },
            },
          },
        },
      ],
    }),
  );
  return [`--egress-selector-config-file=${f.config}`];
}

export class ClusterEgress {
  private proc: ManagedProcess | undefined;

  constructor(
    private readonly ns: NodeNamespaces,
    private readonly addresses: NodeAddresses,
    private readonly clusterDir: string,
  ) {}

  /** Starts the proxy in the node's namespaces and waits until it listens. */
  async start(timeoutMs = 10_000): Promise<void> {
    const f = files(this.clusterDir);
    const proc = this.ns.spawn(`${this.ns.name}-cluster-egress`, process.execPath, [SCRIPT], {
      cwd: this.ns.dir,
      env: {
        ...process.env,
        LISTEN: `${this.addresses.nodeIp}:${CLUSTER_EGRESS_PORT}`,
        TLS_CERT: f.proxyCert,
        TLS_KEY: f.proxyKey,
        CLIENT_CA: f.ca,
        CLIENT_NAME: CLUSTER_EGRESS_CLIENT,
      },
    });
    this.proc = proc;
    await eventually(
      `the cluster egress proxy of ${this.ns.name}`,
      () => proc.logTail().includes("cluster egress proxy listening"),
      {
        timeoutMs,
        intervalMs: 20,
        giveUp: () =>
          proc.hasExited() ? new Error(`the egress proxy exited: ${proc.logTail()}`) : undefined,
      },
    );
  }

  async stop(graceMs = 2000): Promise<void> {
    await this.proc?.stop(graceMs);
  }
}
