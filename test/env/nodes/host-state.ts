// What a real node could leave behind on the host, captured before start-up and compared after
// teardown: network links, addresses, routes, rules and named network namespaces, iptables in
// both flavours (nf_tables and legacy, v4 and v6), the host's mounts, every sysctl (less the
// counters that move on their own), the cgroup tree of every hierarchy, the well-known runtime
// directories and the node processes. `diffHostState` names every difference, so a teardown
// that forgets something fails with what it forgot.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { sweepOrphans } from "../processes.js";
import { hostCommand } from "./host-command.js";
import { sweepNodeLeftovers } from "./leftovers.js";

export type HostState = Record<string, string[]>;

/** sysctls that change on their own (counters, randomness). */
const volatileSysctl =
  /^(fs\.(dentry-state|file-nr|inode-nr|inode-state|aio-nr|quota\.)|kernel\.(ns_last_pid|random\.|pty\.nr)|net\.netfilter\.nf_conntrack_count)/;

/** Paths the kubelet, containerd and CNI use by default; a node must create none of them. */
const runtimePaths = [
  "/run/containerd",
  "/run/netns",
  "/run/xtables.lock",
  "/var/run/netns",
  "/var/lib/kubelet",
  "/var/lib/containerd",
  "/var/lib/cni",
  "/var/log/pods",
  "/var/log/containers",
  "/etc/cni",
  "/opt/cni",
  "/etc/kubernetes",
];

/** Program names of the processes a node runs. */
const nodeProgram = /^(containerd|containerd-shim.*|runc|kubelet|kube-proxy|kube-scheduler|coredns)$/;

async function lines(cmd: string, args: string[]): Promise<string[]> {
  try {
    const r = await hostCommand(cmd, args, { timeoutMs: 20_000, allowFailure: true });
    if (r.status !== 0) return [`(${cmd} ${args.join(" ")} failed: ${r.stderr.trim()})`];
    return r.stdout.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("#"));
  } catch (err) {
    return [`(${cmd} unavailable: ${(err as Error).message})`];
  }
}

/** iptables-save output without the volatile parts (comments, counters). */
async function iptables(tool: string): Promise<string[]> {
  return (await lines(tool, [])).map((l) => l.replace(/\[\d+:\d+\]/g, "[]"));
}

/**
 * The top-level cgroups of every hierarchy, and the whole subtree of node cgroups
 * (`switchyard-*`). Inside other top-level cgroups the host's own supervisor comes and goes
 * (one cgroup per command it runs), and nothing of a node is created there.
 */
function cgroupTree(): string[] {
  const root = "/sys/fs/cgroup";
  const out: string[] = [];
  const dirsIn = (dir: string) => {
    try {
      return readdirSync(dir).filter((e) => statSync(join(dir, e), { throwIfNoEntry: false })?.isDirectory());
    } catch {
      return [];
    }
  };
  const walk = (dir: string, rel: string, depth: number) => {
    for (const e of dirsIn(dir)) {
      out.push(`${rel}/${e}`);
      if (depth < 8) walk(join(dir, e), `${rel}/${e}`, depth + 1);
    }
  };
  if (!existsSync(root)) return out;
  for (const h of readdirSync(root)) {
    for (const top of dirsIn(join(root, h))) {
      out.push(`${h}/${top}`);
      if (top.startsWith("switchyard-")) walk(join(root, h, top), `${h}/${top}`, 0);
    }
  }
  return out.sort();
}

function nodeProcesses(): string[] {
  const out: string[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      // A zombie is gone already; only its parent has not collected its exit status yet.
      if (nodeProgram.test(comm) && state !== "Z") out.push(`${entry} ${comm}`);
    } catch {
      /* gone */
    }
  }
  return out.sort();
}

function sysctls(raw: string[]): string[] {
  return raw.filter((l) => !volatileSysctl.test(l));
}

/**
 * The host state a test compares its own teardown against: first what earlier owners left (their
 * processes, their node cgroups) is swept, as the test's own start would sweep it, so that the
 * baseline holds only what the host itself has and the diff shows only this test's leaks.
 */
export async function baselineHostState(): Promise<HostState> {
  await sweepOrphans();
  await sweepNodeLeftovers();
  return snapshotHostState();
}

/** Captures the host state a node could change. */
export async function snapshotHostState(): Promise<HostState> {
  const [links, addrs, routes4, routes6, rules4, rules6, nft4, nft6, legacy4, legacy6, sysctl] =
    await Promise.all([
      lines("ip", ["-o", "link", "show"]),
      lines("ip", ["-o", "addr", "show"]),
      lines("ip", ["-4", "route", "show", "table", "all"]),
      lines("ip", ["-6", "route", "show", "table", "all"]),
      lines("ip", ["-4", "rule", "show"]),
      lines("ip", ["-6", "rule", "show"]),
      iptables("iptables-nft-save"),
      iptables("ip6tables-nft-save"),
      iptables("iptables-legacy-save"),
      iptables("ip6tables-legacy-save"),
      lines("sysctl", ["-a"]),
    ]);
  return {
    links: links.map((l) => l.replace(/^\d+:\s*/, "")),
    addresses: addrs.map((l) => l.replace(/^\d+:\s*/, "")),
    routes: [...routes4, ...routes6],
    rules: [...rules4, ...rules6],
    netns: existsSync("/run/netns") ? readdirSync("/run/netns").sort() : [],
    iptables: [...nft4, ...nft6],
    "iptables-legacy": [...legacy4, ...legacy6],
    mounts: readFileSync("/proc/self/mounts", "utf8").split("\n").filter(Boolean),
    sysctls: sysctls(sysctl),
    cgroups: cgroupTree(),
    paths: runtimePaths.filter((p) => existsSync(p)),
    processes: nodeProcesses(),
  };
}

/** Interfaces named in `ip -o link` lines (`eth0@if3: <…>` → eth0). */
function linkNames(state: HostState): Set<string> {
  return new Set((state.links ?? []).map((l) => l.split(":")[0]!.split("@")[0]!.trim()));
}

/**
 * Every difference between two snapshots, one line each (`+ routes: …` appeared,
 * `- mounts: …` disappeared); empty when the host is as it was. sysctls of an interface
 * that exists in only one snapshot are left out (the link difference already says it).
 */
export function diffHostState(before: HostState, after: HostState): string[] {
  const both = new Set([...linkNames(before)].filter((n) => linkNames(after).has(n)));
  const perInterface = /^net\.(ipv4|ipv6)\.(conf|neigh)\.([^.]+)\./;
  const keep = (key: string, line: string) => {
    if (key !== "sysctls") return true;
    const m = perInterface.exec(line);
    return !m || ["all", "default"].includes(m[3]!) || both.has(m[3]!);
  };
  const out: string[] = [];
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const a = (before[key] ?? []).filter((l) => keep(key, l));
    const b = (after[key] ?? []).filter((l) => keep(key, l));
    const inA = new Set(a);
    const inB = new Set(b);
    for (const l of a) if (!inB.has(l)) out.push(`- ${key}: ${l}`);
    for (const l of b) if (!inA.has(l)) out.push(`+ ${key}: ${l}`);
  }
  return out;
}
