// Command-line options of the control-plane process, parsed and validated in one place.
// Every error names the flag and what to give instead; the Helm chart renders exactly
// these flags (charts/switchyard/templates/_helpers.tpl). Errors are `OptionError`s whose
// `option` is the flag; main.ts exits with status 2 on them. Each feature's flags live beside its code (a `FeatureFlags` of runtime/feature-flags.ts): the
// agents' in member/agent-options.ts, the webhook's in injection/, branching's and queues' in
// their folders; this module adds them to the command and keeps the process's own.
import { hostname } from "node:os";
import { Command, Option } from "commander";
import { OptionError } from "../../lib/option-error.js";
import { parseTargetPattern } from "./allow-list/index.js";
import { branchingFlags, type BranchingOptions } from "./branching/branching-options.js";
import { injectionFlags, type InjectionOptions } from "./injection/injection-options.js";
import { agentFlags, type AgentOptions } from "./member/agent-options.js";
import { primaryFlags, type PrimaryOptions } from "./primary/primary-options.js";
import { queueFlags, type QueueOptions } from "./queues/queue-options.js";
import { MAX_CONNECTION_AGE_LIMIT_MS } from "./route-discovery/index.js";
import {
  DNS_LABEL,
  parseListen,
  readFlagFile,
  secondsFlag,
  type ControlPlaneMode,
  type ListenAddress,
} from "./runtime/index.js";

export type { ControlPlaneMode, ListenAddress };

export interface ControlPlaneOptions {
  mode: ControlPlaneMode;
  /** This cluster's name, advertised in SwitchyardOperator (a Primary takes it from its configuration). */
  clusterName: string;
  /** Kubeconfig file; undefined = in-cluster config or $KUBECONFIG. */
  kubeconfig: string | undefined;
  /** The control plane's namespace (ConfigMap, Secrets, Lease). */
  namespace: string;
  /** This replica's identity for leader election. */
  identity: string;
  grpcListen: ListenAddress;
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
  logLevel: string;
  /** Member: how agents are provisioned and reached (member/agent-options.ts). */
  agents: AgentOptions;
  /** Member: the admission webhook giving opted-in pods the agent at birth (injection/). */
  injection: InjectionOptions;
  /** Primary: its configuration, health checks and gateway CA (primary/primary-options.ts). */
  primary: PrimaryOptions;
  /** Install the CRDs at start (embedded environment; in clusters Helm does it). */
  installCrds: boolean;
  /** Database branching: whether this member is the Default, and the branch servers. */
  branching: BranchingOptions;
  /** SQS queue splitting (member mode). */
  queues: QueueOptions;
}

function list(v: string | undefined): string[] {
  return (v ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

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
    .option("--identity <id>", "replica identity for leader election (default: $POD_NAME or hostname)")
    .option("--grpc-listen <addr>", "RouteDiscovery gRPC listen address", ":9443")
    .option("--metrics-listen <addr>", "/metrics, /healthz, /readyz listen address", ":9090")
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
    .option("--log-level <level>", "fatal | error | warn | info | debug | trace", "info")
    .option("--install-crds", "install the CRDs at start (embedded environment)", false);
  for (const flags of [primaryFlags, agentFlags, injectionFlags, branchingFlags, queueFlags]) flags.add(cmd);
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
  if (!namespace || !DNS_LABEL.test(namespace)) {
    throw new OptionError(
      "--namespace",
      `give the control plane's namespace (or set POD_NAMESPACE), got "${namespace ?? ""}"`,
    );
  }
  const clusterName = o.clusterName as string;
  if (!DNS_LABEL.test(clusterName)) {
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
          certPem: readFlagFile("--tls-cert", certFile),
          keyPem: readFlagFile("--tls-key", keyFile),
          certFile,
          keyFile,
          ...(clientCa ? { clientCaPem: readFlagFile("--router-client-ca", clientCa) } : {}),
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
  const leaseDurationMs = secondsFlag(
    "--leader-lease-duration-seconds",
    o.leaderLeaseDurationSeconds as string,
  );
  const renewDeadlineMs = secondsFlag(
    "--leader-renew-deadline-seconds",
    o.leaderRenewDeadlineSeconds as string,
  );
  const retryPeriodMs = secondsFlag("--leader-retry-period-seconds", o.leaderRetryPeriodSeconds as string);
  if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
    throw new OptionError(
      "--leader-renew-deadline-seconds",
      "need retry period < renew deadline < lease duration",
    );
  }
  const maxConnectionAgeMs = secondsFlag("--max-connection-age-seconds", o.maxConnectionAgeSeconds as string);
  if (maxConnectionAgeMs > MAX_CONNECTION_AGE_LIMIT_MS) {
    throw new OptionError(
      "--max-connection-age-seconds",
      `must be at most ${MAX_CONNECTION_AGE_LIMIT_MS / 1000} (about 22 days), got "${o.maxConnectionAgeSeconds as string}"`,
    );
  }
  const kinds = list(o.allowedTargetKinds as string | undefined);
  for (const k of kinds) {
    if (!["deployment", "statefulset", "pod"].includes(k)) {
      throw new OptionError("--allowed-target-kinds", `"${k}" is not one of deployment, statefulset, pod`);
    }
  }
  const allowedNamespaces = list(o.allowedNamespaces as string | undefined);
  for (const n of allowedNamespaces) {
    if (!DNS_LABEL.test(n))
      throw new OptionError("--allowed-namespaces", `"${n}" is not a namespace name (RFC 1123 label)`);
  }
  const allowedTargets = list(o.allowedTargets as string | undefined);
  for (const t of allowedTargets) parseTargetPattern(t, "--allowed-targets");
  return {
    mode,
    clusterName,
    kubeconfig: o.kubeconfig as string | undefined,
    namespace,
    identity: (o.identity as string | undefined) ?? env.POD_NAME ?? hostname(),
    grpcListen: parseListen("--grpc-listen", o.grpcListen as string),
    metricsListen: parseListen("--metrics-listen", o.metricsListen as string),
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
    logLevel: o.logLevel as string,
    agents: agentFlags.parse(o, mode),
    injection: injectionFlags.parse(o, mode),
    primary: primaryFlags.parse(o, mode),
    installCrds: o.installCrds === true,
    branching: branchingFlags.parse(o, mode),
    queues: queueFlags.parse(o, mode),
  };
}
