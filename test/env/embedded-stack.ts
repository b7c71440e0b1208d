// The embedded environment: Switchyard installed the way a user installs it, on local
// clusters. Real API servers come from startClusterSet; the real Helm chart is installed
// into each (CRDs, RBAC, ServiceAccounts, the clusters ConfigMap and credential Secrets);
// then, since there is no kubelet to run the chart's pods, the same binaries run as local
// processes under the chart's own ServiceAccounts (tokens from TokenRequest): a management-
// only Primary control plane with its routers, and per workload cluster a member control
// plane (process agents), a gateway router, and a demo app standing in for the pod's
// container. Each workload cluster gets its own loopback address (127.0.0.2, .3, …), so its
// app, its agent's traffic port and its agent's outgoing connections are told apart.
import { createServer, type Server } from "node:http";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from "@kubernetes/client-node";
import { switchyardOperatorClient } from "../../proto/api/v1alpha1/index.js";
import { startClusterSet, type ClusterSet, type ClusterUser, type TestCluster } from "./cluster-set.js";
import { chartDir, Helm } from "./helm.js";
import { writeKubeconfig } from "./kubeconfig.js";
import { runPods } from "./kubelet.js";
import { freePorts } from "./ports.js";
import { killReferencing } from "./processes.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../support/launch.js";
import { eventually } from "../support/poll.js";

export const STACK_NAMESPACE = "switchyard";
const AUDIENCE = "switchyard-route-discovery";
/** The demo app's container port; each cluster's agent takes its traffic on APP_PORT + TRAFFIC_OFFSET. */
export const APP_PORT = 8080;
export const TRAFFIC_OFFSET = 10_000;

export interface EmbeddedStackOptions {
  /** Workload clusters; the first is the Default cluster (default ["east", "west"]). */
  workloadClusters?: string[];
  /** Routers on the Primary (default 2, so clients can fail over). */
  primaryRouters?: number;
  /** Where process logs go (default: a temp directory, removed by stop()). */
  logDir?: string;
  /** Extra env vars of the demo Deployment. */
  demoEnv?: Record<string, string>;
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
  /** Requests the demo app answered, newest last. */
  appRequests: Array<{
    method: string;
    path: string;
    headers: Record<string, string | string[] | undefined>;
  }>;
}

export interface EmbeddedStack {
  set: ClusterSet;
  primary: TestCluster;
  primaryRouterUrls: string[];
  workloads: Record<string, WorkloadClusterHandle>;
  /** A developer allowed to open sessions in namespace "default" on the Primary. */
  developer: ClusterUser;
  logDir: string;
  /** Process agents' records and logs, one folder per workload cluster (under logDir when one was given). */
  agentsDir: string;
  /** `switchyard` flags that aim a command at the demo target as the developer, through the Primary routers. */
  developerCliArgs: string[];
  /** Kills one Primary router (by index) — to exercise client reconnects. */
  killPrimaryRouter(index: number): Promise<void>;
  stop(): Promise<void>;
}

type Proc = LaunchedProcess<unknown>;

const b64 = (s: string) => Buffer.from(s).toString("base64");

async function token(kc: KubeConfig, sa: string, audiences: string[] = []): Promise<string> {
  const tr = await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: sa,
    namespace: STACK_NAMESPACE,
    body: { spec: { audiences, expirationSeconds: 24 * 3600 } },
  });
  return tr.status!.token;
}

/** Starts one component from its entry point into `procs`, logging to `<logDir>/<name>.log`. */
function startProcess<R = true>(
  procs: Proc[],
  name: string,
  script: string,
  args: string[],
  logDir: string,
  ready?: (p: LaunchedProcess<unknown>) => R | undefined,
): Promise<LaunchedProcess<R>> {
  const logFile = join(logDir, `${name}.log`);
  writeFileSync(logFile, ""); // a fresh log per run, also in a caller's logDir
  return launch<R>({
    name,
    ...tsx(script, args),
    logFile,
    // Long-lived: keep the newest log lines only.
    maxLogLines: 2000,
    ...(ready ? { ready } : {}),
    readyTimeoutMs: 90_000,
    readyIntervalMs: 100,
    onStart: (p) => procs.push(p),
  });
}

/** A control plane, ready once it logs "control plane started" (that line carries its gRPC URL). */
function startControlPlane(
  procs: Proc[],
  name: string,
  args: string[],
  logDir: string,
): Promise<LaunchedProcess<LogLine>> {
  return startProcess(procs, name, "control-plane/src/main.ts", args, logDir, (p) =>
    p.logs.find((l) => l.msg === "control plane started"),
  );
}

function demoApp(
  cluster: string,
  host: string,
  requests: WorkloadClusterHandle["appRequests"],
): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      requests.push({ method: req.method ?? "GET", path: req.url ?? "/", headers: req.headers });
      res.setHeader("x-served-by", `app-${cluster}`);
      res.end(`hello from the ${cluster} app: ${req.method} ${req.url}${body ? ` ${body}` : ""}\n`);
    });
  });
  return new Promise((resolvePromise, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        err.code === "EADDRINUSE"
          ? new Error(
              `${host}:${APP_PORT} is taken: another embedded stack is running on this machine; stop it first`,
            )
          : err,
      ),
    );
    server.listen(APP_PORT, host, () => resolvePromise(server));
  });
}

async function installChart(helm: Helm, c: TestCluster, values: object): Promise<void> {
  const r = await helm.run(
    [
      "install",
      "switchyard",
      chartDir,
      "--namespace",
      STACK_NAMESPACE,
      "--create-namespace",
      "--kubeconfig",
      c.adminKubeconfigPath,
    ],
    [values],
  );
  if (r.code !== 0) throw new Error(`helm install into ${c.name} failed:\n${r.stderr}`);
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

async function grantDeveloper(kc: KubeConfig): Promise<void> {
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: "switchyard-developer" },
      rules: [
        {
          apiGroups: ["switchyard.dev"],
          resources: ["multiclustersessions", "clustersessions"],
          verbs: ["get", "list", "watch", "create", "delete"],
        },
        { apiGroups: ["switchyard.dev"], resources: ["switchyardoperators"], verbs: ["get", "list"] },
      ],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: "default",
    body: {
      metadata: { name: "developers-open-sessions" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "switchyard-developer" },
      subjects: [{ kind: "Group", name: "developers", apiGroup: "rbac.authorization.k8s.io" }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: "developers-read-operator" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "switchyard-developer" },
      subjects: [{ kind: "Group", name: "developers", apiGroup: "rbac.authorization.k8s.io" }],
    },
  });
}

async function createDemo(kc: KubeConfig, cluster: string, env: Record<string, string>): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace: "default",
    body: { metadata: { name: "demo-config" }, data: { "settings.yaml": `cluster: ${cluster}\n` } },
  });
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: "default",
    body: {
      metadata: { name: "demo" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "demo" } },
        template: {
          metadata: { labels: { app: "demo" } },
          spec: {
            containers: [
              {
                name: "demo",
                image: "example.invalid/demo:1",
                ports: [{ containerPort: APP_PORT }],
                env: [
                  { name: "CLUSTER_NAME", value: cluster },
                  ...Object.entries(env).map(([name, value]) => ({ name, value })),
                ],
                volumeMounts: [{ name: "config", mountPath: "/etc/demo" }],
              },
            ],
            volumes: [{ name: "config", configMap: { name: "demo-config" } }],
          },
        },
      },
    },
  });
  await runPods(kc, "default", "app=demo", 1);
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
  const ownLogDir = options.logDir === undefined;
  const logDir = options.logDir ?? mkdtempSync(join(tmpdir(), "switchyard-embedded-"));
  mkdirSync(logDir, { recursive: true });
  const set = await startClusterSet({ clusters: ["primary", ...workloadNames] });
  // Process agents outlive a control-plane restart by design; the stack owns them and kills
  // what their records name when it stops. With a caller's logDir their logs stay there too.
  const agentDir = join(ownLogDir ? set.dir : logDir, "agents");
  const procs: Proc[] = [];
  const apps: Server[] = [];
  const helm = await Helm.create();
  const stop = async () => {
    await Promise.all(procs.map((p) => p.stop()));
    killRecordedAgents(agentDir);
    await killReferencing(set.dir); // agents whose records were lost in a race with their member
    await Promise.all(apps.map((a) => new Promise((r) => (a.closeAllConnections(), a.close(r)))));
    helm.close();
    await set.stop();
    if (ownLogDir) rmSync(logDir, { recursive: true, force: true });
  };
  try {
    const primary = set.get("primary");
    const ports = await freePorts((options.primaryRouters ?? 2) + workloadNames.length);
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
        appRequests: [],
      };
    });

    // Workload clusters: the chart in member mode, then a token for the identity the Primary uses.
    const remoteTokens: Record<string, string> = {};
    await Promise.all(
      Object.values(workloads).map(async (w) => {
        await installChart(helm, w.cluster, {
          multiClusterMember: true,
          multiCluster: { clusterName: w.name },
        });
        remoteTokens[w.name] = await token(w.cluster.kubeConfig(), "switchyard-primary");
      }),
    );
    // The Primary: management-only, the first workload cluster is the Default.
    await installChart(helm, primary, {
      multiCluster: {
        enabled: true,
        clusterName: "primary",
        managementOnly: true,
        defaultCluster: workloadNames[0],
        clusters: Object.fromEntries(
          Object.values(workloads).map((w) => [
            w.name,
            {
              authType: "bearerToken",
              server: w.cluster.server,
              caData: b64(w.cluster.caPem),
              namespace: STACK_NAMESPACE,
              token: remoteTokens[w.name],
            },
          ]),
        ),
      },
    });
    await grantDeveloper(primary.kubeConfig());

    // Demo workload and its stand-in app in every workload cluster.
    await Promise.all(
      Object.values(workloads).map(async (w) => {
        apps.push(await demoApp(w.name, w.ip, w.appRequests));
        await createDemo(w.cluster.kubeConfig(), w.name, options.demoEnv ?? {});
      }),
    );

    const leader = [
      "--leader-lease-duration-seconds=4",
      "--leader-renew-deadline-seconds=3",
      "--leader-retry-period-seconds=1",
    ];
    const common = (c: TestCluster, cpKubeconfig: string) => [
      `--kubeconfig=${cpKubeconfig}`,
      `--namespace=${STACK_NAMESPACE}`,
      `--cluster-name=${c.name}`,
      `--identity=${c.name}-control-plane-0`,
      "--grpc-listen=127.0.0.1:0",
      "--metrics-listen=127.0.0.1:0",
      "--grpc-plaintext",
      `--router-service-account=${STACK_NAMESPACE}/switchyard-router`,
      `--router-token-audience=${AUDIENCE}`,
      "--health-check-interval-seconds=5",
      ...leader,
    ];
    const routerFor = async (c: TestCluster, name: string, port: number, grpcUrl: string) => {
      const tokFile = join(logDir, `${name}.token`);
      writeFileSync(tokFile, await token(c.kubeConfig(), "switchyard-router", [AUDIENCE]), { mode: 0o600 });
      return startProcess(
        procs,
        name,
        "data-plane/router/src/main.ts",
        [
          `--listen=127.0.0.1:${port}`,
          `--control-plane=${grpcUrl}`,
          "--control-plane-plaintext",
          `--token-file=${tokFile}`,
          `--router-id=${name}`,
          `--log-level=${process.env.SWITCHYARD_STACK_LOG_LEVEL ?? "info"}`,
        ],
        logDir,
      );
    };

    // Member control planes and gateway routers.
    await Promise.all(
      Object.values(workloads).map(async (w) => {
        const kc = tokenKubeconfig(
          logDir,
          w.cluster,
          "control-plane",
          await token(w.cluster.kubeConfig(), "switchyard-control-plane"),
        );
        const cp = await startControlPlane(
          procs,
          `${w.name}-control-plane`,
          [
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
          ],
          logDir,
        );
        await routerFor(
          w.cluster,
          `${w.name}-router`,
          Number(new URL(w.routerUrl).port),
          cp.ready.grpc as string,
        );
      }),
    );

    // The Primary's control plane and routers.
    const primaryKc = tokenKubeconfig(
      logDir,
      primary,
      "control-plane",
      await token(primary.kubeConfig(), "switchyard-control-plane"),
    );
    const cp = await startControlPlane(
      procs,
      "primary-control-plane",
      [
        "--mode=primary",
        ...common(primary, primaryKc),
        `--router-endpoint=ws://127.0.0.1:${primaryRouterPorts[0]}`,
      ],
      logDir,
    );
    const primaryRouters: Proc[] = [];
    for (const [i, port] of primaryRouterPorts.entries()) {
      primaryRouters.push(await routerFor(primary, `primary-router-${i}`, port, cp.ready.grpc as string));
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
      workloads,
      developer,
      logDir,
      agentsDir: agentDir,
      developerCliArgs: [
        "--kubeconfig",
        developer.kubeconfigPath,
        "-n",
        "default",
        "-t",
        "deployment/demo",
        ...primaryRouterPorts.flatMap((p) => ["--router", `ws://127.0.0.1:${p}`]),
      ],
      killPrimaryRouter: async (index) => {
        const p = primaryRouters[index];
        if (!p) throw new Error(`no primary router ${index}`);
        await p.stop(0, "SIGKILL");
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
