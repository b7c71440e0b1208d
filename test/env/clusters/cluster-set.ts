// Several real Kubernetes clusters on loopback, for integration tests: one etcd
// (shared, one --etcd-prefix per cluster, or one each) and per cluster a real
// kube-apiserver (RBAC, client-certificate auth, ServiceAccount signing keys so
// TokenRequest works) and, optionally, a kube-controller-manager. No kubelet: see
// kubelet.ts for the helper that plays its part.
import { randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { ensureBinaries, type BinaryName } from "../binaries.js";
import { loadKubeConfig, writeKubeconfig, kubeconfigYaml } from "./kubeconfig.js";
import {
  createCertificateAuthority,
  createServiceAccountSigningKey,
  type CertificateAuthority,
} from "../pki.js";
import { freePorts } from "../ports.js";
import { apiServerArgsForNodes, KUBERNETES_SERVICE_IP, SERVICE_CIDR } from "../nodes/api-server-flags.js";
import { nodeAddresses, pickAddressBlock, type NodeAddresses } from "../nodes/node-network.js";
import { envRoot, ProcessGroupDir, sweepOrphans, type ManagedProcess } from "../processes.js";
import { eventually, PollTimeoutError } from "../../support/poll.js";

export interface ClusterSetOptions {
  /** Cluster names (RFC 1123 labels), e.g. ["primary", "east", "west"]. */
  clusters: string[];
  /** Run a kube-controller-manager per cluster (default true). */
  controllerManager?: boolean;
  /** One etcd shared by all API servers with distinct prefixes (default), or one etcd per cluster. */
  etcd?: "shared" | "per-cluster";
  /** Extra kube-apiserver flags per cluster name (e.g. a token webhook). */
  apiServerArgs?: Record<string, string[]>;
  /** Upper bound for every component to become ready, in ms (default 120 000). */
  readyTimeoutMs?: number;
  /** Where etcd, kube-apiserver and kube-controller-manager log (default `<set dir>/logs`, removed by stop()). */
  logDir?: string;
  /**
   * Ready the API servers for real nodes (test/env/nodes): Node,RBAC authorization, kubelet client
   * certificates, a listener on every address (default false: loopback only, RBAC only).
   */
  nodes?: boolean;
}

export interface ClusterUser {
  user: string;
  groups: string[];
  certPem: string;
  keyPem: string;
  kubeconfigPath: string;
  kubeconfigYaml: string;
  kubeConfig(): KubeConfig;
}

export interface TestCluster {
  readonly name: string;
  /** https://127.0.0.1:<port> */
  readonly server: string;
  readonly port: number;
  readonly caPem: string;
  readonly caFile: string;
  /** Key (PEM) of this cluster's CA, for tests that issue their own certificates. */
  readonly ca: CertificateAuthority;
  readonly adminKubeconfigPath: string;
  readonly dir: string;
  /** A fresh admin KubeConfig (user `switchyard-admin`, group system:masters). */
  kubeConfig(): KubeConfig;
  /** Mints a client-certificate kubeconfig for any user and groups (for RBAC tests). */
  mintUser(user: string, groups?: string[]): Promise<ClusterUser>;
  /** Stops only this cluster's API server (simulates an outage); data stays in etcd. */
  stopApiServer(): Promise<void>;
  /** Starts this cluster's API server again on the same port. */
  startApiServer(): Promise<void>;
  isApiServerRunning(): boolean;
  /**
   * With `nodes: true`: the API server as the nodes' network reaches it — its port on the host
   * address of this cluster's node (covered by the serving certificate), what a pod of any
   * cluster of the set dials, as it would a remote cluster's API endpoint. Undefined otherwise.
   */
  readonly nodeNetworkServer: string | undefined;
}

export interface ClusterSet {
  readonly clusters: Record<string, TestCluster>;
  readonly dir: string;
  /** With `nodes: true`: the set's node network block, 10.<nodeBlock>.0.0/16 (test/env/nodes). */
  readonly nodeBlock: number | undefined;
  get(name: string): TestCluster;
  /** Stops every process and removes every file of the set. Safe to call twice. */
  stop(): Promise<void>;
}

export class ClusterSetError extends Error {
  readonly code = "SWITCHYARD_TEST_ENV_START_FAILED";
}

const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

interface Endpoint {
  url: string;
  ca?: string;
  cert?: string;
  key?: string;
}

/** GET a URL and return status + body, or undefined when unreachable. */
function get(
  ep: Endpoint,
  path: string,
  timeoutMs = 2000,
): Promise<{ status: number; body: string } | undefined> {
  return new Promise((resolve) => {
    const u = new URL(path, ep.url);
    const opts = {
      method: "GET",
      timeout: timeoutMs,
      ...(u.protocol === "https:"
        ? { ca: ep.ca, cert: ep.cert, key: ep.key, rejectUnauthorized: ep.ca !== undefined }
        : {}),
    };
    const req = (u.protocol === "https:" ? httpsRequest : httpRequest)(u, opts, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", () => resolve(undefined));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(undefined));
    req.end();
  });
}

async function waitFor(
  what: string,
  proc: ManagedProcess | undefined,
  deadline: number,
  check: () => Promise<boolean>,
): Promise<void> {
  const log = () => (proc ? ` Log ${proc.logFile}:\n${proc.logTail()}` : "");
  try {
    await eventually(what, check, {
      timeoutMs: Math.max(0, deadline - Date.now()),
      intervalMs: 150,
      giveUp: () =>
        proc?.hasExited() ? new ClusterSetError(`${what} exited before it was ready.${log()}`) : undefined,
    });
  } catch (err) {
    if (err instanceof PollTimeoutError) throw new ClusterSetError(`${what} was not ready in time.${log()}`);
    throw err;
  }
}

class Etcd {
  proc!: ManagedProcess;
  url!: string;
  constructor(
    private readonly group: ProcessGroupDir,
    private readonly bin: string,
    private readonly name: string,
  ) {}
  async start(deadline: number): Promise<void> {
    const [client, peer] = await freePorts(2);
    this.url = `http://127.0.0.1:${client}`;
    const peerUrl = `http://127.0.0.1:${peer}`;
    const dataDir = join(this.group.dir, this.name);
    this.proc = this.group.spawn(this.name, this.bin, [
      `--name=${this.name}`,
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${this.url}`,
      `--advertise-client-urls=${this.url}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=${this.name}=${peerUrl}`,
      "--unsafe-no-fsync",
      "--log-level=warn",
    ]);
    await waitFor(this.name, this.proc, deadline, async () => {
      const r = await get({ url: this.url }, "/health");
      return r?.status === 200 && r.body.includes('"health":"true"');
    });
  }
}

class Cluster implements TestCluster {
  server!: string;
  port!: number;
  caPem!: string;
  caFile!: string;
  ca!: CertificateAuthority;
  adminKubeconfigPath!: string;
  readonly dir: string;
  private admin!: { certPem: string; keyPem: string };
  private apiServer: ManagedProcess | undefined;
  private controllerManager: ManagedProcess | undefined;
  private apiArgs: string[] = [];
  private kcmArgs: string[] = [];
  private users = 0;

  constructor(
    readonly name: string,
    private readonly group: ProcessGroupDir,
    private readonly bins: Record<BinaryName, string>,
    private readonly etcd: Etcd,
    private readonly extraArgs: string[],
    private readonly readyTimeoutMs: number,
    /** With nodes: this cluster's node addresses (its node's host address is in the serving certificate). */
    private readonly node: NodeAddresses | undefined = undefined,
  ) {
    this.dir = join(group.dir, name);
    mkdirSync(this.dir, { recursive: true });
  }

  get nodeNetworkServer(): string | undefined {
    return this.node ? `https://${this.node.hostIp}:${this.port}` : undefined;
  }

  private file(name: string, content: string): string {
    const p = join(this.dir, name);
    writeFileSync(p, content, { mode: 0o600 });
    return p;
  }

  async prepare(): Promise<void> {
    const [port] = await freePorts(1);
    this.port = port!;
    this.server = `https://127.0.0.1:${this.port}`;
    this.ca = await createCertificateAuthority(`switchyard-test-${this.name}-ca`);
    this.caPem = this.ca.certPem;
    this.caFile = this.file("ca.crt", this.ca.certPem);
    const serving = await this.ca.issue({
      commonName: "kube-apiserver",
      usage: "server",
      dnsNames: ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
      ipAddresses: ["127.0.0.1", ...(this.node ? [KUBERNETES_SERVICE_IP, this.node.hostIp] : [])],
      validForSeconds: 30 * 86_400,
    });
    this.admin = await this.ca.issue({
      commonName: "switchyard-admin",
      organizations: ["system:masters"],
      usage: "client",
      validForSeconds: 30 * 86_400,
    });
    const sa = await createServiceAccountSigningKey();
    const kcm = await this.ca.issue({ commonName: "system:kube-controller-manager", usage: "client" });
    this.adminKubeconfigPath = writeKubeconfig(join(this.dir, "admin.kubeconfig"), {
      clusterName: this.name,
      server: this.server,
      caPem: this.caPem,
      user: "switchyard-admin",
      ...this.admin,
    });
    const kcmKubeconfig = writeKubeconfig(join(this.dir, "kcm.kubeconfig"), {
      clusterName: this.name,
      server: this.server,
      caPem: this.caPem,
      user: "system:kube-controller-manager",
      ...kcm,
    });
    const saKey = this.file("sa.key", sa.privatePem);
    const saPub = this.file("sa.pub", sa.publicPem);
    this.apiArgs = [
      "--bind-address=127.0.0.1",
      "--advertise-address=127.0.0.1",
      `--secure-port=${this.port}`,
      `--etcd-servers=${this.etcd.url}`,
      `--etcd-prefix=/registry-${this.name}`,
      `--tls-cert-file=${this.file("apiserver.crt", serving.certPem)}`,
      `--tls-private-key-file=${this.file("apiserver.key", serving.keyPem)}`,
      `--client-ca-file=${this.caFile}`,
      this.node ? "--authorization-mode=Node,RBAC" : "--authorization-mode=RBAC",
      `--service-account-issuer=https://${this.name}.switchyard.test`,
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      "--endpoint-reconciler-type=none",
      "--allow-privileged=true",
      "--enable-priority-and-fairness=false",
      "--profiling=false",
      `--cert-dir=${join(this.dir, "certs")}`,
      ...this.extraArgs,
      ...(this.node ? await apiServerArgsForNodes(this.ca, this.dir, this.node) : []),
    ];
    this.kcmArgs = [
      `--kubeconfig=${kcmKubeconfig}`,
      `--authentication-kubeconfig=${kcmKubeconfig}`,
      `--authorization-kubeconfig=${kcmKubeconfig}`,
      "--bind-address=127.0.0.1",
      `--secure-port=0`,
      "--leader-elect=false",
      `--service-account-private-key-file=${saKey}`,
      `--root-ca-file=${this.caFile}`,
      "--use-service-account-credentials=true",
      "--controllers=*",
      "--profiling=false",
    ];
  }

  private endpoint(): Endpoint {
    return { url: this.server, ca: this.caPem, cert: this.admin.certPem, key: this.admin.keyPem };
  }

  async startApiServer(): Promise<void> {
    if (this.apiServer && !this.apiServer.hasExited()) return;
    const deadline = Date.now() + this.readyTimeoutMs;
    this.apiServer = this.group.spawn(
      `${this.name}-kube-apiserver`,
      this.bins["kube-apiserver"],
      this.apiArgs,
    );
    await waitFor(`kube-apiserver of cluster ${this.name}`, this.apiServer, deadline, async () => {
      const r = await get(this.endpoint(), "/readyz");
      return r?.status === 200;
    });
  }

  async stopApiServer(): Promise<void> {
    await this.apiServer?.stop();
  }

  isApiServerRunning(): boolean {
    return this.apiServer !== undefined && !this.apiServer.hasExited();
  }

  async startControllerManager(): Promise<void> {
    const deadline = Date.now() + this.readyTimeoutMs;
    this.controllerManager = this.group.spawn(
      `${this.name}-kube-controller-manager`,
      this.bins["kube-controller-manager"],
      this.kcmArgs,
    );
    // Ready when its controllers act: the ServiceAccount controller creates "default"
    // in every namespace (and Pods cannot be created before it exists).
    await waitFor(
      `kube-controller-manager of cluster ${this.name}`,
      this.controllerManager,
      deadline,
      async () => {
        const r = await get(this.endpoint(), "/api/v1/namespaces/default/serviceaccounts/default");
        return r?.status === 200;
      },
    );
  }

  async stopAll(): Promise<void> {
    await Promise.all([this.controllerManager?.stop(), this.apiServer?.stop()]);
  }

  kubeConfig(): KubeConfig {
    return loadKubeConfig(this.adminKubeconfigPath);
  }

  async mintUser(user: string, groups: string[] = []): Promise<ClusterUser> {
    const pair = await this.ca.issue({ commonName: user, organizations: groups, usage: "client" });
    const input = { clusterName: this.name, server: this.server, caPem: this.caPem, user, ...pair };
    const yamlText = kubeconfigYaml(input);
    const kubeconfigPath = writeKubeconfig(join(this.dir, `user-${++this.users}.kubeconfig`), input);
    return {
      user,
      groups,
      ...pair,
      kubeconfigPath,
      kubeconfigYaml: yamlText,
      kubeConfig: () => loadKubeConfig(yamlText),
    };
  }
}

/**
 * Starts etcd and, per cluster, kube-apiserver (+ kube-controller-manager), waits until
 * all are ready, and returns handles. Call `stop()` in afterAll/finally; if the process
 * dies first, the next `sweepOrphans()` (global test teardown, or the next start) cleans up.
 */
export async function startClusterSet(options: ClusterSetOptions): Promise<ClusterSet> {
  const names = options.clusters;
  if (names.length === 0) throw new ClusterSetError("clusters: name at least one cluster");
  for (const n of names) {
    if (!dnsLabel.test(n))
      throw new ClusterSetError(`clusters: "${n}" is not an RFC 1123 label (a-z, 0-9, '-')`);
  }
  if (new Set(names).size !== names.length) throw new ClusterSetError("clusters: names must be unique");
  await sweepOrphans();
  const withKcm = options.controllerManager ?? true;
  const bins = await ensureBinaries([
    "etcd",
    "kube-apiserver",
    ...(withKcm ? ["kube-controller-manager" as const] : []),
  ]);
  const group = new ProcessGroupDir(
    join(envRoot(), `set-${process.pid}-${randomBytes(4).toString("hex")}`),
    options.logDir,
  );
  const timeout = options.readyTimeoutMs ?? 120_000;
  const deadline = Date.now() + timeout;
  const etcds: Etcd[] = [];
  const clusters: Record<string, Cluster> = {};
  // Node i of the set (test/env/nodes) serves cluster i; its host address is known now, so the
  // serving certificates cover it.
  const nodeBlock = options.nodes ? await pickAddressBlock() : undefined;
  // One stop, shared by every caller: a second call (a failed start racing a signal) waits
  // for the same removal instead of returning while processes still run.
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await Promise.all(Object.values(clusters).map((c) => c.stopAll()));
      await Promise.all(etcds.map((e) => e.proc?.stop()));
      group.remove();
    })());
  try {
    const shared = (options.etcd ?? "shared") === "shared";
    if (shared) etcds.push(new Etcd(group, bins.etcd, "etcd"));
    else for (const n of names) etcds.push(new Etcd(group, bins.etcd, `etcd-${n}`));
    await Promise.all(etcds.map((e) => e.start(deadline)));
    names.forEach((n, i) => {
      clusters[n] = new Cluster(
        n,
        group,
        bins,
        etcds[shared ? 0 : i]!,
        options.apiServerArgs?.[n] ?? [],
        timeout,
        nodeBlock === undefined ? undefined : nodeAddresses(nodeBlock, i + 1),
      );
    });
    await Promise.all(Object.values(clusters).map((c) => c.prepare()));
    await Promise.all(Object.values(clusters).map((c) => c.startApiServer()));
    if (withKcm) await Promise.all(Object.values(clusters).map((c) => c.startControllerManager()));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    clusters,
    dir: group.dir,
    nodeBlock,
    get(name: string) {
      const c = clusters[name];
      if (!c) throw new ClusterSetError(`no cluster named "${name}" in this set (have: ${names.join(", ")})`);
      return c;
    },
    stop,
  };
}
