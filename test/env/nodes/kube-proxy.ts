// kube-proxy of one node, iptables mode, inside the node's network namespace: its chains and its
// per-namespace sysctls (route_localnet, bridge-nf-call-iptables) live and die with the node.
// The conntrack settings are zero on purpose — "leave the kernel's value" — because the conntrack
// table size and its hash size are global to the host, not per namespace.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "yaml";
import type { TestCluster } from "../clusters/cluster-set.js";
import type { ManagedProcess } from "../processes.js";
import { nodeComponentKubeconfig } from "./kubelet.js";
import type { NodeNamespaces } from "./node-namespaces.js";

export interface KubeProxyOptions {
  bin: string;
  cluster: TestCluster;
  nodeName: string;
  apiServerUrl: string;
  /** The node's pod range: traffic from elsewhere to a Service is masqueraded. */
  podCidr: string;
}

/** Port of kube-proxy's /healthz, on the node's address. */
export const KUBE_PROXY_HEALTHZ_PORT = 10256;

export class KubeProxy {
  private proc: ManagedProcess | undefined;
  private readonly dir: string;

  constructor(
    private readonly ns: NodeNamespaces,
    private readonly opts: KubeProxyOptions,
  ) {
    this.dir = join(ns.dir, "kube-proxy");
  }

  async start(): Promise<void> {
    const o = this.opts;
    mkdirSync(this.dir, { recursive: true });
    const kubeconfig = await nodeComponentKubeconfig(
      o.cluster,
      join(this.dir, "kube-proxy.kubeconfig"),
      o.apiServerUrl,
      "system:kube-proxy",
    );
    const config = join(this.dir, "config.yaml");
    writeFileSync(
      config,
      stringify({
        apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
        kind: "KubeProxyConfiguration",
        mode: "iptables",
        clientConnection: { kubeconfig },
        hostnameOverride: o.nodeName,
        bindAddress: "0.0.0.0",
        healthzBindAddress: `0.0.0.0:${KUBE_PROXY_HEALTHZ_PORT}`,
        metricsBindAddress: "127.0.0.1:10249",
        clusterCIDR: o.podCidr,
        conntrack: {
          maxPerCore: 0,
          min: 0,
          tcpEstablishedTimeout: "0s",
          tcpCloseWaitTimeout: "0s",
          udpTimeout: "0s",
          udpStreamTimeout: "0s",
        },
        iptables: { minSyncPeriod: "0s", syncPeriod: "30s" },
      }),
    );
    this.proc = this.ns.spawn(`${this.ns.name}-kube-proxy`, o.bin, [`--config=${config}`, "--v=1"], {
      cwd: this.dir,
    });
  }

  get process(): ManagedProcess | undefined {
    return this.proc;
  }

  async stop(graceMs = 5000): Promise<void> {
    await this.proc?.stop(graceMs);
  }
}
