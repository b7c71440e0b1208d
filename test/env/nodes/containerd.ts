// The container runtime of one node: Debian's containerd (1.6) with its CRI plugin, every path
// its own (root, state, socket, runc root, plugin dirs, CNI config), the CNI bridge with
// host-local IPAM on the node's pod range, and image import from OCI archives with `ctr`.
// `restrict_oom_score_adj = true` is required on these machines: without CAP_SYS_RESOURCE runc
// fails every sandbox with "can't get final child's PID from pipe: EOF". Every `ctr` call has a
// deadline, because `ctr` blocks for ever once containerd has died.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ManagedProcess } from "../processes.js";
import { eventually } from "../../support/poll.js";
import type { HostCommandResult } from "./host-command.js";
import type { NodeNamespaces } from "./node-namespaces.js";
import type { ImageArchive } from "../images/oci-image.js";

/** Where Debian's containernetworking-plugins puts the CNI plugins. */
export const CNI_BIN_DIR = "/usr/lib/cni";

export interface ContainerdOptions {
  /** The node's directory; containerd's files go to `<dir>/containerd`. */
  dir: string;
  /** Pod range of the node, e.g. 10.200.101.0/24. */
  podCidr: string;
  /** The pod sandbox image (imported before the first pod). */
  sandboxImage: string;
  /** Bound for containerd to answer (ms, default 30 000). */
  readyTimeoutMs?: number;
}

export class Containerd {
  private proc: ManagedProcess | undefined;
  /**
   * The socket as the node's daemons see it, in the node's private /run: a short path, because
   * a unix socket's path is limited to 107 bytes, which a deep TMPDIR (CI's private one) exceeds.
   * Every client (kubelet, `ctr`) runs in the node's mount namespace.
   */
  readonly socket = "/run/containerd/containerd.sock";
  private readonly root: string;

  constructor(
    private readonly ns: NodeNamespaces,
    private readonly opts: ContainerdOptions,
  ) {
    this.root = join(opts.dir, "containerd");
  }

  /** The kubelet's `containerRuntimeEndpoint`. */
  get endpoint(): string {
    return `unix://${this.socket}`;
  }

  private config(): string {
    const r = this.root;
    const cri = 'plugins."io.containerd.grpc.v1.cri"';
    return [
      "version = 2",
      `root = "${r}/root"`,
      `state = "${r}/state"`,
      "oom_score = 0",
      // Snapshotters this host cannot use; their absence is not an error, their probing is noise.
      'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]',
      "[grpc]",
      `  address = "${this.socket}"`,
      "[ttrpc]",
      `  address = "${this.socket}.ttrpc"`,
      // Without this, containerd keeps a directory in the host's /opt.
      '[plugins."io.containerd.internal.v1.opt"]',
      `  path = "${r}/opt"`,
      `[${cri}]`,
      `  sandbox_image = "${this.opts.sandboxImage}"`,
      "  restrict_oom_score_adj = true",
      "  netns_mounts_under_state_dir = true",
      "  disable_apparmor = true",
      '  stream_server_address = "127.0.0.1"',
      `[${cri}.cni]`,
      `  bin_dir = "${CNI_BIN_DIR}"`,
      `  conf_dir = "${r}/cni"`,
      `[${cri}.containerd]`,
      '  snapshotter = "overlayfs"',
      '  default_runtime_name = "runc"',
      `[${cri}.containerd.runtimes.runc]`,
      '  runtime_type = "io.containerd.runc.v2"',
      `[${cri}.containerd.runtimes.runc.options]`,
      `  Root = "${r}/runc"`,
      "  SystemdCgroup = false",
      "",
    ].join("\n");
  }

  private cniConfig(): string {
    return JSON.stringify(
      {
        cniVersion: "0.4.0",
        name: "switchyard-node",
        plugins: [
          {
            type: "bridge",
            bridge: "cni0",
            isGateway: true,
            ipMasq: true,
            hairpinMode: true,
            ipam: {
              type: "host-local",
              ranges: [[{ subnet: this.opts.podCidr }]],
              routes: [{ dst: "0.0.0.0/0" }],
              dataDir: join(this.root, "ipam"),
            },
          },
          { type: "portmap", capabilities: { portMappings: true } },
        ],
      },
      null,
      2,
    );
  }

  async start(): Promise<void> {
    mkdirSync(join(this.root, "cni"), { recursive: true });
    const configFile = join(this.root, "config.toml");
    writeFileSync(configFile, this.config());
    writeFileSync(join(this.root, "cni", "10-switchyard.conflist"), this.cniConfig());
    this.proc = this.ns.spawn(`${this.ns.name}-containerd`, "containerd", ["--config", configFile], {
      cwd: this.root,
    });
    const proc = this.proc;
    await eventually(
      `containerd of node ${this.ns.name}`,
      async () =>
        existsSync(this.ns.hostPath(this.socket)) && (await this.ctr(["version"], 5_000)).status === 0,
      {
        timeoutMs: this.opts.readyTimeoutMs ?? 30_000,
        intervalMs: 100,
        giveUp: () => (proc.hasExited() ? new Error(`containerd exited: ${proc.logTail()}`) : undefined),
      },
    );
  }

  /** `ctr` against this containerd, in the k8s.io namespace the CRI plugin uses, with a deadline. */
  ctr(args: string[], timeoutMs = 30_000): Promise<HostCommandResult> {
    return this.ns.run("ctr", ["--address", this.socket, "--namespace", "k8s.io", ...args], {
      timeoutMs,
      allowFailure: true,
    });
  }

  /** Imports (and unpacks) an OCI image archive so pods can run it with `imagePullPolicy: Never`. */
  async importImage(image: ImageArchive): Promise<void> {
    // ctr runs in the node's mount namespace: unpacking mounts the snapshot there.
    const r = await this.ns.run(
      "ctr",
      ["--address", this.socket, "--namespace", "k8s.io", "images", "import", image.file],
      { timeoutMs: 120_000, allowFailure: true },
    );
    if (r.status !== 0)
      throw new Error(`ctr images import ${image.name} on node ${this.ns.name} failed: ${r.stderr.trim()}`);
  }

  get process(): ManagedProcess | undefined {
    return this.proc;
  }

  logTail(): string {
    return this.proc?.logTail() ?? "";
  }

  /** SIGTERM, then SIGKILL after `graceMs`. Shims survive it (they are killed with the node's cgroup). */
  async stop(graceMs = 5000): Promise<void> {
    await this.proc?.stop(graceMs);
  }
}
