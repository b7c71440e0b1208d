// Command-line options of the control-plane process, parsed and validated in one place.
// Every error names the flag and what to give instead; the Helm chart renders exactly
// these flags (charts/switchyard/templates/_helpers.tpl). Errors are `OptionError`s whose
// `option` is the flag; main.ts exits with status 2 on them.
import { MAX_LINGER_SECONDS } from "./member/agent-linger.js";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { hostname } from "node:os";
import { Command, Option } from "commander";
import { OptionError } from "../../lib/option-error.js";
import { parseTargetPattern } from "./allow-list/index.js";
import {
  addBranchingOptions,
  parseBranchingOptions,
  type BranchingOptions,
} from "./branching/branching-options.js";
import { addQueueOptions, parseQueueOptions, type QueueOptions } from "./queues/queue-options.js";
import { MAX_CONNECTION_AGE_LIMIT_MS } from "./route-discovery/index.js";

export type ControlPlaneMode = "primary" | "member" | "both";

export interface ListenAddress {
  host: string;
  port: number;
}

export interface ControlPlaneOptions {
  mode: ControlPlaneMode;
  /** This cluster's name, advertised in SwitchyardOperator (a Primary takes it from its configuration). */
  clusterName: string;
  /** Kubeconfig file; undefined = in-cluster config or $KUBECONFIG. */
  kubeconfig: string | undefined;
  /** The control plane's namespace (ConfigMap, Secrets, Lease). */
  namespace: string;
  configMap: string;
  /** This replica's identity for leader election. */
  identity: string;
  grpcListen: ListenAddress;
  /**
   * Member: where the admission webhook that gives opted-in pods the agent at birth listens
   * (HTTPS with --tls-cert/--tls-key); undefined = no webhook (default).
   */
  injectionListen: ListenAddress | undefined;
  metricsListen: ListenAddress;
  /** Base URL of this cluster's routers (ws:// or wss://), published for clients and used as member gateway. */
  routerEndpoint: string | undefined;
  /** PEM serving certificate and key of the gRPC endpoint; undefined with grpcPlaintext. */
  tls:
    | {
        certPem: string;
        keyPem: string;
        clientCaPem?: string;
        /** Where certPem and keyPem were read (a server that follows renewals re-reads them). */
        certFile?: string;
        keyFile?: string;
      }
    | undefined;
  grpcPlaintext: boolean;
  /** ServiceAccounts (namespace/name) whose tokens may stream routes. */
  routerServiceAccounts: { namespace: string; name: string }[];
  /** Audience router tokens must carry (undefined = the API server's own). */
  routerTokenAudience: string | undefined;
  /**
   * RouteDiscovery connections older than this get GOAWAY and their routers reconnect, so
   * streams spread over every replica, ms (default 1 800 000 = 30 min).
   */
  maxConnectionAgeMs: number;
  /** Session allow-list (every cluster enforces its own): namespaces, kinds, `<ns>/<kind>/<name>` patterns; [] = all. */
  allowedNamespaces: string[];
  allowedTargetKinds: string[];
  allowedTargets: string[];
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  healthCheckIntervalMs: number;
  logLevel: string;
  /** Member mode: how agents are provisioned. */
  agentProvisioner: "sidecar" | "process";
  /** Process provisioner: kubeconfig the agents read their pod with. */
  agentKubeconfig: string | undefined;
  /** Process provisioner: `--outbound-bind` of the agents. */
  agentOutboundBind: string | undefined;
  /** Process provisioner: extra flags for every agent (e.g. --app-host=127.0.0.2). */
  agentExtraArgs: string[];
  /** Process provisioner: where agent records and logs live (one directory per control plane). */
  agentStateDir: string | undefined;
  /** Process provisioner: agents take app port P's traffic on P + offset (0 = ephemeral). */
  agentTrafficPortOffset: number;
  /** Sidecar provisioner: the agent image. */
  agentImage: string | undefined;
  /**
   * Sidecar provisioner: seconds an idle agent stays in the workload after the last session on
   * it ended (0 = restore at once, -1 = until removed; default 900). A session that starts
   * meanwhile attaches with no template change. A workload's `switchyard.dev/agent-linger-seconds`
   * annotation overrides it.
   */
  agentLingerSeconds: number;
  /** Sidecar provisioner: the image of the iptables redirect init container (sh + iptables). */
  redirectImage: string | undefined;
  /** Sidecar provisioner: kubernetes.io/tls Secret (in each target namespace) the agents serve wss:// with. */
  agentTlsSecret: string | undefined;
  /**
   * Sidecar provisioner with agentTlsSecret: the DNS name the agents' certificate carries;
   * routers dial agents by pod IP and verify the certificate against this name instead
   * (default "switchyard-agent"; undefined without agentTlsSecret).
   */
  agentTlsServerName: string | undefined;
  /** Member: PEM CA routers verify wss:// agents with (in the routing table; default none = system trust). */
  agentCaPem: string | undefined;
  /** Primary: PEM CA routers verify member gateways (wss://) with (in the routing table; default none). */
  gatewayCaPem: string | undefined;
  /** Install the CRDs at start (embedded environment; in clusters Helm does it). */
  installCrds: boolean;
  /** Database branching: whether this member is the Default, and the branch servers. */
  branching: BranchingOptions;
  /** SQS queue splitting (member mode). */
  queues: QueueOptions;
}

export function parseListen(flag: string, value: string): ListenAddress {
  const m = /^(?:(\[[0-9a-fA-F:]+\]|[^:]*):)?(\d{1,5})$/.exec(value);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) {
    throw new OptionError(flag, `"${value}" is not host:port or :port (e.g. :9443 or 127.0.0.1:0)`);
  }
  const host = (m[1] ?? "").replace(/^\[|\]$/g, "") || "0.0.0.0";
  return { host, port };
}

function list(v: string | undefined): string[] {
  return (v ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

function seconds(flag: string, v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0)
    throw new OptionError(flag, `must be a positive number of seconds, got "${v}"`);
  return Math.round(n * 1000);
}

function readPem(flag: string, path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new OptionError(flag, `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
}

/** Seconds an idle sidecar agent stays unless --agent-linger-seconds says otherwise (15 minutes). */
export const DEFAULT_AGENT_LINGER_SECONDS = 900;

/** DNS name agent certificates carry unless --agent-tls-server-name says otherwise. */
export const DEFAULT_AGENT_TLS_SERVER_NAME = "switchyard-agent";

const dnsLabel = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const dnsSubdomain = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Thrown by parseControlPlaneArgs for `--help`; `text` is the usage to print. */
export class HelpRequested extends Error {
  constructor(readonly text: string) {
    super("help requested");
  }
}

export function parseControlPlaneArgs(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): ControlPlaneOptions {
  const cmd = new Command("switchyard-control-plane");
  cmd
    .exitOverride()
    .configureOutput({ writeErr: () => {}, writeOut: () => {} })
    .addOption(
      new Option("--mode <mode>", "primary | member | both")
        .choices(["primary", "member", "both"])
        .makeOptionMandatory(),
    )
    .option("--kubeconfig <path>", "kubeconfig (default: in-cluster or $KUBECONFIG)")
    .option("--cluster-name <name>", "this cluster's name (RFC 1123 label)", env.CLUSTER_NAME ?? "local")
    .option("--namespace <ns>", "the control plane's namespace", env.POD_NAMESPACE)
    .option("--config-map <name>", "ConfigMap holding clusters-config.yaml", "switchyard-clusters")
    .option("--identity <id>", "replica identity for leader election (default: $POD_NAME or hostname)")
    .option("--grpc-listen <addr>", "RouteDiscovery gRPC listen address", ":9443")
    .option("--metrics-listen <addr>", "/metrics, /healthz, /readyz listen address", ":9090")
    .option(
      "--injection-listen <addr>",
      "member: listen address of the admission webhook giving opted-in pods the agent at birth (HTTPS; default: off)",
    )
    .option("--router-endpoint <url>", "ws(s):// base URL of this cluster's routers")
    .option("--tls-cert <file>", "PEM serving certificate of the gRPC endpoint")
    .option("--tls-key <file>", "PEM key of --tls-cert")
    .option("--router-client-ca <file>", "PEM CA of router client certificates (mTLS router auth)")
    .option("--grpc-plaintext", "serve gRPC without TLS (embedded environment only)", false)
    .option("--router-service-account <ns/name...>", "ServiceAccount allowed to stream routes (repeatable)")
    .option("--router-token-audience <aud>", "audience router tokens must carry")
    .option(
      "--max-connection-age-seconds <s>",
      "RouteDiscovery connections are closed (GOAWAY) at this age so routers rebalance across replicas",
      "1800",
    )
    .option("--allowed-namespaces <list>", "comma-separated namespaces sessions may use (default: all)")
    .option("--allowed-target-kinds <list>", "comma-separated target kinds sessions may use (default: all)")
    .option(
      "--allowed-targets <list>",
      "comma-separated <namespace>/<kind>/<name> patterns (* = any run of characters in a part) of targets sessions may use (default: all)",
    )
    .option("--leader-lease-duration-seconds <s>", "Lease duration", "15")
    .option(
      "--leader-renew-deadline-seconds <s>",
      "leader steps down when it could not renew for this long",
      "10",
    )
    .option("--leader-retry-period-seconds <s>", "time between leader-election attempts", "2")
    .option("--health-check-interval-seconds <s>", "remote-cluster health check interval", "30")
    .option("--log-level <level>", "fatal | error | warn | info | debug | trace", "info")
    .addOption(
      new Option("--agent-provisioner <kind>", "sidecar | process")
        .choices(["sidecar", "process"])
        .default("sidecar"),
    )
    .option("--agent-kubeconfig <path>", "process provisioner: kubeconfig the agents use")
    .option(
      "--agent-outbound-bind <ip>",
      "process provisioner: source address of agents' outgoing connections",
    )
    .option("--agent-extra-arg <flag...>", "process provisioner: extra flag for every agent (repeatable)")
    .option(
      "--agent-state-dir <dir>",
      "process provisioner: agent records and logs, a private directory (mode 0700, this user's; " +
        "default: per cluster under $XDG_RUNTIME_DIR/switchyard-agents, else <tmpdir>/switchyard-agents-<uid>)",
    )
    .option(
      "--agent-traffic-port-offset <n>",
      "process provisioner: agents take port P's traffic on P+n",
      "0",
    )
    .option("--agent-image <image>", "sidecar provisioner: agent container image")
    .option(
      "--agent-linger-seconds <n>",
      "sidecar provisioner: seconds an idle agent stays after the last session (0 = restore at once, -1 = until removed)",
      String(DEFAULT_AGENT_LINGER_SECONDS),
    )
    .option(
      "--redirect-image <image>",
      "sidecar provisioner: image (sh, iptables) of the redirect init container",
    )
    .option(
      "--agent-tls-secret <name>",
      "sidecar provisioner: kubernetes.io/tls Secret in each target namespace; agents serve wss:// with it",
    )
    .option(
      "--agent-tls-server-name <name>",
      `DNS name the agents' certificate carries; routers verify agents (dialled by pod IP) against it (default ${DEFAULT_AGENT_TLS_SERVER_NAME} with --agent-tls-secret)`,
    )
    .option("--agent-ca <file>", "PEM CA bundle routers verify wss:// agents with")
    .option("--gateway-ca <file>", "Primary: PEM CA bundle routers verify member gateways (wss://) with")
    .option("--install-crds", "install the CRDs at start (embedded environment)", false);
  addBranchingOptions(cmd);
  addQueueOptions(cmd);
  try {
    cmd.parse(argv, { from: "user" });
  } catch (err) {
    const e = err as { code?: string; message: string };
    // `--help` (the image's default CMD) is an answer, not a mistake: main prints it, exits 0.
    if (e.code === "commander.helpDisplayed") throw new HelpRequested(cmd.helpInformation());
    throw new OptionError("arguments", e.message.replace(/^error: /, ""));
  }
  const o = cmd.opts<Record<string, string | boolean | string[] | undefined>>();
  const mode = o.mode as ControlPlaneMode;
  const namespace = o.namespace as string | undefined;
  if (!namespace || !dnsLabel.test(namespace)) {
    throw new OptionError(
      "--namespace",
      `give the control plane's namespace (or set POD_NAMESPACE), got "${namespace ?? ""}"`,
    );
  }
  const clusterName = o.clusterName as string;
  if (!dnsLabel.test(clusterName)) {
    throw new OptionError("--cluster-name", `"${clusterName}" is not an RFC 1123 label (a-z, 0-9, '-')`);
  }
  const plaintext = o.grpcPlaintext === true;
  const certFile = o.tlsCert as string | undefined;
  const keyFile = o.tlsKey as string | undefined;
  if (plaintext && (certFile || keyFile))
    throw new OptionError("--grpc-plaintext", "cannot be combined with --tls-cert/--tls-key");
  if (!plaintext && (!certFile || !keyFile)) {
    throw new OptionError(
      "--tls-cert",
      "routing tables carry secrets: give --tls-cert and --tls-key (or --grpc-plaintext in the embedded environment)",
    );
  }
  const clientCa = o.routerClientCa as string | undefined;
  const tls =
    certFile && keyFile
      ? {
          certPem: readPem("--tls-cert", certFile),
          keyPem: readPem("--tls-key", keyFile),
          certFile,
          keyFile,
          ...(clientCa ? { clientCaPem: readPem("--router-client-ca", clientCa) } : {}),
        }
      : undefined;
  const routerServiceAccounts = ((o.routerServiceAccount as string[] | undefined) ?? []).map((s) => {
    const [ns, name, extra] = s.split("/");
    if (!ns || !name || extra !== undefined)
      throw new OptionError("--router-service-account", `"${s}" is not namespace/name`);
    return { namespace: ns, name };
  });
  if (routerServiceAccounts.length === 0 && !clientCa) {
    throw new OptionError(
      "--router-service-account",
      "name at least one router ServiceAccount (namespace/name) or give --router-client-ca: otherwise no router can receive routes",
    );
  }
  const routerEndpoint = o.routerEndpoint as string | undefined;
  if (routerEndpoint !== undefined && !/^wss?:\/\/[^/]+/.test(routerEndpoint)) {
    throw new OptionError("--router-endpoint", `"${routerEndpoint}" is not a ws:// or wss:// URL`);
  }
  if ((mode === "member" || mode === "both") && !routerEndpoint) {
    throw new OptionError(
      "--router-endpoint",
      "member mode publishes each child's gateway under this URL: give the ws(s):// URL of this cluster's routers",
    );
  }
  const provisioner = o.agentProvisioner as "sidecar" | "process";
  if (provisioner === "process" && !o.agentKubeconfig) {
    throw new OptionError("--agent-kubeconfig", "the process provisioner needs a kubeconfig for its agents");
  }
  const agentTlsSecret = o.agentTlsSecret as string | undefined;
  if (agentTlsSecret !== undefined) {
    if (provisioner !== "sidecar")
      throw new OptionError(
        "--agent-tls-secret",
        "is mounted into sidecar agents; process agents serve plaintext on this host (use --agent-provisioner=sidecar or drop the flag)",
      );
    if (!dnsSubdomain.test(agentTlsSecret))
      throw new OptionError("--agent-tls-secret", `"${agentTlsSecret}" is not a Secret name`);
  }
  const serverNameFlag = o.agentTlsServerName as string | undefined;
  if (serverNameFlag !== undefined) {
    if (agentTlsSecret === undefined)
      throw new OptionError(
        "--agent-tls-server-name",
        "names the agents' certificate, but without --agent-tls-secret agents serve plaintext ws://: give --agent-tls-secret too, or drop the flag",
      );
    if (isIP(serverNameFlag) !== 0 || !dnsSubdomain.test(serverNameFlag))
      throw new OptionError(
        "--agent-tls-server-name",
        `"${serverNameFlag}" is not a DNS name (lowercase letters, digits, '-' and '.'; not an IP address): give a name the agents' certificate carries as a DNS SAN, e.g. ${DEFAULT_AGENT_TLS_SERVER_NAME}`,
      );
  }
  const agentTlsServerName =
    agentTlsSecret === undefined ? undefined : (serverNameFlag ?? DEFAULT_AGENT_TLS_SERVER_NAME);
  const agentCa = o.agentCa as string | undefined;
  if (agentCa !== undefined && agentTlsSecret === undefined) {
    throw new OptionError(
      "--agent-ca",
      "verifies agents serving wss://, but without --agent-tls-secret agents serve plaintext ws://: give both or neither",
    );
  }
  const gatewayCa = o.gatewayCa as string | undefined;
  if (gatewayCa !== undefined && mode === "member") {
    throw new OptionError(
      "--gateway-ca",
      "only a Primary (--mode=primary or both) routes to member gateways: drop the flag here",
    );
  }
  const leaseDurationMs = seconds("--leader-lease-duration-seconds", o.leaderLeaseDurationSeconds as string);
  const renewDeadlineMs = seconds("--leader-renew-deadline-seconds", o.leaderRenewDeadlineSeconds as string);
  const retryPeriodMs = seconds("--leader-retry-period-seconds", o.leaderRetryPeriodSeconds as string);
  if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
    throw new OptionError(
      "--leader-renew-deadline-seconds",
      "need retry period < renew deadline < lease duration",
    );
  }
  const maxConnectionAgeMs = seconds("--max-connection-age-seconds", o.maxConnectionAgeSeconds as string);
  if (maxConnectionAgeMs > MAX_CONNECTION_AGE_LIMIT_MS) {
    throw new OptionError(
      "--max-connection-age-seconds",
      `must be at most ${MAX_CONNECTION_AGE_LIMIT_MS / 1000} (about 22 days), got "${o.maxConnectionAgeSeconds as string}"`,
    );
  }
  const offset = Number(o.agentTrafficPortOffset);
  if (!Number.isInteger(offset) || offset < 0 || offset > 60000) {
    throw new OptionError(
      "--agent-traffic-port-offset",
      `must be an integer 0-60000, got "${o.agentTrafficPortOffset as string}"`,
    );
  }
  const agentLingerSeconds = Number(o.agentLingerSeconds);
  if (
    !Number.isInteger(agentLingerSeconds) ||
    agentLingerSeconds < -1 ||
    agentLingerSeconds > MAX_LINGER_SECONDS
  ) {
    throw new OptionError(
      "--agent-linger-seconds",
      `must be an integer from -1 (until removed) to ${MAX_LINGER_SECONDS} (30 days), got "${o.agentLingerSeconds as string}"`,
    );
  }
  const injectionFlag = o.injectionListen as string | undefined;
  if (injectionFlag !== undefined && (mode === "primary" || provisioner !== "sidecar"))
    throw new OptionError(
      "--injection-listen",
      "gives pods the sidecar agent: it runs in member or both mode with --agent-provisioner=sidecar; drop the flag here",
    );
  if (injectionFlag !== undefined && !tls)
    throw new OptionError(
      "--injection-listen",
      "the API server calls the webhook over HTTPS only: give --tls-cert and --tls-key (the chart's TLS Secret)",
    );
  const injectionListen =
    injectionFlag === undefined ? undefined : parseListen("--injection-listen", injectionFlag);
  const kinds = list(o.allowedTargetKinds as string | undefined);
  for (const k of kinds) {
    if (!["deployment", "statefulset", "pod"].includes(k)) {
      throw new OptionError("--allowed-target-kinds", `"${k}" is not one of deployment, statefulset, pod`);
    }
  }
  const allowedNamespaces = list(o.allowedNamespaces as string | undefined);
  for (const n of allowedNamespaces) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(n))
      throw new OptionError("--allowed-namespaces", `"${n}" is not a namespace name (RFC 1123 label)`);
  }
  const allowedTargets = list(o.allowedTargets as string | undefined);
  for (const t of allowedTargets) parseTargetPattern(t, "--allowed-targets");
  return {
    mode,
    clusterName,
    kubeconfig: o.kubeconfig as string | undefined,
    namespace,
    configMap: o.configMap as string,
    identity: (o.identity as string | undefined) ?? env.POD_NAME ?? hostname(),
    grpcListen: parseListen("--grpc-listen", o.grpcListen as string),
    metricsListen: parseListen("--metrics-listen", o.metricsListen as string),
    injectionListen,
    routerEndpoint,
    tls,
    grpcPlaintext: plaintext,
    routerServiceAccounts,
    routerTokenAudience: o.routerTokenAudience as string | undefined,
    maxConnectionAgeMs,
    allowedNamespaces,
    allowedTargetKinds: kinds,
    allowedTargets,
    leaseDurationMs,
    renewDeadlineMs,
    retryPeriodMs,
    healthCheckIntervalMs: seconds("--health-check-interval-seconds", o.healthCheckIntervalSeconds as string),
    logLevel: o.logLevel as string,
    agentProvisioner: provisioner,
    agentKubeconfig: o.agentKubeconfig as string | undefined,
    agentOutboundBind: o.agentOutboundBind as string | undefined,
    agentExtraArgs: (o.agentExtraArg as string[] | undefined) ?? [],
    agentTrafficPortOffset: offset,
    agentStateDir: o.agentStateDir as string | undefined,
    agentImage: o.agentImage as string | undefined,
    agentLingerSeconds,
    redirectImage: o.redirectImage as string | undefined,
    agentTlsSecret,
    agentTlsServerName,
    agentCaPem: agentCa !== undefined ? readPem("--agent-ca", agentCa) : undefined,
    gatewayCaPem: gatewayCa !== undefined ? readPem("--gateway-ca", gatewayCa) : undefined,
    installCrds: o.installCrds === true,
    branching: parseBranchingOptions(o, mode),
    queues: parseQueueOptions(o, mode),
  };
}
