// Real nodes for a cluster set: `startNodes(set)` gives every cluster of a set started with
// `nodes: true` one node and a kube-scheduler, after checking what the host must provide (root,
// the Debian packages of install-host-packages.sh) and cleaning up what a killed run left. The
// nodes share one address block and one set of images built once; everything else is per node.
//
//   const set = await startClusterSet({ clusters: ["east", "west"], nodes: true });
//   const nodes = await startNodes(set, { images: [await nodeRuntimeImage()] });
//   …
//   await nodes.stop(); // before set.stop(): the drain goes through the API servers
//   await set.stop();
import { randomBytes } from "node:crypto";
import { accessSync, constants, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { ensureBinaries } from "../binaries.js";
import type { ClusterSet } from "../clusters/cluster-set.js";
import { envRoot, ProcessGroupDir, sweepOrphans, type ManagedProcess } from "../processes.js";
import { sweepNodeLeftovers } from "./leftovers.js";
import { TestNode, type NodeTimings } from "./node.js";
import { nodeAddresses, pickAddressBlock } from "./node-network.js";
import { pauseImage, writeImageArchive, type ImageArchive, type ImageSpec } from "../images/oci-image.js";
import { startScheduler } from "./scheduler.js";
import { CNI_BIN_DIR } from "./containerd.js";

export interface NodeSetOptions {
  /** Clusters that get a node (default: every cluster of the set). */
  clusters?: string[];
  /** Images built once and imported into every node before its kubelet starts. */
  images?: ImageSpec[];
  /** Upper bound for each node to turn Ready, in ms (default 120 000). */
  readyTimeoutMs?: number;
}

export interface NodeSet {
  readonly nodes: Record<string, TestNode>;
  /** The node of a cluster. */
  get(cluster: string): TestNode;
  /** The archives of `images`, by image name (to import into a node started later, or to inspect). */
  readonly images: Record<string, ImageArchive>;
  readonly dir: string;
  /** Stops every node and scheduler; resolves with how long it took (ms). Safe to call twice. */
  stop(): Promise<number>;
}

export class NodePrerequisiteError extends Error {
  readonly code = "SWITCHYARD_TEST_NODE_PREREQUISITES";
}

const REQUIRED_COMMANDS: Record<string, string> = {
  containerd: "containerd",
  ctr: "containerd",
  runc: "runc",
  iptables: "iptables",
  "iptables-nft-save": "iptables",
  ip: "iproute2",
  nsenter: "util-linux",
  unshare: "util-linux",
  mount: "mount",
};

function onPath(cmd: string): boolean {
  return (process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin").split(":").some((d) => {
    try {
      accessSync(join(d, cmd), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** What this host lacks for real nodes (empty when nothing): root, commands, CNI plugins, cgroups. */
export function missingNodePrerequisites(): string[] {
  const missing: string[] = [];
  if (process.getuid?.() !== 0) missing.push("root (nodes create namespaces, cgroups and veth pairs)");
  for (const [cmd, pkg] of Object.entries(REQUIRED_COMMANDS))
    if (!onPath(cmd)) missing.push(`${cmd} (Debian package ${pkg})`);
  for (const plugin of ["bridge", "host-local", "portmap", "loopback"])
    if (!existsSync(join(CNI_BIN_DIR, plugin)))
      missing.push(`${CNI_BIN_DIR}/${plugin} (Debian package containernetworking-plugins)`);
  if (!existsSync("/sys/fs/cgroup/memory") && !existsSync("/sys/fs/cgroup/cgroup.controllers"))
    missing.push("a mounted cgroup hierarchy");
  return missing;
}

export async function startNodes(set: ClusterSet, options: NodeSetOptions = {}): Promise<NodeSet> {
  const missing = missingNodePrerequisites();
  if (missing.length > 0)
    throw new NodePrerequisiteError(
      `real nodes cannot run on this host; missing: ${missing.join(", ")}. ` +
        "Install the packages with test/env/nodes/install-host-packages.sh and run as root.",
    );
  const names = options.clusters ?? Object.keys(set.clusters);
  await sweepOrphans();
  await sweepNodeLeftovers();
  const bins = await ensureBinaries(["kubelet", "kube-proxy", "kube-scheduler", "coredns"]);
  // A `set-` directory: the process sweep kills what it recorded and what names it (shims name
  // their containerd's socket in it) once its owner is gone.
  const group = new ProcessGroupDir(
    join(envRoot(), `set-nodes-${process.pid}-${randomBytes(4).toString("hex")}`),
  );
  const nodes: Record<string, TestNode> = {};
  const schedulers: ManagedProcess[] = [];
  const images: Record<string, ImageArchive> = {};
  let stopping: Promise<number> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      const t0 = Date.now();
      const results = await Promise.allSettled(Object.values(nodes).map((n) => n.stop()));
      await Promise.all(schedulers.map((s) => s.stop()));
      group.remove();
      const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed.length > 0) throw new Error(failed.map((f) => String(f.reason)).join("\n"));
      return Date.now() - t0;
    })());
  try {
    const imageDir = join(group.dir, "images");
    mkdirSync(imageDir, { recursive: true });
    const archive = (spec: ImageSpec) =>
      (images[spec.name] = writeImageArchive(
        spec,
        join(imageDir, `${spec.name.replace(/[^a-z0-9.-]/gi, "_")}.tar`),
      ));
    const sandbox = archive(await pauseImage());
    const extra = (options.images ?? []).map(archive);
    // A set started with `nodes: true` planned the addresses (its API server certificates cover
    // them): node i serves the set's cluster i.
    const block = set.nodeBlock ?? (await pickAddressBlock());
    const order = Object.keys(set.clusters);
    names.forEach((name) => {
      nodes[name] = new TestNode({
        cluster: set.get(name),
        group,
        addresses: nodeAddresses(block, order.indexOf(name) + 1),
        bins,
        sandbox,
        images: extra,
        readyTimeoutMs: options.readyTimeoutMs ?? 120_000,
      });
    });
    for (const name of names)
      schedulers.push(await startScheduler(group, set.get(name), bins["kube-scheduler"]));
    await Promise.all(Object.values(nodes).map((n) => n.start()));
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return {
    nodes,
    images,
    dir: group.dir,
    get(cluster: string) {
      const n = nodes[cluster];
      if (!n) throw new Error(`no node for cluster "${cluster}" (have: ${Object.keys(nodes).join(", ")})`);
      return n;
    },
    stop,
  };
}

export type { NodeTimings };
