// The kubelet of one node, run inside the node's namespaces and cgroup. Settings these machines
// need: `failCgroupV1: false` and `cgroupDriver: cgroupfs` (cgroup v1, no systemd), `address:
// 0.0.0.0` so the API server reaches it on the node's InternalIP for logs and exec, a serving
// certificate from the cluster's CA for that address (the API server verifies it), a client
// certificate as `system:node:<name>` (Node authorization), webhook authentication and
// authorization (the API server's kubelet client is a system:masters user), and no path on the
// host outside the node's directory (`volumePluginDir` would otherwise land in /usr/libexec).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { TestCluster } from "../clusters/cluster-set.js";
import { writeKubeconfig } from "../clusters/kubeconfig.js";
import type { ManagedProcess } from "../processes.js";
import { API_SERVER_TLS_NAME } from "./api-server-flags.js";
import type { NodeNamespaces } from "./node-namespaces.js";

export interface KubeletOptions {
  bin: string;
  cluster: TestCluster;
  nodeName: string;
  nodeIp: string;
  /** The API server as the node reaches it (its host address, not 127.0.0.1). */
  apiServerUrl: string;
  runtimeEndpoint: string;
  /** The node's cgroup root (`/<name>`), present in every hierarchy. */
  cgroupRoot: string;
  /** ClusterIP of the cluster DNS Service. */
  clusterDns: string;
  /** Extra KubeletConfiguration fields (merged over the defaults here). */
  config?: Record<string, unknown>;
}

/** Writes a client-certificate kubeconfig for a node component reaching the API server at `server`. */
export async function nodeComponentKubeconfig(
  cluster: TestCluster,
  path: string,
  server: string,
  user: string,
  groups: string[] = [],
): Promise<string> {
  const pair = await cluster.ca.issue({
    commonName: user,
    organizations: groups,
    usage: "client",
    validForSeconds: 30 * 86_400,
  });
  return writeKubeconfig(path, {
    clusterName: cluster.name,
    server,
    caPem: cluster.caPem,
    tlsServerName: API_SERVER_TLS_NAME,
    user,
    ...pair,
  });
}

export class Kubelet {
  private proc: ManagedProcess | undefined;
  private readonly dir: string;

  constructor(
    private readonly ns: NodeNamespaces,
    private readonly opts: KubeletOptions,
  ) {
    this.dir = join(ns.dir, "kubelet");
  }

  private configYaml(pki: { caFile: string; certFile: string; keyFile: string; resolvConf: string }): string {
    const o = this.opts;
    return stringify({
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      address: "0.0.0.0",
      port: 10250,
      readOnlyPort: 0,
      healthzBindAddress: "127.0.0.1",
      healthzPort: 10248,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: pki.caFile },
      },
      authorization: { mode: "Webhook" },
      tlsCertFile: pki.certFile,
      tlsPrivateKeyFile: pki.keyFile,
      rotateCertificates: false,
      serverTLSBootstrap: false,
      containerRuntimeEndpoint: o.runtimeEndpoint,
      cgroupDriver: "cgroupfs",
      cgroupRoot: o.cgroupRoot,
      cgroupsPerQOS: true,
      failCgroupV1: false,
      failSwapOn: false,
      clusterDomain: "cluster.local",
      clusterDNS: [o.clusterDns],
      resolvConf: pki.resolvConf,
      volumePluginDir: join(this.dir, "volume-plugins"),
      serializeImagePulls: false,
      // The disk is shared with everything else on the machine: never evict or collect images for it.
      evictionHard: {
        "memory.available": "100Mi",
        "nodefs.available": "1%",
        "imagefs.available": "1%",
        "nodefs.inodesFree": "1%",
      },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      shutdownGracePeriod: "0s",
      ...o.config,
    });
  }

  async start(): Promise<void> {
    const o = this.opts;
    mkdirSync(this.dir, { recursive: true });
    const file = (name: string, content: string) => {
      const p = join(this.dir, name);
      writeFileSync(p, content, { mode: 0o600 });
      return p;
    };
    const serving = await o.cluster.ca.issue({
      commonName: o.nodeName,
      dnsNames: [o.nodeName],
      ipAddresses: [o.nodeIp],
      usage: "server",
      validForSeconds: 30 * 86_400,
    });
    const kubeconfig = await nodeComponentKubeconfig(
      o.cluster,
      join(this.dir, "kubelet.kubeconfig"),
      o.apiServerUrl,
      `system:node:${o.nodeName}`,
      ["system:nodes"],
    );
    const config = file(
      "config.yaml",
      this.configYaml({
        caFile: file("ca.crt", o.cluster.caPem),
        certFile: file("kubelet.crt", serving.certPem),
        keyFile: file("kubelet.key", serving.keyPem),
        resolvConf: file("resolv.conf", `nameserver ${o.clusterDns}\n`),
      }),
    );
    this.proc = this.ns.spawn(
      `${this.ns.name}-kubelet`,
      o.bin,
      [
        `--config=${config}`,
        `--kubeconfig=${kubeconfig}`,
        `--hostname-override=${o.nodeName}`,
        `--node-ip=${o.nodeIp}`,
        "--v=1",
      ],
      { cwd: this.dir },
    );
  }

  get process(): ManagedProcess | undefined {
    return this.proc;
  }

  async stop(graceMs = 5000): Promise<void> {
    await this.proc?.stop(graceMs);
  }
}
