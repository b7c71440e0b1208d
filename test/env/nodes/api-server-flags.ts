// What an API server of the test clusters needs before real nodes can join it (startClusterSet's
// `nodes: true`): Node authorization beside RBAC (a kubelet may read only what its pods need),
// a client certificate to reach kubelets for logs/exec/port-forward, verified against the
// kubelets' serving certificates from the same CA, by their InternalIP; a listener the node
// namespaces can reach (they have no route to the host's 127.0.0.1); and its "cluster" egress
// through the node (cluster-egress.ts), so that webhooks served by pods are reached as in a cluster.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CertificateAuthority } from "../pki.js";
import { egressSelectorArgs } from "./cluster-egress.js";
import type { NodeAddresses } from "./node-network.js";

/** The test clusters' Service range (every cluster's own: each node is its own network). */
export const SERVICE_CIDR = "10.0.0.0/24";
/** ClusterIP of the `kubernetes` Service (first address of SERVICE_CIDR). */
export const KUBERNETES_SERVICE_IP = "10.0.0.1";

/** The name the API server's certificate carries for clients that reach it by a node-side address. */
export const API_SERVER_TLS_NAME = "kubernetes";

/**
 * kube-apiserver flags for clusters with real nodes (besides `--authorization-mode=Node,RBAC`,
 * which cluster-set.ts sets: a repeated mode is an error). They come after the defaults, and
 * kube-apiserver keeps the last value of a repeated single-valued flag.
 */
export async function apiServerArgsForNodes(
  ca: CertificateAuthority,
  dir: string,
  node: NodeAddresses,
): Promise<string[]> {
  const client = await ca.issue({
    commonName: "kube-apiserver-kubelet-client",
    organizations: ["system:masters"],
    usage: "client",
    validForSeconds: 30 * 86_400,
  });
  const certFile = join(dir, "kubelet-client.crt");
  const keyFile = join(dir, "kubelet-client.key");
  writeFileSync(certFile, client.certPem, { mode: 0o600 });
  writeFileSync(keyFile, client.keyPem, { mode: 0o600 });
  const caFile = join(dir, "kubelet-ca.crt");
  writeFileSync(caFile, ca.certPem, { mode: 0o600 });
  return [
    // Node namespaces reach the host by their veth's host address, which is only known later.
    "--bind-address=0.0.0.0",
    `--kubelet-client-certificate=${certFile}`,
    `--kubelet-client-key=${keyFile}`,
    `--kubelet-certificate-authority=${caFile}`,
    "--kubelet-preferred-address-types=InternalIP",
    ...(await egressSelectorArgs(ca, dir, node)),
  ];
}
