// CoreDNS as the cluster DNS of one node's cluster: a process in the node's namespaces (no image
// to build, and it starts before the first pod), reading Services and endpoints with a client
// certificate of its own, answering on the node's address; the `kube-dns` Service
// (cluster-objects.ts) sends pods to it through kube-proxy like any cluster DNS. Names outside
// cluster.local get no answer: nodes have no route off the node network.
import { mkdirSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import type { TestCluster } from "../clusters/cluster-set.js";
import type { ManagedProcess } from "../processes.js";
import { eventually } from "../../support/poll.js";
import { COREDNS_USER } from "./cluster-objects.js";
import { nodeComponentKubeconfig } from "./kubelet.js";
import type { NodeNamespaces } from "./node-namespaces.js";

export interface CoreDnsOptions {
  bin: string;
  cluster: TestCluster;
  nodeIp: string;
  apiServerUrl: string;
}

/** Port of CoreDNS's `ready` plugin (200 once the kubernetes plugin has synced). */
const READY_PORT = 8181;

function httpStatus(url: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = request(url, { timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(undefined));
    req.end();
  });
}

export class CoreDns {
  private proc: ManagedProcess | undefined;
  private readonly dir: string;

  constructor(
    private readonly ns: NodeNamespaces,
    private readonly opts: CoreDnsOptions,
  ) {
    this.dir = join(ns.dir, "coredns");
  }

  async start(): Promise<void> {
    const o = this.opts;
    mkdirSync(this.dir, { recursive: true });
    const kubeconfig = await nodeComponentKubeconfig(
      o.cluster,
      join(this.dir, "coredns.kubeconfig"),
      o.apiServerUrl,
      COREDNS_USER,
    );
    const corefile = join(this.dir, "Corefile");
    writeFileSync(
      corefile,
      [
        ".:53 {",
        "    errors",
        `    ready :${READY_PORT}`,
        "    kubernetes cluster.local in-addr.arpa ip6.arpa {",
        `        kubeconfig ${kubeconfig} ${o.cluster.name}`,
        "        pods insecure",
        "        fallthrough in-addr.arpa ip6.arpa",
        "        ttl 5",
        "    }",
        "    cache 5",
        "}",
        "",
      ].join("\n"),
    );
    this.proc = this.ns.spawn(`${this.ns.name}-coredns`, o.bin, ["-conf", corefile], { cwd: this.dir });
  }

  /** Resolves once CoreDNS reports ready (its Kubernetes caches have synced). */
  async ready(timeoutMs: number): Promise<void> {
    const proc = this.proc!;
    await eventually(
      `CoreDNS of node ${this.ns.name}`,
      async () => (await httpStatus(`http://${this.opts.nodeIp}:${READY_PORT}/ready`)) === 200,
      {
        timeoutMs,
        intervalMs: 100,
        giveUp: () => (proc.hasExited() ? new Error(`CoreDNS exited: ${proc.logTail()}`) : undefined),
      },
    );
  }

  get process(): ManagedProcess | undefined {
    return this.proc;
  }

  async stop(graceMs = 5000): Promise<void> {
    await this.proc?.stop(graceMs);
  }
}
