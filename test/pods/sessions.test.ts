// Sessions on real pods: the chart installed into three clusters with real nodes (pod-stack.ts),
// `switchyard exec` from the host as a developer runs it, agents injected as sidecars into every
// replica of the demo Deployment in east and west. Traffic reaches the target the ways it does
// in a cluster — the demo Service's NodePort (kube-proxy picks a replica), its ClusterIP and pod
// IPs from another pod — and must reach the session; the workload must come back exactly as it
// was. east's Service names its targetPort (the agent takes the port by name, no privilege);
// west's numbers it (the iptables init container redirects it). Under `--network=transparent`
// the command runs in exec's own namespaces: east's DNS, Services and files with no proxy
// variables, for any program (transparent-network.ts); those runs use the CLI as installed
// (the package's bundled bin). Last, SQS queue splitting on the same pods (queue-splitting.ts):
// each cluster has an SQS of its own that the demo consumes.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1PodTemplateSpec,
} from "@kubernetes/client-node";
import {
  LINGER_SECONDS_ANNOTATION as LINGER_SECONDS,
  LINGER_UNTIL_ANNOTATION as LINGER_UNTIL,
} from "../../control-plane/src/member/agent-annotations.js";
import { multiClusterSessionClient } from "../../proto/api/v1alpha1/index.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePorts } from "../env/ports.js";
import { startPodStack, type PodStack } from "../env/stack/pod-stack.js";
import type { ClusterUser } from "../env/clusters/cluster-set.js";
import { launch, repoRoot, tsx, type LaunchedProcess } from "../support/launch.js";
import { eventually, type PollOptions } from "../support/poll.js";
import { inClusterGet } from "./in-cluster-get.js";
import {
  describeQueueSplitting,
  ledgerPort,
  queueDemoEnv,
  startQueueSplitting,
  type QueueSplitting,
} from "./queue-splitting.js";
import {
  allBornAndReady,
  BORN_DEPLOYMENT,
  BORN_NODE_PORT,
  BORN_STATEFULSET,
  bornState,
  createBornWorkloads,
  hasAgent,
  livePods,
  ready,
} from "../env/stack/born-workloads.js";
import { podLogs } from "../env/stack/pod-problems.js";
import { installedCli } from "../env/images/product-build.js";
import {
  baselineHostState,
  diffHostState,
  snapshotHostState,
  type HostState,
} from "../env/nodes/host-state.js";
import { POSTGRES_IMAGE } from "../env/databases/postgres-image.js";
import {
  BRANCH_QUERY,
  deleteOrdersDb,
  ORDERS_DB,
  ORDERS_DB_URL,
  ORDERS_QUERY,
  probeAnswers,
  probeScript,
  runLeftovers,
  runProcesses,
  startOrdersDb,
} from "./transparent-network.js";

let stack: PodStack;
let queues: QueueSplitting | undefined;
let second: ClusterUser;
let hostBefore: HostState;
const originalTemplates: Record<string, V1PodTemplateSpec> = {};
const running: LaunchedProcess<unknown>[] = [];
const POLL: PollOptions = { timeoutMs: 90_000, intervalMs: 300 };
const AGENT = "switchyard-agent";
const REDIRECT = "switchyard-redirect";

interface Exec {
  proc: LaunchedProcess;
  localPort: number;
  output: () => string;
}

/** `switchyard exec … -- node local-app.mjs` as `user` (default: the stack's developer). */
async function exec(
  flags: string[],
  opts: { name?: string; user?: ClusterUser; env?: Record<string, string>; target?: string } = {},
): Promise<Exec> {
  const localPort = (await freePorts(1))[0]!;
  const args = [...stack.developerCliArgs];
  if (opts.user) args[args.indexOf("--kubeconfig") + 1] = opts.user.kubeconfigPath;
  if (opts.target) args[args.indexOf("-t") + 1] = opts.target;
  const proc = await launch({
    name: `switchyard-exec-${opts.name ?? "local"}`,
    ...tsx("cli/src/main.ts", [
      "exec",
      ...args,
      "--port",
      `8080:${localPort}`,
      ...flags,
      "--",
      process.execPath,
      join(repoRoot, "test/e2e/fixtures/local-app.mjs"),
    ]),
    // The local app fails the deployed pods' readiness check: their probes must never reach it.
    env: {
      LOCAL_PORT: String(localPort),
      LOCAL_NAME: opts.name ?? "local",
      LOCAL_HEALTHZ_STATUS: "503",
      ...opts.env,
    },
    ready: (p) => p.output().includes("local app ready"),
    readyTimeoutMs: 150_000,
    readyIntervalMs: 250,
  });
  running.push(proc);
  return { proc, localPort, output: () => proc.output() };
}

async function stopExec(e: Exec): Promise<number | string> {
  await e.proc.stop(Infinity, "SIGINT");
  return e.proc.exited;
}

/** Runs `fn`; on failure adds the CLI's output and the pods that are not Ready to the error. */
async function explained<T>(e: Exec | undefined, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const problems = await stack.describeProblems().catch(() => "");
    // Switchyard's pods in every cluster: a member's control plane and gateway routers too.
    const logs: string[] = [];
    for (const cluster of Object.values(stack.set.clusters))
      logs.push(
        await podLogs(cluster, "switchyard", "app.kubernetes.io/name=switchyard").catch(
          (x: unknown) => `(no logs of ${cluster.name}: ${String(x)})`,
        ),
      );
    (err as Error).message += `${e ? `\nCLI output:\n${e.output()}` : ""}\n${problems}\n${logs.join("\n")}`;
    throw err;
  }
}

/** A GET's answer; `node` is the demo app's `process.version` (its answers only). */
type Answer = { status: number; servedBy?: string; pod?: string; node?: string; body: string };

/** One GET on a connection of its own (kube-proxy picks a replica per connection). */
function get(url: string, headers: Record<string, string> = {}) {
  return new Promise<Answer>((res, rej) => {
    const req = httpRequest(url, { agent: false, headers, timeout: 10_000 }, (r) => {
      let body = "";
      r.on("data", (c: Buffer) => (body += c.toString()));
      r.on("end", () =>
        res({
          status: r.statusCode ?? 0,
          servedBy: r.headers["x-served-by"] as string | undefined,
          pod: r.headers["x-pod"] as string | undefined,
          node: r.headers["x-node-version"] as string | undefined,
          body,
        }),
      );
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url}: timed out`)));
    req.on("error", rej);
    req.end();
  });
}

const apps = (cluster: string) => stack.set.get(cluster).kubeConfig().makeApiClient(AppsV1Api);
const core = (cluster: string) => stack.set.get(cluster).kubeConfig().makeApiClient(CoreV1Api);

async function demoPods(cluster: string) {
  return (
    await core(cluster).listNamespacedPod({ namespace: "default", labelSelector: "app=demo" })
  ).items.filter((p) => !p.metadata?.deletionTimestamp);
}

/**
 * Every demo pod of `cluster` has the agent and is Ready, and the pods without it are gone, not
 * just terminating (a terminating pod serves what kube-proxy still sends it, and kube-proxy's
 * rules lag its endpoints' removal).
 */
async function injected(cluster: string): Promise<boolean> {
  const all = (await core(cluster).listNamespacedPod({ namespace: "default", labelSelector: "app=demo" }))
    .items;
  if (all.some((p) => !p.spec?.initContainers?.some((c) => c.name === AGENT))) return false;
  const pods = await demoPods(cluster);
  return (
    pods.length === 2 &&
    pods.every(
      (p) =>
        p.spec?.initContainers?.some((c) => c.name === AGENT && c.restartPolicy === "Always") &&
        p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    )
  );
}

/** The demo's agent is idle: still in the template and every pod, its linger recorded. */
async function lingering(cluster: string): Promise<boolean> {
  const d = await apps(cluster).readNamespacedDeployment({ name: "demo", namespace: "default" });
  return d.metadata?.annotations?.[LINGER_UNTIL] !== undefined && (await injected(cluster));
}

/** The demo's pods (uid, restarts of every container) and ReplicaSets: what a rollout changes. */
async function podState(cluster: string) {
  const pods = (await demoPods(cluster))
    .map((p) => ({
      uid: p.metadata!.uid,
      restarts: [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])].map(
        (c) => `${c.name}:${c.restartCount}`,
      ),
    }))
    .sort((a, b) => a.uid!.localeCompare(b.uid!));
  const rs = (
    await apps(cluster).listNamespacedReplicaSet({ namespace: "default", labelSelector: "app=demo" })
  ).items
    .map((r) => r.metadata!.name)
    .sort();
  return { pods, rs };
}

/** `switchyard agents list -A -o json` as the developer runs it: what the Primary reports. */
async function agentsList(): Promise<
  Array<{ cluster: string; target: string; sessions: number; pods: number }>
> {
  const list = await launch({
    name: "switchyard-agents-list",
    ...tsx("cli/src/main.ts", ["agents", "list", "-A", "-o", "json", ...stack.developerCliArgs.slice(0, 2)]),
  });
  running.push(list);
  expect(await list.exited, list.output()).toBe(0);
  return (
    JSON.parse(list.stdout()) as {
      agents: Array<{ cluster: string; target: string; sessions: number; pods: number }>;
    }
  ).agents;
}

/** The demo's pod template and pods are as before any session. */
async function restored(cluster: string): Promise<boolean> {
  const d = await apps(cluster).readNamespacedDeployment({ name: "demo", namespace: "default" });
  expect(d.spec!.template).toEqual(originalTemplates[cluster]);
  const pods = await demoPods(cluster);
  return (
    pods.length === 2 &&
    pods.every(
      (p) =>
        !p.spec?.containers.some((c) => c.name === AGENT) &&
        !p.spec?.initContainers?.some((c) => c.name === REDIRECT || c.name === AGENT) &&
        p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    )
  );
}

beforeAll(async () => {
  hostBefore = await baselineHostState();
  const ledger = await ledgerPort();
  stack = await startPodStack({
    injection: true,
    // Queue splitting (queue-splitting.ts): an SQS per workload cluster, the demo consuming it.
    sqs: true,
    demoEnvFor: queueDemoEnv(ledger),
    // east's branches are database pods of the test PostgreSQL image (imported with orders-db),
    // made from the orders-db the demo's DATABASE_URL names.
    branchPodImage: POSTGRES_IMAGE,
    demoEnv: { DATABASE_URL: ORDERS_DB_URL },
    onPhase: (phase, ms) => console.log(`[pods] ${phase} at ${(ms / 1000).toFixed(1)} s`),
  });
  second = await stack.primary.mintUser("second-developer", ["developers"]);
  for (const name of Object.keys(stack.workloads)) {
    const d = await apps(name).readNamespacedDeployment({ name: "demo", namespace: "default" });
    originalTemplates[name] = d.spec!.template;
  }
  queues = await startQueueSplitting(stack, ledger);
}, 600_000);

afterEach(async () => {
  for (const p of running.splice(0)) await p.stop(0, "SIGKILL");
});

afterAll(async () => {
  await queues?.close();
  await stack?.stop();
}, 180_000);

describe("transparent network", () => {
  // Every run here gets a TMPDIR of its own: its private directory (switchyard-ns-*) and every
  // process that names it (the CLI, its namespace helper, tun2socks, the command) must be gone
  // once the CLI has exited.
  let runTmp: string;
  beforeAll(() => {
    runTmp = mkdtempSync(join(tmpdir(), "switchyard-transparent-"));
  });
  afterAll(() => rmSync(runTmp, { recursive: true, force: true }));

  /**
   * `switchyard exec --network=transparent -- …command` until it ends, with the CLI as a user
   * installs it (the package's bundled bin and its namespace helper).
   */
  async function execToEnd(command: string[], name: string, flags: string[] = []) {
    const proc = await launch({
      name: `switchyard-exec-${name}`,
      command: process.execPath,
      args: [
        installedCli(),
        "exec",
        ...stack.developerCliArgs,
        "--network=transparent",
        ...flags,
        "--",
        ...command,
      ],
      env: { TMPDIR: runTmp },
    });
    running.push(proc);
    const code = await proc.exited;
    return { code, stdout: proc.stdout(), output: proc.output(), leftovers: runLeftovers(runTmp) };
  }

  it("gives a command without proxy variables east's DNS, Services, files and this machine's loopback", async () => {
    const demo = await core("east").readNamespacedService({ name: "demo", namespace: "default" });
    const clusterIp = demo.spec!.clusterIP!;
    const config = await core("east").readNamespacedConfigMap({ name: "demo-config", namespace: "default" });
    const host = createHttpServer((req, res) => res.end(`host loopback: ${req.method} ${req.url}\n`));
    const hostPort = (await freePorts(1))[0]!;
    await new Promise<void>((resolve) => host.listen(hostPort, "127.0.0.1", resolve));
    try {
      const run = await execToEnd(["sh", "-c", probeScript(hostPort)], "probe");
      const a = probeAnswers(run.stdout);
      const why = `CLI output:\n${run.output}`;
      expect(run.output, why).toContain("(transparent;");
      expect(a.proxy, why).toBe("none\n");
      const ip = clusterIp.replace(/\./g, "\\.");
      expect(a.fqdn, why).toMatch(new RegExp(`^${ip}\\s+demo\\.default\\.svc\\.cluster\\.local\\n$`));
      expect(a.short, why).toMatch(new RegExp(`^${ip}\\s+demo\\.default\\.svc\\.cluster\\.local\\n$`));
      expect(a.nslookup, why).toMatch(new RegExp(`Address:\\s+${ip}\\n`));
      expect(a.wget, why).toBe("hello from the east app: GET /transparent\n");
      expect(a.settings, why).toBe(config.data!["settings.yaml"]);
      expect(a.loopback, why).toBe("host loopback: GET /from-namespace\n");
      expect(run.code, why).toBe(42);
      expect(run.leftovers).toEqual([]);
    } finally {
      host.close();
    }
  }, 240_000);

  it("reaches a PostgreSQL of east by its cluster DNS name, and a branch pod of it by the branch's Service name", async () => {
    const kc = stack.set.get("east").kubeConfig();
    const t0 = Date.now();
    try {
      const podIp = await startOrdersDb(kc, stack.workloads.east!.node, stack.dir);
      console.log(`[pods] orders-db Ready in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      const run = await execToEnd([process.execPath, "-e", ORDERS_QUERY], "orders");
      const why = `CLI output:\n${run.output}`;
      expect(run.code, why).toBe(0);
      const line = run.stdout.split("\n").find((l) => l.startsWith("{"));
      expect(JSON.parse(line ?? "null"), why).toEqual({
        one: 1,
        server: podIp,
        db: "orders",
        orders: "east-widget=12.5,east-gadget=30",
        proxy: [],
      });
      expect(run.leftovers).toEqual([]);

      // A session with a branch of that database: east's control plane makes it as a database
      // pod seeding itself from orders-db, and the command reaches it by its Service's name.
      const config = join(runTmp, "branch.json");
      writeFileSync(
        config,
        JSON.stringify({ branches: [{ envVar: "DATABASE_URL", engine: "postgres", copy: { mode: "all" } }] }),
      );
      const branched = await execToEnd([process.execPath, "-e", BRANCH_QUERY], "branch", [
        "--config",
        config,
      ]);
      const bwhy = `CLI output:\n${branched.output}`;
      expect(branched.code, bwhy).toBe(0);
      const seen = JSON.parse(branched.stdout.split("\n").find((l) => l.startsWith("{")) ?? "null") as {
        host: string;
        port: string;
        db: string;
        user: string;
        orders: string;
      };
      expect(seen.host, bwhy).toMatch(/^sy-[a-z0-9-]+\.default\.svc$/);
      expect(seen.port, bwhy).toBe("5432");
      expect(seen.db, bwhy).toMatch(/^sy_/);
      expect(seen.user, bwhy).not.toBe(ORDERS_DB.user);
      expect(seen.orders, bwhy).toBe("east-widget,east-gadget,laptop-widget");
      expect(branched.output).toContain("(CMD reaches it on the transparent network)");
      expect(branched.output).not.toContain(ORDERS_DB.password);
      expect(branched.leftovers).toEqual([]);
      // The session's own branch goes with it: its pod too. The source never saw the write.
      await eventually(
        "the branch pod gone",
        async () =>
          (
            await core("east").listNamespacedPod({
              namespace: "default",
              labelSelector: "switchyard.dev/branch-pod",
            })
          ).items.length === 0,
        POLL,
      );
      const again = await execToEnd([process.execPath, "-e", ORDERS_QUERY], "orders-after");
      expect(again.code, again.output).toBe(0);
      expect(JSON.parse(again.stdout.split("\n").find((l) => l.startsWith("{")) ?? "null").orders).toBe(
        "east-widget=12.5,east-gadget=30",
      );
    } finally {
      await deleteOrdersDb(kc);
    }
  }, 360_000);

  it("delivers stolen requests to a server inside the namespace, also published on this machine's port", async () => {
    const e = await exec(["--steal", "--network=transparent"], {
      name: "transparent",
      env: { TMPDIR: runTmp },
    });
    await explained(e, async () => {
      expect(e.output()).toContain("(transparent;");
      const appCmdline = `${process.execPath} ${join(repoRoot, "test/e2e/fixtures/local-app.mjs")}`;
      const app = runProcesses(runTmp).filter((p) => p.cmdline === appCmdline);
      expect(
        app.map((p) => p.ownNetwork),
        "the local app in a network namespace of its own",
      ).toEqual([true]);
      await eventually(
        "a stolen request through east's NodePort",
        async () =>
          (await get(`${stack.workloads.east!.demoUrl}/transparent`)).servedBy === "transparent"
            ? true
            : undefined,
        POLL,
      );
      const r = await get(`${stack.workloads.east!.demoUrl}/stolen`);
      expect([r.servedBy, r.body]).toEqual(["transparent", "local app: GET /stolen\n"]);
      const published = await get(`http://127.0.0.1:${e.localPort}/published`);
      expect([published.servedBy, published.body]).toEqual(["transparent", "local app: GET /published\n"]);
      const env = JSON.parse((await get(`http://127.0.0.1:${e.localPort}/env`)).body) as Record<
        string,
        string
      >;
      expect(Object.keys(env).filter((k) => /_proxy$/i.test(k))).toEqual([]);
    });
    expect(await stopExec(e)).toBe(130);
    expect(runLeftovers(runTmp)).toEqual([]);
  }, 240_000);
});

describe("pods born with the agent", () => {
  const kc = (cluster: string) => stack.set.get(cluster).kubeConfig();
  const bornUrl = (cluster: string) => `http://${stack.workloads[cluster]!.nodeIp}:${BORN_NODE_PORT}`;

  it("gives opted-in Deployments' and StatefulSets' pods the agent when the API server creates them; the first session needs no rollout", async () => {
    const before: Record<string, Awaited<ReturnType<typeof bornState>>> = {};
    for (const name of ["east", "west"]) await createBornWorkloads(kc(name), name);
    for (const name of ["east", "west"]) {
      // The ReplicaSet and StatefulSet controllers create the pods; each cluster's API server
      // calls its member's webhook (a pod behind the control plane's Service) through the node.
      await explained(undefined, () =>
        eventually(
          `${name}'s born pods, each with the agent and Ready`,
          async () =>
            (await allBornAndReady(kc(name), BORN_DEPLOYMENT, 2)) &&
            (await allBornAndReady(kc(name), BORN_STATEFULSET, 1)),
          POLL,
        ),
      );
      before[name] = await bornState(kc(name));
      // The workloads' own templates carry no agent: only their pods do.
      expect(before[name]!.deployment.template.spec?.initContainers, name).toBeUndefined();
      expect(before[name]!.statefulSet.template.spec?.initContainers, name).toBeUndefined();
      expect((await get(`${bornUrl(name)}/before`)).servedBy).toBe(`app-${name}`);
    }
    const e = await exec(["--steal"], { name: "first", target: `deployment/${BORN_DEPLOYMENT}` });
    await explained(e, async () => {
      for (const name of ["east", "west"]) {
        await eventually(
          `a stolen request through ${name}'s born Service`,
          async () => ((await get(`${bornUrl(name)}/first`)).servedBy === "first" ? true : undefined),
          POLL,
        );
        for (let i = 0; i < 6; i++)
          expect((await get(`${bornUrl(name)}/n/${i}`)).servedBy, `request ${i} through ${name}`).toBe(
            "first",
          );
        expect(await bornState(kc(name)), `${name}: no rollout, no restart`).toEqual(before[name]);
      }
    });
    expect(await stopExec(e)).toBe(130);
    for (const name of ["east", "west"]) {
      await eventually(
        `${name}'s born pods answering again`,
        async () => ((await get(`${bornUrl(name)}/after`)).servedBy === `app-${name}` ? true : undefined),
        POLL,
      );
      expect(await bornState(kc(name)), `${name}: nothing rolled out at the end either`).toEqual(
        before[name],
      );
    }
  });

  it("still creates pods while the webhook is down (failurePolicy Ignore), without the agent", async () => {
    const cp = { name: "switchyard-control-plane", namespace: "switchyard" };
    const scale = (replicas: number) =>
      apps("west").patchNamespacedDeploymentScale(
        { ...cp, body: { spec: { replicas } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    await scale(0);
    try {
      await eventually(
        "west's control-plane pods to be gone",
        async () =>
          (
            await core("west").listNamespacedPod({
              namespace: cp.namespace,
              labelSelector: "app.kubernetes.io/component=control-plane",
            })
          ).items.length === 0,
        POLL,
      );
      const [old] = await livePods(kc("west"), BORN_DEPLOYMENT);
      await core("west").deleteNamespacedPod({ name: old!.metadata!.name!, namespace: "default" });
      const replacement = await eventually(
        "a replacement pod created while the webhook is unreachable",
        async () => {
          const pods = await livePods(kc("west"), BORN_DEPLOYMENT);
          const fresh = pods.find((p) => p.metadata!.uid !== old!.metadata!.uid && !hasAgent(p) && ready(p));
          return fresh ?? undefined;
        },
        POLL,
      );
      expect(replacement.spec?.containers.map((c) => c.name)).toEqual(["app"]);
    } finally {
      await scale(1);
      await explained(undefined, () =>
        eventually(
          "west's control plane back",
          async () => {
            const d = await apps("west").readNamespacedDeployment(cp);
            return (d.status?.availableReplicas ?? 0) >= 1;
          },
          POLL,
        ),
      );
    }
  });
});

describe("sessions on real pods", () => {
  it("injects every replica and steals what reaches the Service or a pod, in east and west", async () => {
    const e = await exec(["--steal"]);
    await explained(e, async () => {
      for (const name of ["east", "west"]) {
        await eventually(`every demo pod of ${name} to run the agent`, () => injected(name), POLL);
        const w = stack.workloads[name]!;
        await eventually(
          `a stolen request through ${name}'s NodePort`,
          async () => ((await get(`${w.demoUrl}/n`)).servedBy === "local" ? true : undefined),
          POLL,
        );
        // Fresh connections: kube-proxy spreads them over both replicas; every one is stolen.
        for (let i = 0; i < 8; i++) {
          const r = await get(`${w.demoUrl}/orders/${i}`);
          expect(r.servedBy, `request ${i} through ${name}`).toBe("local");
          expect(r.body).toBe(`local app: GET /orders/${i}\n`);
        }
        // A user's /healthz is stolen like any request; the kubelet's probes (every second,
        // three failures make a pod NotReady) go to the app through the agent's probe relay.
        const health = await get(`${w.demoUrl}/healthz`);
        expect([health.status, health.servedBy]).toEqual([503, "local"]);
      }
      await new Promise((r) => setTimeout(r, 4000));
      for (const name of ["east", "west"])
        expect(await injected(name), `${name}'s pods Ready under a steal after 4 probe periods`).toBe(true);
      // West's port is redirected inside each pod: its pod IPs are stolen too. East's is
      // taken by name, which only Services resolve: its ClusterIP is stolen.
      const west = await demoPods("west");
      expect(west.every((p) => p.spec?.initContainers?.some((c) => c.name === REDIRECT))).toBe(true);
      const byPod = await inClusterGet(
        stack.set.get("west").kubeConfig(),
        west.map((p) => `http://${p.status!.podIP}:8080/pod`),
      );
      expect(byPod.map((a) => a.servedBy)).toEqual(["local", "local"]);
      // The product image runs the Dockerfile's Node (node:24-bookworm-slim), not the host's.
      expect(byPod[0]!.node).toMatch(/^v24\./);
      const east = await demoPods("east");
      expect(east.some((p) => p.spec?.initContainers?.some((c) => c.name === REDIRECT))).toBe(false);
      const viaService = await inClusterGet(stack.set.get("east").kubeConfig(), [
        "http://demo.default.svc/svc",
        "http://demo.default.svc/svc",
      ]);
      expect(viaService.map((a) => a.servedBy)).toEqual(["local", "local"]);
    });
    expect(await stopExec(e)).toBe(130);
    // The agent stays as an idle pass-through (sidecar.lingerSeconds, 15 minutes by default).
    for (const name of ["east", "west"])
      await eventually(`${name}'s agent lingering`, () => lingering(name), POLL);
  });

  it("attaches the next developer's session to the lingering agent: no rollout, no pod restart", async () => {
    const before: Record<string, Awaited<ReturnType<typeof podState>>> = {};
    for (const name of ["east", "west"]) {
      await eventually(`${name}'s agent lingering`, () => lingering(name), POLL);
      before[name] = await podState(name);
    }
    // What `switchyard agents list` shows through the Primary: idle in both clusters, both pods.
    await eventually(
      "agents list: demo idle in east and west",
      async () => {
        const listed = await agentsList();
        const idle = ["east", "west"].filter((name) => {
          const a = listed.find((x) => x.cluster === name && x.target === "deployment/demo");
          return a?.sessions === 0 && a.pods === 2;
        });
        return idle.length === 2 ? true : undefined;
      },
      POLL,
    );
    const e = await exec(["--steal"], { name: "bob", user: second });
    await explained(e, async () => {
      for (const name of ["east", "west"]) {
        const w = stack.workloads[name]!;
        await eventually(
          `a stolen request through ${name}'s NodePort`,
          async () => ((await get(`${w.demoUrl}/warm`)).servedBy === "bob" ? true : undefined),
          POLL,
        );
        // The same pods, never restarted, the same ReplicaSets: nothing rolled out.
        expect(await podState(name), name).toEqual(before[name]);
        const d = await apps(name).readNamespacedDeployment({ name: "demo", namespace: "default" });
        expect(d.metadata!.annotations?.[LINGER_UNTIL], name).toBeUndefined();
      }
    });
    expect(await stopExec(e)).toBe(130);
    for (const name of ["east", "west"])
      await eventually(`${name}'s agent lingering`, () => lingering(name), POLL);
  });

  it("restores each cluster exactly when the linger ends, also after the member's control plane restarts", async () => {
    for (const name of ["east", "west"])
      await apps(name).patchNamespacedDeployment(
        {
          name: "demo",
          namespace: "default",
          body: { metadata: { annotations: { [LINGER_SECONDS]: "15" } } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    try {
      const e = await exec(["--steal"]);
      await explained(e, () =>
        eventually(
          "a stolen request through west",
          async () =>
            (await get(`${stack.workloads.west!.demoUrl}/short`)).servedBy === "local" ? true : undefined,
          POLL,
        ),
      );
      expect(await stopExec(e)).toBe(130);
      for (const name of ["east", "west"])
        await eventually(`${name}'s agent lingering`, () => lingering(name), POLL);
      // West's member control plane goes during the linger: the record lives on the workload.
      const cps = await core("west").listNamespacedPod({
        namespace: "switchyard",
        labelSelector: "app.kubernetes.io/component=control-plane",
      });
      for (const p of cps.items)
        await core("west").deleteNamespacedPod({ name: p.metadata!.name!, namespace: "switchyard" });
      for (const name of ["east", "west"])
        await explained(undefined, () =>
          eventually(`${name}'s demo to be restored`, () => restored(name), POLL),
        );
      // Restored from the saved template: the API server's defaults in the sidecar template (and
      // the Deployment controller's status writes) are not taken for a user's edit.
      for (const name of ["east", "west"]) {
        const logs = await podLogs(
          stack.set.get(name),
          "switchyard",
          "app.kubernetes.io/component=control-plane",
          400,
        );
        expect(logs).toContain("the idle agent's linger ended; restored the original pod template");
        expect(logs).not.toContain("changed while the sidecar was in");
      }
    } finally {
      for (const name of ["east", "west"])
        await apps(name).patchNamespacedDeployment(
          {
            name: "demo",
            namespace: "default",
            body: [{ op: "remove", path: `/metadata/annotations/${LINGER_SECONDS.replace("/", "~1")}` }],
          },
          setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
        );
    }
  });

  it("mirrors: the pods still answer and the local app sees copies from both clusters", async () => {
    const e = await exec(["--mirror"]);
    await explained(e, async () => {
      await eventually(
        "mirrored copies from east and west",
        async () => {
          const a = await get(`${stack.workloads.east!.demoUrl}/m/east`);
          const b = await get(`${stack.workloads.west!.demoUrl}/m/west`);
          expect(a.servedBy).toBe("app-east");
          expect(b.servedBy).toBe("app-west");
          const seen = JSON.parse((await get(`http://127.0.0.1:${e.localPort}/seen`)).body) as {
            path: string;
          }[];
          const paths = seen.map((s) => s.path);
          return paths.includes("/m/east") && paths.includes("/m/west") ? true : undefined;
        },
        POLL,
      );
    });
    await stopExec(e);
  });

  it("gives the command east's environment, files, cluster DNS and outgoing connections", async () => {
    // Mirror, so that the demo Service reached from the session below is answered by its pods;
    // the proxy network, whose HTTP_PROXY the local app's /fetch tunnels through.
    const e = await exec(["--mirror", "--network=proxy"]);
    await explained(e, async () => {
      const env = await eventually(
        "the env endpoint",
        async () =>
          JSON.parse((await get(`http://127.0.0.1:${e.localPort}/env`)).body) as Record<string, string>,
        POLL,
      );
      // As the kubelet resolved it for east's demo container (test/env/stack/pod-demo.ts).
      expect(env.CLUSTER).toBe("east");
      expect(env.SETTINGS_FILE).toBe("cluster: east\n"); // valueFrom a ConfigMap
      expect(env.DB_PASSWORD).toBe("secret-of-east"); // valueFrom a Secret
      expect(env.DEMO_FEATURE_FLAG).toBe("on-east"); // envFrom, with its prefix
      expect(env.DEMO_REGION).toBe("east");
      expect(env.MY_NAMESPACE).toBe("default"); // downward API
      expect((await demoPods("east")).map((p) => p.metadata!.name)).toContain(env.MY_POD_NAME);
      expect(env.KUBERNETES_SERVICE_HOST).toBe("10.0.0.1"); // service links
      expect(env.DEMO_SERVICE_PORT).toBe("80");
      // A name only east's cluster DNS knows, connected to from east.
      const r = await get(
        `http://127.0.0.1:${e.localPort}/fetch?host=demo.default.svc.cluster.local&port=80&path=/outgoing`,
      );
      expect(r.body).toContain("hello from the east app: GET /outgoing");
      const cat = await launch({
        name: "switchyard-files-cat",
        ...tsx("cli/src/main.ts", ["files", "cat", "/etc/demo/settings.yaml", ...stack.developerCliArgs]),
      });
      running.push(cat);
      expect(await cat.exited).toBe(0);
      expect(cat.output()).toContain("cluster: east");
    });
    await stopExec(e);
  });

  it("gives two developers with disjoint header filters on one port their own requests", async () => {
    const alice = await exec(["--steal", "--http-header", "X-User: alice"], { name: "alice" });
    const bob = await exec(["--steal", "--http-header", "X-User: bob"], { name: "bob", user: second });
    await explained(bob, async () => {
      for (const w of Object.values(stack.workloads)) {
        await eventually(
          `both filters in ${w.name}`,
          async () =>
            (await get(`${w.demoUrl}/a`, { "x-user": "alice" })).servedBy === "alice" &&
            (await get(`${w.demoUrl}/b`, { "x-user": "bob" })).servedBy === "bob"
              ? true
              : undefined,
          POLL,
        );
        for (let i = 0; i < 4; i++) {
          expect((await get(`${w.demoUrl}/a${i}`, { "x-user": "alice" })).servedBy).toBe("alice");
          expect((await get(`${w.demoUrl}/b${i}`, { "x-user": "bob" })).servedBy).toBe("bob");
          expect((await get(`${w.demoUrl}/c${i}`, { "x-user": "carol" })).servedBy).toBe(`app-${w.name}`);
          expect((await get(`${w.demoUrl}/d${i}`)).servedBy).toBe(`app-${w.name}`);
        }
        // The demo app's image runs Node 24 too (the image's Node, not the host's).
        expect((await get(`${w.demoUrl}/node`, { "x-user": "carol" })).node).toMatch(/^v24\./);
      }
    });
    await stopExec(alice);
    // Alice's filter is gone; Bob's stays.
    const w = stack.workloads.east!;
    await eventually(
      "alice's requests back on the app",
      async () =>
        (await get(`${w.demoUrl}/a`, { "x-user": "alice" })).servedBy === "app-east" ? true : undefined,
      POLL,
    );
    expect((await get(`${w.demoUrl}/b`, { "x-user": "bob" })).servedBy).toBe("bob");
    await stopExec(bob);
  });

  it("keeps the session when a Primary router pod is deleted: the Deployment replaces it, the CLI reconnects", async () => {
    const e = await exec(["--steal"]);
    const east = stack.workloads.east!;
    await explained(e, async () => {
      await eventually(
        "steal before",
        async () => ((await get(`${east.demoUrl}/r1`)).servedBy === "local" ? true : undefined),
        POLL,
      );
      const routers = await core("primary").listNamespacedPod({
        namespace: "switchyard",
        labelSelector: "app.kubernetes.io/component=router",
      });
      for (const p of routers.items)
        await core("primary").deleteNamespacedPod({ name: p.metadata!.name!, namespace: "switchyard" });
      await eventually(
        "the CLI to reconnect",
        async () => (/reconnected through/.test(e.output()) ? true : undefined),
        POLL,
      );
      await eventually(
        "steal after the routers were replaced",
        async () => ((await get(`${east.demoUrl}/r2`)).servedBy === "local" ? true : undefined),
        POLL,
      );
    });
    await stopExec(e);
  });

  it("injects a replacement target pod and keeps stealing through it", async () => {
    const e = await exec(["--steal"]);
    const west = stack.workloads.west!;
    await explained(e, async () => {
      await eventually("every west pod injected", () => injected("west"), POLL);
      const [victim] = await demoPods("west");
      await core("west").deleteNamespacedPod({ name: victim!.metadata!.name!, namespace: "default" });
      await eventually(
        "a replacement pod with the agent",
        async () =>
          (await injected("west")) &&
          !(await demoPods("west")).some((p) => p.metadata!.name === victim!.metadata!.name)
            ? true
            : undefined,
        POLL,
      );
      const pods = await demoPods("west");
      const answers = await inClusterGet(
        stack.set.get("west").kubeConfig(),
        pods.map((p) => `http://${p.status!.podIP}:8080/after`),
      );
      expect(answers.map((a) => a.servedBy)).toEqual(["local", "local"]);
      expect((await get(`${west.demoUrl}/after`)).servedBy).toBe("local");
    });
    await stopExec(e);
  });

  it("restarts a killed agent container that knows its sessions before it accepts traffic", async () => {
    const e = await exec(["--steal"]);
    await explained(e, async () => {
      await eventually("every west pod injected", () => injected("west"), POLL);
      const [victim] = await demoPods("west");
      const pod = victim!.metadata!.name!;
      const restarts = (p: typeof victim) =>
        p!.status?.initContainerStatuses?.find((c) => c.name === AGENT)?.restartCount ?? 0;
      const before = restarts(victim);
      // As an OOM kill or a crash would: SIGKILL to the agent's process, seen from the host.
      const pids = agentPids(pod);
      expect(pids.length, `the agent process of ${pod}`).toBe(1);
      process.kill(pids[0]!, "SIGKILL");
      await eventually(
        `the kubelet restarted ${pod}'s agent and the pod is Ready`,
        async () => {
          const p = (await demoPods("west")).find((x) => x.metadata!.name === pod);
          return p && restarts(p) > before && (await injected("west")) ? true : undefined;
        },
        POLL,
      );
      // The restarted container's own log (the restart count moves as it is created).
      const log = await eventually(
        "the restarted agent's log",
        async () => {
          const l = String(
            await core("west").readNamespacedPodLog({ name: pod, namespace: "default", container: AGENT }),
          );
          return l.includes("agent listening") ? l : undefined;
        },
        POLL,
      );
      expect(log).toContain("restored after an agent restart; holding its subscriptions until it returns");
      expect(log).not.toContain("cannot save the subscriptions");
      const [answer] = await inClusterGet(stack.set.get("west").kubeConfig(), [
        `http://${victim!.status!.podIP}:8080/after-restart`,
      ]);
      expect(answer!.servedBy).toBe("local");
    });
    await stopExec(e);
  });

  it("opens a session while the Primary's control-plane leader pod is deleted mid-initialisation", async () => {
    const leases = await stack.primary
      .kubeConfig()
      .makeApiClient(CoordinationV1Api)
      .listNamespacedLease({ namespace: "switchyard" });
    const holder = leases.items.map((l) => l.spec?.holderIdentity).find((h) => h);
    expect(holder, "a control-plane leader").toBeTruthy();
    const sessions = multiClusterSessionClient(stack.primary.kubeConfig());
    const before = new Set((await sessions.list({ namespace: "default" })).items.map((s) => s.metadata.name));
    const pending = exec(["--steal"]);
    pending.catch(() => {});
    // The session is being created: the leader goes while it initialises it.
    await eventually(
      "the session to be created",
      async () =>
        (await sessions.list({ namespace: "default" })).items.some((s) => !before.has(s.metadata.name))
          ? true
          : undefined,
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    const pods = await core("primary").listNamespacedPod({
      namespace: "switchyard",
      labelSelector: "app.kubernetes.io/component=control-plane",
    });
    const leader = pods.items.find((p) => holder!.includes(p.metadata!.name!));
    expect(leader, `the leader pod (${holder})`).toBeDefined();
    const leaderName = leader!.metadata!.name!;
    // Its last words, read while it terminates (its log goes with the pod).
    let lastWords = "";
    const reading = (async () => {
      for (let i = 0; i < 60; i++) {
        const log = await core("primary")
          .readNamespacedPodLog({
            name: leaderName,
            namespace: "switchyard",
            container: "control-plane",
            tailLines: 40,
          })
          .catch(() => undefined);
        if (log === undefined) return;
        lastWords = String(log);
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    await core("primary").deleteNamespacedPod({ name: leaderName, namespace: "switchyard" });
    const e = await pending.catch(async (err: unknown) => {
      await reading;
      const logs = await podLogs(stack.primary, "switchyard", "app.kubernetes.io/component=control-plane");
      (err as Error).message += `\nthe deleted leader ${leaderName}:\n${lastWords}\n${logs}`;
      throw err;
    });
    await explained(e, () =>
      eventually(
        "steal with the new leader",
        async () =>
          (await get(`${stack.workloads.east!.demoUrl}/l`)).servedBy === "local" ? true : undefined,
        POLL,
      ),
    );
    await stopExec(e);
  });

  it("removes the lingering agents of every cluster on `switchyard agents remove`", async () => {
    for (const name of ["east", "west"])
      await eventually(`${name}'s agent lingering`, () => lingering(name), POLL);
    const remove = await launch({
      name: "switchyard-agents-remove",
      ...tsx("cli/src/main.ts", [
        "agents",
        "remove",
        "deployment/demo",
        ...stack.developerCliArgs.slice(0, 4),
      ]),
    });
    running.push(remove);
    expect(await remove.exited, remove.output()).toBe(0);
    expect(remove.output()).toMatch(/agents of deployment\/demo: answered by east, west/);
    for (const name of ["east", "west"])
      await explained(undefined, () =>
        eventually(`${name}'s demo to be restored`, () => restored(name), POLL),
      );
    // The demo's agents are gone; the born workloads' pods keep theirs (the webhook gave them).
    const left = await eventually(
      "agents list to show no agent of deployment/demo",
      async () => {
        const agents = await agentsList();
        return agents.some((a) => a.target === "deployment/demo") ? undefined : agents;
      },
      POLL,
    );
    expect(new Set(left.map((a) => `${a.cluster} ${a.target}`))).toEqual(
      new Set(
        ["east", "west"].flatMap((c) => [
          `${c} deployment/${BORN_DEPLOYMENT}`,
          `${c} statefulset/${BORN_STATEFULSET}`,
        ]),
      ),
    );
  });
});

/** Host pids of the agent process of `pod` (the sidecar's environment names its pod). */
function agentPids(pod: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (!cmdline.includes("data-plane/agent/src/main.js")) continue;
      const environ = readFileSync(`/proc/${entry}/environ`, "utf8").split("\0");
      if (environ.includes(`POD_NAME=${pod}`)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

// After the sessions: these split the demo's queue and roll the demo out.
describeQueueSplitting(() => queues!);

describe("the end", () => {
  it("stops pods, nodes and clusters and leaves the host exactly as it was", async () => {
    const during = diffHostState(hostBefore, await snapshotHostState());
    expect(during.some((l) => l.startsWith("+ links:"))).toBe(true); // the snapshot sees the nodes
    await queues?.close();
    queues = undefined;
    const t0 = Date.now();
    await stack.stop();
    console.log(`[pods] teardown ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    expect(diffHostState(hostBefore, await snapshotHostState())).toEqual([]);
  });
});
