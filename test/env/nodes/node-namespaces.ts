// The namespaces of one node: a holder process (`sleep infinity` run by `unshare --net --mount
// --propagation private`) owns a network namespace and a mount namespace, and every daemon of the
// node (containerd, kubelet, kube-proxy, CoreDNS) is started inside both with `nsenter` and an
// explicit working directory — not `ip netns exec`, which remounts /sys and hides the cgroup
// mounts. Sharing one mount namespace matters: the kubelet hard-codes
// /var/lib/kubelet/device-plugins and /var/log/containers whatever its root directory, and
// containerd must see the kubelet's volume mounts. In that namespace, per-node directories are
// bound over /run, /var/lib and /var/log (so nothing lands in the host's), and files holding the
// values the kubelet wants are bound over the six kernel sysctls it would otherwise rewrite for
// the whole host. The namespaces die with their last process; nothing is named in /run/netns.
import { mkdirSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ManagedProcess, ProcessGroupDir } from "../processes.js";
import { eventually } from "../../support/poll.js";
import { hostCommand, type HostCommandOptions, type HostCommandResult } from "./host-command.js";
import type { NodeCgroup } from "./node-cgroup.js";

/** The host paths each node gets its own copy of, inside its mount namespace. */
const PRIVATE_DIRS: Record<string, string> = { "/run": "run", "/var/lib": "var-lib", "/var/log": "var-log" };

/**
 * The kernel tunables the kubelet sets on start (pkg/kubelet/cm setupKernelTunables) and the
 * values it wants: shown to it as already set, so the host's values are never touched.
 */
const KUBELET_SYSCTLS: Record<string, string> = {
  "vm/overcommit_memory": "1",
  "vm/panic_on_oom": "0",
  "kernel/panic": "10",
  "kernel/panic_on_oops": "1",
  "kernel/keys/root_maxkeys": "1000000",
  "kernel/keys/root_maxbytes": "25000000",
};

export interface NodeSpawnOptions {
  cwd: string;
  env?: NodeJS.ProcessEnv;
}

export class NodeNamespaces {
  private constructor(
    private readonly group: ProcessGroupDir,
    private readonly cgroup: NodeCgroup,
    readonly name: string,
    readonly dir: string,
    readonly holder: ManagedProcess,
  ) {}

  /** Starts the holder in the node's cgroup and waits until its namespaces exist. */
  static async start(
    group: ProcessGroupDir,
    cgroup: NodeCgroup,
    name: string,
    dir: string,
  ): Promise<NodeNamespaces> {
    mkdirSync(dir, { recursive: true });
    const holder = group.spawn(
      `${name}-namespaces`,
      "sh",
      ["-c", `${cgroup.enterScript()} && exec unshare --net --mount --propagation private sleep infinity`],
      { cwd: dir },
    );
    const hostNet = readlinkSync("/proc/self/ns/net");
    await eventually(
      `the namespaces of node ${name}`,
      () => {
        try {
          return readlinkSync(`/proc/${holder.pid}/ns/net`) !== hostNet;
        } catch {
          return false;
        }
      },
      {
        timeoutMs: 10_000,
        intervalMs: 20,
        giveUp: () => (holder.hasExited() ? new Error(`unshare exited: ${holder.logTail()}`) : undefined),
      },
    );
    return new NodeNamespaces(group, cgroup, name, dir, holder);
  }

  get pid(): number {
    return this.holder.pid;
  }

  private enter(cwd: string): string[] {
    return ["--target", String(this.pid), "--net", "--mount", `--wd=${cwd}`, "--"];
  }

  /** Runs a short command inside the node's network and mount namespaces. */
  run(cmd: string, args: string[], opts: HostCommandOptions = {}): Promise<HostCommandResult> {
    return hostCommand("nsenter", [...this.enter(opts.cwd ?? this.dir), cmd, ...args], opts);
  }

  /** Runs a short command in the node's network namespace only (host mounts: host binaries, host files). */
  runInNetwork(cmd: string, args: string[], opts: HostCommandOptions = {}): Promise<HostCommandResult> {
    return hostCommand("nsenter", ["--target", String(this.pid), "--net", "--", cmd, ...args], opts);
  }

  /** Starts a daemon of the node: in its cgroup, inside both namespaces, recorded like every test process. */
  spawn(name: string, cmd: string, args: string[], opts: NodeSpawnOptions): ManagedProcess {
    const script = `${this.cgroup.enterScript()} && exec nsenter ${this.enter(opts.cwd).join(" ")} "$@"`;
    return this.group.spawn(name, "sh", ["-c", script, "sh", cmd, ...args], {
      cwd: opts.cwd,
      ...(opts.env ? { env: opts.env } : {}),
      logFile: join(this.dir, "logs", `${name}.log`),
    });
  }

  /**
   * Where a path under one of the node's private directories (/run, /var/lib, /var/log) is on
   * the host: what the node's daemons see as `inside`.
   */
  hostPath(inside: string): string {
    for (const [target, sub] of Object.entries(PRIVATE_DIRS))
      if (inside === target || inside.startsWith(`${target}/`))
        return join(this.dir, "root", sub, inside.slice(target.length));
    throw new Error(
      `${inside} is not under a private directory of node ${this.name} (${Object.keys(PRIVATE_DIRS).join(", ")})`,
    );
  }

  /** Binds the node's own /run, /var/lib and /var/log, and the kubelet's sysctl values, in its mount namespace. */
  async privatiseMounts(): Promise<void> {
    const sysctlDir = join(this.dir, "sysctl");
    mkdirSync(sysctlDir, { recursive: true });
    const steps: string[] = [];
    for (const [target, sub] of Object.entries(PRIVATE_DIRS)) {
      const source = join(this.dir, "root", sub);
      mkdirSync(source, { recursive: true });
      steps.push(`mount --bind '${source}' '${target}'`);
    }
    for (const [key, value] of Object.entries(KUBELET_SYSCTLS)) {
      const file = join(sysctlDir, key.replaceAll("/", "."));
      writeFileSync(file, `${value}\n`);
      steps.push(`mount --bind '${file}' '/proc/sys/${key}'`);
    }
    await this.run("sh", ["-c", steps.join(" && ")], { timeoutMs: 10_000 });
  }

  /** Stops the holder; the namespaces go once the node's other processes are gone too. */
  async stop(): Promise<void> {
    await this.holder.stop(2000, "SIGKILL");
  }
}
