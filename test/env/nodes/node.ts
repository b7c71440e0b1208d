// One real node of one test cluster, isolated as a separate cluster's node would be: its own
// cgroup root, network and mount namespaces, veth to the host, containerd, CNI bridge and pod
// range, kube-proxy and CoreDNS, the proxy its API server's cluster egress goes through
// (cluster-egress.ts), and a kubelet registered with its cluster's API server.
// Start-up wires those in order and waits until the Node is Ready; teardown goes the other way —
// workload controllers, then pods (through the kubelet, so sandboxes are torn down by CNI),
// then kubelet, containerd, kube-proxy and CoreDNS, then whatever is left in the node's cgroup
// (shims outlive containerd), the namespaces, the veth pair and the cgroups themselves.
import { AppsV1Api, BatchV1Api, CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { TestCluster } from "../clusters/cluster-set.js";
import type { ProcessGroupDir } from "../processes.js";
import { eventually, PollTimeoutError } from "../../support/poll.js";
import { CLUSTER_DNS_IP, publishApiServerEndpoint, publishClusterDns } from "./cluster-objects.js";
import { ClusterEgress } from "./cluster-egress.js";
import { Containerd } from "./containerd.js";
import { CoreDns } from "./coredns.js";
import { KubeProxy } from "./kube-proxy.js";
import { Kubelet } from "./kubelet.js";
import { NodeCgroup, type NodeMemory } from "./node-cgroup.js";
import { NodeNamespaces } from "./node-namespaces.js";
import { connectNode, disconnectNode, type NodeAddresses } from "./node-network.js";
import type { ImageArchive } from "../images/oci-image.js";
import type { HostCommandOptions, HostCommandResult } from "./host-command.js";

export interface NodeBinaries {
  kubelet: string;
  "kube-proxy": string;
  coredns: string;
}

export interface StartNodeOptions {
  cluster: TestCluster;
  group: ProcessGroupDir;
  addresses: NodeAddresses;
  bins: NodeBinaries;
  /** The pod sandbox image (imported first). */
  sandbox: ImageArchive;
  /** More images to import before the kubelet starts. */
  images?: ImageArchive[];
  /** Upper bound for the node to turn Ready, in ms (default 120 000). */
  readyTimeoutMs?: number;
}

/** Milliseconds from the start of `startNode`. */
export interface NodeTimings {
  kubeletStartedMs: number;
  readyMs: number;
}

export class NodeStartError extends Error {
  readonly code = "SWITCHYARD_TEST_NODE_START_FAILED";
}

export class TestNode {
  readonly name: string;
  timings: NodeTimings = { kubeletStartedMs: 0, readyMs: 0 };
  private ns: NodeNamespaces | undefined;
  private containerd: Containerd | undefined;
  private kubelet: Kubelet | undefined;
  private kubeProxy: KubeProxy | undefined;
  private coredns: CoreDns | undefined;
  private egress: ClusterEgress | undefined;
  private readonly cgroup: NodeCgroup;
  private readonly dir: string;
  private stopping: Promise<void> | undefined;

  constructor(private readonly opts: StartNodeOptions) {
    this.name = `${opts.cluster.name}-node`;
    this.cgroup = new NodeCgroup(`switchyard-${opts.group.dir.split("/").pop()}-${opts.cluster.name}`);
    this.dir = join(opts.group.dir, this.name);
  }

  get cluster(): TestCluster {
    return this.opts.cluster;
  }

  get addresses(): NodeAddresses {
    return this.opts.addresses;
  }

  /** The node's InternalIP: NodePorts and the kubelet answer here, from the host and from other nodes. */
  get ip(): string {
    return this.opts.addresses.nodeIp;
  }

  /** Where the node's files and logs are. */
  get directory(): string {
    return this.dir;
  }

  async start(): Promise<void> {
    const o = this.opts;
    const t0 = Date.now();
    const a = o.addresses;
    const apiServerUrl = `https://${a.hostIp}:${o.cluster.port}`;
    const kc = o.cluster.kubeConfig();
    this.cgroup.create();
    this.ns = await NodeNamespaces.start(o.group, this.cgroup, this.name, this.dir);
    await connectNode(this.ns, a);
    await this.ns.privatiseMounts();
    this.egress = new ClusterEgress(this.ns, a, o.cluster.dir);
    await this.egress.start();
    this.containerd = new Containerd(this.ns, {
      dir: this.dir,
      podCidr: a.podCidr,
      sandboxImage: o.sandbox.name,
    });
    await this.containerd.start();
    for (const image of [o.sandbox, ...(o.images ?? [])]) await this.containerd.importImage(image);
    await publishApiServerEndpoint(kc, a.hostIp, o.cluster.port);
    await publishClusterDns(kc, a.nodeIp);
    this.coredns = new CoreDns(this.ns, {
      bin: o.bins.coredns,
      cluster: o.cluster,
      nodeIp: a.nodeIp,
      apiServerUrl,
    });
    this.kubeProxy = new KubeProxy(this.ns, {
      bin: o.bins["kube-proxy"],
      cluster: o.cluster,
      nodeName: this.name,
      apiServerUrl,
      podCidr: a.podCidr,
    });
    this.kubelet = new Kubelet(this.ns, {
      bin: o.bins.kubelet,
      cluster: o.cluster,
      nodeName: this.name,
      nodeIp: a.nodeIp,
      apiServerUrl,
      runtimeEndpoint: this.containerd.endpoint,
      cgroupRoot: this.cgroup.root,
      clusterDns: CLUSTER_DNS_IP,
    });
    await Promise.all([this.coredns.start(), this.kubeProxy.start()]);
    await this.kubelet.start();
    this.timings.kubeletStartedMs = Date.now() - t0;
    const timeoutMs = o.readyTimeoutMs ?? 120_000;
    await Promise.all([this.waitReady(kc, timeoutMs), this.coredns.ready(timeoutMs)]);
    this.timings.readyMs = Date.now() - t0;
  }

  private async waitReady(kc: KubeConfig, timeoutMs: number): Promise<void> {
    const api = kc.makeApiClient(CoreV1Api);
    const daemons = () => [this.kubelet?.process, this.containerd?.process, this.kubeProxy?.process];
    await eventually(
      `node ${this.name} Ready`,
      async () => {
        const node = await api.readNode({ name: this.name });
        return node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      },
      {
        timeoutMs,
        intervalMs: 100,
        giveUp: () => {
          const dead = daemons().find((p) => p?.hasExited());
          return dead ? new NodeStartError(`${dead.name} exited:\n${dead.logTail()}`) : undefined;
        },
      },
    );
  }

  /** Imports an image into the node's containerd (pods use it with `imagePullPolicy: Never`). */
  async importImage(image: ImageArchive): Promise<void> {
    if (!this.containerd) throw new NodeStartError(`node ${this.name} is not started`);
    await this.containerd.importImage(image);
  }

  /** Runs a host binary inside the node's network namespace (e.g. a probe from the node's address). */
  runOnNode(cmd: string, args: string[], opts?: HostCommandOptions): Promise<HostCommandResult> {
    if (!this.ns) throw new NodeStartError(`node ${this.name} is not started`);
    return this.ns.runInNetwork(cmd, args, opts);
  }

  /** Memory of everything the node runs (daemons, shims, containers), from its cgroup, in bytes. */
  memory(): NodeMemory | undefined {
    return this.cgroup.memory();
  }

  /** CPU time the node has used so far (daemons, shims, containers), in ns. */
  cpuUsageNs(): number | undefined {
    return this.cgroup.cpuUsageNs();
  }

  /** Tears the node down and leaves nothing of it on the host. Safe to call twice. */
  stop(): Promise<void> {
    return (this.stopping ??= this.teardown());
  }

  private async teardown(): Promise<void> {
    const problems: string[] = [];
    const step = async (what: string, f: () => Promise<unknown>) => {
      try {
        await f();
      } catch (err) {
        problems.push(`${what}: ${(err as Error).message}`);
      }
    };
    if (this.kubelet?.process && !this.kubelet.process.hasExited())
      await step("drain", () =>
        this.drain().catch((err: unknown) => {
          // A Ctrl-C reaches the whole process group: the API server may stop under the drain.
          // Then there is nothing left to drain through; what the node runs goes with its cgroup.
          if (/ECONNREFUSED|ECONNRESET|socket hang up/.test(String((err as Error).message))) return;
          // The drain only lets pods stop gracefully. A kubelet that did not stop every pod within
          // its bound (a loaded machine tearing several nodes down at once) is told, not fatal:
          // the steps below stop the kubelet and containerd and kill what is left in the node's
          // cgroup, which is what leaves the host as it was.
          if (err instanceof DrainTimeoutError) {
            process.stderr.write(`node ${this.name}: ${err.message}; killing what is left with the node\n`);
            return;
          }
          throw err;
        }),
      );
    await step("kubelet", async () => this.kubelet?.stop());
    await step("containerd", async () => this.containerd?.stop());
    await step("kube-proxy, CoreDNS and the egress proxy", () =>
      Promise.all([this.kubeProxy?.stop(), this.coredns?.stop(), this.egress?.stop()]),
    );
    await step("processes left in the node's cgroup", () => this.cgroup.killAll());
    await step("namespaces", async () => this.ns?.stop());
    await step("veth pair", () => disconnectNode(this.opts.addresses));
    await step("cgroups", () => this.cgroup.remove());
    rmSync(this.dir, { recursive: true, force: true });
    if (problems.length > 0) throw new Error(`teardown of node ${this.name}: ${problems.join("; ")}`);
  }

  /**
   * Deletes every workload controller of the cluster (or they would recreate pods), then the pods
   * on this node, and waits — bounded — until the kubelet has stopped them and removed them.
   * Skipped quietly when the API server is already gone.
   */
  private async drain(timeoutMs = 30_000): Promise<void> {
    const kc = this.opts.cluster.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const apps = kc.makeApiClient(AppsV1Api);
    const batch = kc.makeApiClient(BatchV1Api);
    if (!this.opts.cluster.isApiServerRunning()) return;
    const namespaces = (await core.listNamespace()).items.map((n) => n.metadata!.name!);
    const bg = { propagationPolicy: "Background" };
    await Promise.all(
      namespaces.flatMap((namespace) => [
        apps.deleteCollectionNamespacedDeployment({ namespace, ...bg }),
        apps.deleteCollectionNamespacedStatefulSet({ namespace, ...bg }),
        apps.deleteCollectionNamespacedDaemonSet({ namespace, ...bg }),
        apps.deleteCollectionNamespacedReplicaSet({ namespace, ...bg }),
        batch.deleteCollectionNamespacedCronJob({ namespace, ...bg }),
        batch.deleteCollectionNamespacedJob({ namespace, ...bg }),
      ]),
    );
    const onNode = `spec.nodeName=${this.name}`;
    let remaining: string[] = [];
    // Pods being deleted whose containers have all ended, by when that was first seen: the
    // kubelet's last step (removing the object once the sandbox and volumes are torn down) can
    // hang on a node being dismantled; after FINISHED_GRACE_MS they are removed with grace 0,
    // which is safe then — nothing of theirs runs, and the node's cgroup is killed after this.
    const finishedSince = new Map<string, number>();
    // The controllers go in the background: a ReplicaSet the garbage collector has not removed
    // yet may still replace a deleted pod, so every pod not yet being deleted is deleted again.
    // And a pod the garbage collector deleted meanwhile got its own grace period (30 s for the
    // chart's pods), which may outlast this drain: it is deleted again with a grace of 1 s, which
    // shortens the period (a later delete may only shorten it).
    await eventually(
      `the pods of node ${this.name} to be gone`,
      async () => {
        const pods = (await core.listPodForAllNamespaces({ fieldSelector: onNode })).items;
        const live = new Set(
          pods
            .filter((p) => !p.metadata?.deletionTimestamp || (p.metadata.deletionGracePeriodSeconds ?? 0) > 1)
            .map((p) => p.metadata!.namespace!),
        );
        await Promise.all(
          [...live].map((namespace) =>
            core.deleteCollectionNamespacedPod({ namespace, fieldSelector: onNode, gracePeriodSeconds: 1 }),
          ),
        );
        const now = Date.now();
        await Promise.all(
          pods.filter(finished).map(async (p) => {
            const key = `${p.metadata!.namespace}/${p.metadata!.name}`;
            const since = finishedSince.get(key) ?? now;
            finishedSince.set(key, since);
            if (now - since < FINISHED_GRACE_MS) return;
            await core
              .deleteNamespacedPod({
                namespace: p.metadata!.namespace!,
                name: p.metadata!.name!,
                gracePeriodSeconds: 0,
              })
              .catch(() => undefined);
          }),
        );
        remaining = pods.map(
          (p) =>
            `${p.metadata!.namespace}/${p.metadata!.name} ${p.status?.phase ?? "?"}` +
            `${p.metadata?.deletionTimestamp ? " terminating" : ""}` +
            ` [${[...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]
              .map((c) => `${c.name}:${Object.keys(c.state ?? {}).join("")}`)
              .join(" ")}]`,
        );
        return pods.length === 0;
      },
      { timeoutMs, intervalMs: 200 },
    ).catch(async (err: unknown) => {
      const message = `${(err as Error).message}; left: ${remaining.join(", ")}${await this.stuckLogs(core, onNode)}`;
      throw err instanceof PollTimeoutError
        ? new DrainTimeoutError(message)
        : new Error(message, { cause: err });
    });
  }

  /** The last lines of every container still running on the node: what it was doing when it did not stop. */
  private async stuckLogs(core: CoreV1Api, onNode: string): Promise<string> {
    const pods = await core.listPodForAllNamespaces({ fieldSelector: onNode }).catch(() => undefined);
    const out: string[] = [];
    for (const p of pods?.items ?? [])
      for (const c of [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])]) {
        const log = await core
          .readNamespacedPodLog({
            name: p.metadata!.name!,
            namespace: p.metadata!.namespace!,
            container: c.name,
            tailLines: 8,
          })
          .catch(() => "");
        if (log)
          out.push(`--- ${p.metadata!.namespace}/${p.metadata!.name}/${c.name}\n${String(log).trimEnd()}`);
      }
    return out.length > 0 ? `\n${out.join("\n")}` : "";
  }
}

/** How long a drain waits for the kubelet to remove a pod whose containers have all ended. */
const FINISHED_GRACE_MS = 5_000;

/** Being deleted, and every container of it (init containers too) has terminated. */
function finished(p: V1Pod): boolean {
  if (!p.metadata?.deletionTimestamp) return false;
  const statuses = [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])];
  if (statuses.length === 0) return p.status?.phase === "Failed" || p.status?.phase === "Succeeded";
  return statuses.every((c) => c.state?.terminated !== undefined);
}

/** The drain's bound ran out with pods still on the node. */
class DrainTimeoutError extends Error {
  override readonly name = "DrainTimeoutError";
}
