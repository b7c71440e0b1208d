// The network of the nodes of one set, laid out like separate clusters on one network: every
// node gets a veth pair to the host in a /24 of its own inside the set's 10.<block>.0.0/16, a
// route to the other node subnets through the host, the Service range on its link, and nothing else (no default route, pods
// masqueraded behind the node address), and a pod range of its own. The host forwards only what
// arrives on those veths (per-interface `forwarding`, never the global `ip_forward`), so node
// reaches node — a NodePort, the API server on the host — the way cluster reaches cluster, while
// pod ranges stay private to their node. Deleting the host end removes the pair; the namespace
// end goes with its namespace anyway.
import { writeFileSync } from "node:fs";
import { SERVICE_CIDR } from "./api-server-flags.js";
import { hostCommand, hostOutput } from "./host-command.js";
import type { NodeNamespaces } from "./node-namespaces.js";

export class NodeNetworkError extends Error {
  readonly code = "SWITCHYARD_TEST_NODE_NETWORK_FAILED";
}

export interface NodeAddresses {
  /** 1-based position of the node in its set. */
  index: number;
  /** Host end of the veth pair (`sy<block>n<index>`); the node end is `eth0`. */
  hostInterface: string;
  /** Host address on the veth: what the node uses to reach the API server. */
  hostIp: string;
  /** The node's InternalIP (its kubelet, NodePorts, CoreDNS). */
  nodeIp: string;
  /** Every node subnet of the set (the only route a node has). */
  nodeSubnets: string;
  /** The node's pod range (CNI bridge + host-local IPAM). */
  podCidr: string;
}

/** Blocks tried for a set's 10.<block>.0.0/16, first free first. */
const BLOCKS = Array.from({ length: 50 }, (_, i) => 200 + i);

/** A 10.<block>.0.0/16 no host address or route uses yet. */
export async function pickAddressBlock(): Promise<number> {
  const used =
    (await hostOutput("ip", ["-4", "-o", "addr", "show"])) +
    (await hostOutput("ip", ["-4", "route", "show", "table", "all"]));
  const block = BLOCKS.find((b) => !used.includes(`10.${b}.`));
  if (block === undefined)
    throw new NodeNetworkError("no free 10.x.0.0/16 block for the node network (10.200–10.249 all used)");
  return block;
}

export function nodeAddresses(block: number, index: number): NodeAddresses {
  if (index < 1 || index > 99) throw new NodeNetworkError(`node index ${index} out of range 1–99`);
  return {
    index,
    hostInterface: `sy${block}n${index}`,
    hostIp: `10.${block}.${index}.1`,
    nodeIp: `10.${block}.${index}.2`,
    nodeSubnets: `10.${block}.0.0/16`,
    podCidr: `10.${block}.${100 + index}.0/24`,
  };
}

/** Creates the veth pair, addresses and routes of one node whose namespaces already exist. */
export async function connectNode(ns: NodeNamespaces, a: NodeAddresses): Promise<void> {
  const peer = `${a.hostInterface}p`;
  const ip = (...args: string[]) => hostCommand("ip", args, { timeoutMs: 10_000 });
  await ip("link", "add", a.hostInterface, "type", "veth", "peer", "name", peer);
  try {
    await ip("link", "set", peer, "netns", String(ns.pid));
    await ip("addr", "add", `${a.hostIp}/24`, "dev", a.hostInterface);
    // Forward what arrives from this node only; the host's global ip_forward stays as it is.
    writeFileSync(`/proc/sys/net/ipv4/conf/${a.hostInterface}/forwarding`, "1");
    await ip("link", "set", a.hostInterface, "up");
    const steps = [
      "ip link set lo up",
      `ip link set ${peer} name eth0`,
      `ip addr add ${a.nodeIp}/24 dev eth0`,
      "ip link set eth0 up",
      `ip route add ${a.nodeSubnets} via ${a.hostIp} dev eth0`,
      // What the node itself dials at a ClusterIP (the API server's egress proxy) needs a route
      // for kube-proxy's OUTPUT rules to rewrite; on the link, so nothing unrewritten leaves it.
      `ip route add ${SERVICE_CIDR} dev eth0 scope link`,
    ];
    await ns.runInNetwork("sh", ["-c", steps.join(" && ")], { timeoutMs: 10_000 });
  } catch (err) {
    await disconnectNode(a);
    throw new NodeNetworkError(`could not connect node ${a.nodeIp}: ${(err as Error).message}`);
  }
}

/** Deletes the host end of the node's veth pair (and with it the pair) if it is still there. */
export async function disconnectNode(a: NodeAddresses): Promise<void> {
  await hostCommand("ip", ["link", "del", a.hostInterface], { timeoutMs: 10_000, allowFailure: true });
}

/** Host ends of node veth pairs present on this host (for sweeping what a killed run left). */
export async function nodeInterfaces(): Promise<string[]> {
  const out = await hostOutput("ip", ["-o", "link", "show"]);
  return [...out.matchAll(/^\d+:\s+(sy\d+n\d+)[@:]/gm)].map((m) => m[1]!);
}
