// The embedded environment: Switchyard installed the way a user installs it, on local
// clusters. Real API servers come from startClusterSet; the real Helm chart is installed
// into each (CRDs, RBAC, ServiceAccounts, the clusters ConfigMap and credential Secrets);
// then, since there is no kubelet to run the chart's pods, the same binaries run as local
// processes under the chart's own ServiceAccounts (tokens from TokenRequest): a management-
// only Primary control plane with its routers, and per workload cluster a member control
// plane (process agents), a gateway router, and a demo app standing in for the pod's
// container. Each workload cluster gets its own loopback address (127.0.0.2, .3, …), so its
// app, its agent's traffic port and its agent's outgoing connections are told apart.
//
// Every file of one stack lives in its own directory `<envRoot>/stack-<pid>-<random>` (an
// owned process group: its components are recorded there, so a sweep cleans up after a
// SIGKILLed owner, and nothing is shared between runs); the cluster set has its own.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { join } from "node:path";
import { switchyardOperatorClient } from "../../../proto/api/v1alpha1/index.js";
import {
  startClusterSet,
  type ClusterSet,
  type ClusterUser,
  type TestCluster,
} from "../clusters/cluster-set.js";
import { APP_PORT, createDemo, demoApp, TRAFFIC_OFFSET, type AppRequest } from "./demo-workload.js";
import { Helm } from "./helm.js";
import {
  demoTargetArgs,
  grantDevelopers,
  installChart,
  primaryClusterValues,
  ROUTE_DISCOVERY_AUDIENCE,
  serviceAccountToken as token,
  STACK_NAMESPACE,
} from "./stack-install.js";
import { writeKubeconfig } from "../clusters/kubeconfig.js";
import { freePorts } from "../ports.js";
import { EmbeddedStackError, startFailure } from "./stack-start-failure.js";
import { envRoot, killReferencing, ProcessGroupDir } from "../processes.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";
import { eventually } from "../../support/poll.js";

export { APP_PORT, TRAFFIC_OFFSET, EmbeddedStackError };
export { STACK_NAMESPACE };
const AUDIENCE = ROUTE_DISCOVERY_AUDIENCE;

export interface EmbeddedStackOptions {
  /** Workload clusters; the first is the Default cluster (default ["east", "west"]). */
  workloadClusters?: string[];
  /** Routers on the Primary (default 2, so clients can fail over). */
  primaryRouters?: number;
  /** Where process logs go (default: `logs/` in the stack's own directory, removed by stop()). */
  logDir?: string;
  /**
   * When the start fails, keep the stack's directory (its logs) for a person to read; the
   * next start's sweep removes it (default false: everything is removed).
   */
  keepLogsOnFailure?: boolean;
  /** Extra env vars of the demo Deployment. */
  demoEnv?: Record<string, string>;
  /**
   * Admin URLs of the servers that hold database branches, given to the Default cluster's
   * control plane (the first workload cluster, which always runs the branching controllers).
   */
  branchServers?: { postgres?: string; mysql?: string };
  /**
   * Told when a component (control plane, router) exits on its own once started — not when
   * stop() or killPrimaryRouter() ends it: a person running the stack must hear of it.
   */
  onComponentExit?: (name: string, status: number | string, logFile: string) => void;
}

export interface WorkloadClusterHandle {
  name: string;
  cluster: TestCluster;
  /** Loopback address of this cluster's app, agent traffic port and outgoing connections. */
  ip: string;
  /** Where this cluster's demo app listens (what the pod's container would serve). */
  appUrl: string;
  /** Where requests reach the target through its agent (what a Service would route to). */
  trafficUrl: string;
  routerUrl: string;
  /** This cluster's router's admin port: /metrics, /debug/routes, /debug/memory (plain HTTP). */
  routerAdminUrl: string;
  /** Requests the demo app answered, newest last. */
  appRequests: AppRequest[];
}

export interface EmbeddedStack {
  set: ClusterSet;
  primary: TestCluster;
  primaryRouterUrls: string[];
  /** The Primary routers' admin ports, in the same order: /metrics, /debug/routes, /debug/memory. */
  primaryRouterAdminUrls: string[];
  workloads: Record<string, WorkloadClusterHandle>;
  /** A developer allowed to open sessions in namespace "default" on the Primary. */
  developer: ClusterUser;
  /** The stack's own directory (tokens, kubeconfigs, helm home, default logs); removed by stop(). */
  dir: string;
  logDir: string;
  /** Process agents' records and logs, one folder per workload cluster (under logDir when one was given). */
  agentsDir: string;
  /** `switchyard` flags that aim a command at the demo target as the developer, through the Primary routers. */
  developerCliArgs: string[];
  /** Stops a workload cluster's control plane (SIGTERM, as a pod deletion does) and starts it again, same flags. */
  restartMemberControlPlane(cluster: string): Promise<void>;
  /** Kills one Primary router (by index) — to exercise client reconnects. */
  killPrimaryRouter(index: number): Promise<void>;
  /** Stops every process and removes every file of the stack. Safe to call twice (same promise). */
  stop(): Promise<void>;
}

type Proc = LaunchedProcess<unknown>;

/** What the component starters share: where they are recorded, listed and logged. */
interface Components {
  group: ProcessGroupDir;
  procs: Proc[];
  logDir: string;
  /** Components ended on purpose (stop, a killed router): their exit is no news. */
  ended: Set<Proc>;
  onExit: EmbeddedStackOptions["onComponentExit"];
}

/** Starts one component from its entry point, recorded in the stack's group, logging to `<logDir>/<name>.log`. */
function startProcess<R = true>(
  c: Components,
  name: string,
  script: string,
  args: string[],
  ready?: (p: LaunchedProcess<unknown>) => R | undefined,
  env?: Record<string, string>,
): Promise<LaunchedProcess<R>> {
  const logFile = join(c.logDir, `${name}.log`);
  writeFileSync(logFile, ""); // a fresh log per run, also in a caller's logDir
  return launch<R>({
    name,
    ...tsx(script, args),
    ...(env ? { env } : {}),
    group: c.group,
    logFile,
    // Long-lived: keep the newest log lines only.
    maxLogLines: 2000,
    ...(ready ? { ready } : {}),
    readyTimeoutMs: 90_000,
    readyIntervalMs: 100,
    onStart: (p) => {
      c.procs.push(p);
      void p.exited.then((status) => {
        if (!c.ended.has(p)) c.onExit?.(name, status, logFile);
      });
    },
  });
}

/** A control plane, ready once it logs "control plane started" (that line carries its gRPC URL). */
function startControlPlane(
  c: Components,
  name: string,
  args: string[],
  env?: Record<string, string>,
): Promise<LaunchedProcess<LogLine>> {
  return startProcess(
    c,
    name,
    "control-plane/src/main.ts",
    args,
    (p) => p.logs.find((l) => l.msg === "control plane started"),
    env,
  );
}

/** A kubeconfig that authenticates with a ServiceAccount token of the chart. */
function tokenKubeconfig(dir: string, c: TestCluster, user: string, tok: string): string {
  return writeKubeconfig(join(dir, `${c.name}-${user}.kubeconfig`), {
    clusterName: c.name,
    server: c.server,
    caPem: c.caPem,
    user,
    token: tok,
  });
}

/** Kills the agents a process provisioner recorded under `dir` (one sub-directory per cluster). */
function killRecordedAgents(dir: string): void {
  if (!existsSync(dir)) return;
  for (const cluster of readdirSync(dir)) {
    for (const f of readdirSync(join(dir, cluster)).filter((n) => n.endsWith(".json"))) {
      try {
        const { pid } = JSON.parse(readFileSync(join(dir, cluster, f), "utf8")) as { pid: number };
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone already */
      }
    }
  }
}

export async function startEmbeddedStack(options: EmbeddedStackOptions = {}): Promise<EmbeddedStack> {
  const workloadNames = options.workloadClusters ?? ["east", "west"];
  if (workloadNames.length === 0) throw new Error("workloadClusters: name at least one workload cluster");
  const group = new ProcessGroupDir(
    join(envRoot(), `stack-${process.pid}-${randomBytes(4).toString("hex")}`),
  );
  const logDir = options.logDir ?? join(group.dir, "logs");
  mkdirSync(logDir, { recursive: true });
  // Process agents outlive a control-plane restart by design; the stack owns them and kills
  // what their records name when it stops. With a caller's logDir their logs stay there too,
  // so records of an earlier run there are cleared first (their pids may name strangers now).
  const agentDir = join(options.logDir ?? group.dir, "agents");
  rmSync(agentDir, { recursive: true, force: true });
  const c: Components = { group, procs: [], logDir, ended: new Set(), onExit: options.onComponentExit };
  const apps: Server[] = [];
  let set: ClusterSet | undefined;
  let helm: Helm | undefined;
  let keepDir = false;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      for (const p of c.procs) c.ended.add(p);
      await Promise.all(c.procs.map((p) => p.stop()));
      killRecordedAgents(agentDir);
      // Agents whose records were lost in a race with their member name the set's files.
      if (set) await killReferencing(set.dir);
      await killReferencing(group.dir);
      await Promise.all(apps.map((a) => new Promise((r) => (a.closeAllConnections(), a.close(r)))));
      helm?.close();
      await set?.stop();
      if (!keepDir) group.remove();
    })());
  try {
    helm = await Helm.create(join(group.dir, "helm"));
    // The clusters log beside the components: a failed start's logs are kept together.
    set = await startClusterSet({
      clusters: ["primary", ...workloadNames],
      logDir: join(logDir, "clusters"),
    });
    const stack = await install(set, helm, c, apps, agentDir, workloadNames, options);
    return { ...stack, dir: group.dir, logDir, agentsDir: agentDir, stop };
  } catch (err) {
    // The processes started so far may still be starting; SIGKILL them before the ordered stop.
    for (const p of c.procs) {
      c.ended.add(p);
      p.kill("SIGKILL");
    }
    keepDir = options.keepLogsOnFailure === true && options.logDir === undefined;
    await stop();
    throw startFailure(err, logDir, options.logDir !== undefined ? "caller's" : keepDir ? "kept" : "removed");
  }
}

type Installed = Omit<EmbeddedStack, "dir" | "logDir" | "agentsDir" | "stop">;

/** Everything after the clusters are up: chart, demo workload, control planes, routers. */
async function install(
  set: ClusterSet,
  helm: Helm,
  c: Components,
  apps: Server[],
  agentDir: string,
  workloadNames: string[],
  options: EmbeddedStackOptions,
): Promise<Installed> {
  const primary = set.get("primary");
  const routerCount = (options.primaryRouters ?? 2) + workloadNames.length;
  // A session port and an admin port per router.
  const ports = await freePorts(2 * routerCount);
  const adminPorts = ports.slice(routerCount);
  const primaryRouterPorts = ports.slice(0, options.primaryRouters ?? 2);
  const workloads: Record<string, WorkloadClusterHandle> = {};
  workloadNames.forEach((name, i) => {
    const ip = `127.0.0.${i + 2}`;
    workloads[name] = {
      name,
      cluster: set.get(name),
      ip,
      appUrl: `http://${ip}:${APP_PORT}`,
      trafficUrl: `http://${ip}:${APP_PORT + TRAFFIC_OFFSET}`,
      routerUrl: `ws://127.0.0.1:${ports[primaryRouterPorts.length + i]}`,
      routerAdminUrl: `http://127.0.0.1:${adminPorts[primaryRouterPorts.length + i]}`,
      appRequests: [],
    };
  });
  // Secrets of the stack (tokens, token kubeconfigs) stay in its own directory, never in a caller's logDir.
  const secrets = c.group.dir;

  // Workload clusters: the chart in member mode, then a token for the identity the Primary uses.
  const remoteTokens: Record<string, string> = {};
  await Promise.all(
    Object.values(workloads).map(async (w) => {
      await installChart(helm, w.cluster, {
        multiClusterMember: true,
        multiCluster: { clusterName: w.name },
        // The Default cluster's control plane makes branches: the chart grants what that needs.
        ...(w.name === workloadNames[0] ? { branching: { defaultCluster: true } } : {}),
      });
      remoteTokens[w.name] = await token(w.cluster.kubeConfig(), "switchyard-primary");
    }),
  );
  // The Primary: management-only, the first workload cluster is the Default.
  await installChart(
    helm,
    primary,
    primaryClusterValues(
      workloadNames[0]!,
      Object.values(workloads).map((w) => ({
        name: w.name,
        server: w.cluster.server,
        caPem: w.cluster.caPem,
        token: remoteTokens[w.name]!,
      })),
    ),
  );
  await grantDevelopers(primary.kubeConfig());

  // Demo workload and its stand-in app in every workload cluster.
  await Promise.all(
    Object.values(workloads).map(async (w) => {
      apps.push(await demoApp(w.name, w.ip, w.appRequests));
      await createDemo(w.cluster.kubeConfig(), w.name, { ...options.demoEnv });
    }),
  );

  const leader = [
    "--leader-lease-duration-seconds=4",
    "--leader-renew-deadline-seconds=3",
    "--leader-retry-period-seconds=1",
  ];
  const common = (cl: TestCluster, cpKubeconfig: string) => [
    `--kubeconfig=${cpKubeconfig}`,
    `--namespace=${STACK_NAMESPACE}`,
    `--cluster-name=${cl.name}`,
    `--identity=${cl.name}-control-plane-0`,
    "--grpc-listen=127.0.0.1:0",
    "--metrics-listen=127.0.0.1:0",
    "--grpc-plaintext",
    `--router-service-account=${STACK_NAMESPACE}/switchyard-router`,
    `--router-token-audience=${AUDIENCE}`,
    "--health-check-interval-seconds=5",
    ...leader,
  ];
  const routerFor = async (
    cl: TestCluster,
    name: string,
    port: number,
    adminUrl: string,
    grpcUrl: string,
  ) => {
    const tokFile = join(secrets, `${name}.token`);
    writeFileSync(tokFile, await token(cl.kubeConfig(), "switchyard-router", [AUDIENCE]), { mode: 0o600 });
    return startProcess(c, name, "data-plane/router/src/main.ts", [
      `--listen=127.0.0.1:${port}`,
      `--admin-listen=${new URL(adminUrl).host}`,
      `--control-plane=${grpcUrl}`,
      "--control-plane-plaintext",
      `--token-file=${tokFile}`,
      `--router-id=${name}`,
      `--log-level=${process.env.SWITCHYARD_STACK_LOG_LEVEL ?? "info"}`,
    ]);
  };

  // The Default cluster's control plane makes database branches; admin URLs go in files, as a
  // mounted Secret gives them in a cluster.
  const defaultCluster = Object.keys(workloads)[0];
  const branchingArgs = ["--default-cluster"];
  for (const engine of ["postgres", "mysql"] as const) {
    const url = options.branchServers?.[engine];
    if (!url) continue;
    const file = join(c.group.dir, `branch-${engine}-url`);
    writeFileSync(file, url, { mode: 0o600 });
    branchingArgs.push(`--branch-${engine}-url-file=${file}`);
  }

  const memberControlPlanes: Record<string, { proc: Proc; restarts: number; restart: () => Promise<void> }> =
    {};
  // Member control planes and gateway routers.
  await Promise.all(
    Object.values(workloads).map(async (w) => {
      const kc = tokenKubeconfig(
        secrets,
        w.cluster,
        "control-plane",
        await token(w.cluster.kubeConfig(), "switchyard-control-plane"),
      );
      const memberArgs = [
        "--mode=member",
        ...common(w.cluster, kc),
        `--router-endpoint=${w.routerUrl}`,
        "--agent-provisioner=process",
        // Agents read their pod with the cluster admin's kubeconfig here; in a cluster they use the pod's ServiceAccount.
        `--agent-kubeconfig=${w.cluster.adminKubeconfigPath}`,
        `--agent-outbound-bind=${w.ip}`,
        `--agent-extra-arg=--app-host=${w.ip}`,
        `--agent-extra-arg=--traffic-host=${w.ip}`,
        `--agent-traffic-port-offset=${TRAFFIC_OFFSET}`,
        `--agent-state-dir=${join(agentDir, w.name)}`,
        ...(w.name === defaultCluster ? branchingArgs : []),
      ];
      const cp = await startControlPlane(c, `${w.name}-control-plane`, memberArgs);
      memberControlPlanes[w.name] = {
        proc: cp,
        restarts: 0,
        restart: async () => {
          const running = memberControlPlanes[w.name]!.proc;
          c.ended.add(running);
          await running.stop(10_000);
          const restarts = ++memberControlPlanes[w.name]!.restarts;
          // A log of its own per start: the stopped one's log is what tells why it stopped.
          memberControlPlanes[w.name]!.proc = await startControlPlane(
            c,
            `${w.name}-control-plane-${restarts + 1}`,
            memberArgs,
          );
        },
      };
      await routerFor(
        w.cluster,
        `${w.name}-router`,
        Number(new URL(w.routerUrl).port),
        w.routerAdminUrl,
        cp.ready.grpc as string,
      );
    }),
  );

  // The Primary's control plane and routers.
  const primaryKc = tokenKubeconfig(
    secrets,
    primary,
    "control-plane",
    await token(primary.kubeConfig(), "switchyard-control-plane"),
  );
  const cp = await startControlPlane(c, "primary-control-plane", [
    "--mode=primary",
    ...common(primary, primaryKc),
    `--router-endpoint=ws://127.0.0.1:${primaryRouterPorts[0]}`,
  ]);
  const primaryRouterAdminUrls = primaryRouterPorts.map((_, i) => `http://127.0.0.1:${adminPorts[i]}`);
  const primaryRouters: Proc[] = [];
  for (const [i, port] of primaryRouterPorts.entries()) {
    primaryRouters.push(
      await routerFor(
        primary,
        `primary-router-${i}`,
        port,
        primaryRouterAdminUrls[i]!,
        cp.ready.grpc as string,
      ),
    );
  }
  // Ready for users once the Primary advertises its router endpoint (the CLI reads it).
  const operators = switchyardOperatorClient(primary.kubeConfig());
  await eventually(
    "the Primary to publish its router endpoint",
    async () => (await operators.get({ name: "operator" }))?.status?.routerEndpoint,
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  const developer = await primary.mintUser("developer", ["developers"]);
  return {
    set,
    primary,
    primaryRouterUrls: primaryRouterPorts.map((p) => `ws://127.0.0.1:${p}`),
    primaryRouterAdminUrls,
    workloads,
    developer,
    developerCliArgs: [
      ...demoTargetArgs(developer.kubeconfigPath),
      ...primaryRouterPorts.flatMap((p) => ["--router", `ws://127.0.0.1:${p}`]),
    ],
    restartMemberControlPlane: async (cluster) => {
      const m = memberControlPlanes[cluster];
      if (!m) throw new Error(`no member control plane in ${cluster}`);
      await m.restart();
    },
    killPrimaryRouter: async (index) => {
      const p = primaryRouters[index];
      if (!p) throw new Error(`no primary router ${index}`);
      c.ended.add(p);
      await p.stop(0, "SIGKILL");
    },
  };
}
