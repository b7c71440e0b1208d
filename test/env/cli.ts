// `npm run clusters -- up|down|env|build`: the test environment for people.
//   up    [--clusters primary,east,west] [--no-controller-manager]
//         starts the clusters, prints kubeconfig paths, and runs until Ctrl-C or `down`
//   down  stops the set started by `up`
//   env   prints shell exports (KUBECONFIG_<NAME>=…) for the running set
//   stack the embedded environment (Switchyard on local clusters), for `switchyard exec`
//   build builds every test binary (kube-apiserver, kube-controller-manager, kubectl, etcd, k6, helm,
//         and the checkers kube-score, polaris, dashboard-linter), resolves ElasticMQ's jars and
//         fetches the pinned Node of the real-pod images
// `up` and `stack` run until SIGINT/SIGTERM/SIGHUP (stack/signal-shutdown.ts): at any moment, also
// in the middle of a start, everything they started is stopped and their directories removed.
// Run this file with `node --import tsx` (package.json does), not the `tsx` command: that
// wrapper SIGKILLs its child when the child does not acknowledge a signal within ~60 ms,
// which a busy start-up misses — and a SIGKILLed owner cannot clean up.
import { existsSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import { ensureBinaries, binaryPath, type BinaryName } from "./binaries.js";
import { ensureElasticmq } from "./sqs/elasticmq-install.js";
import { imageNodeBinary } from "./images/node-binary.js";
import { startClusterSet, type ClusterSet } from "./clusters/cluster-set.js";
import { startPodStack, type PodStack } from "./stack/pod-stack.js";
import { startEmbeddedStack, type EmbeddedStack } from "./stack/embedded-stack.js";
import { envRoot, isSameProcessAlive, killChildren, processStartTime, sweepOrphans } from "./processes.js";
import { shutdownOnSignals, type SignalShutdown } from "./stack/signal-shutdown.js";
import { eventually } from "../support/poll.js";
import { sleep } from "../../lib/abortable-sleep.js";

interface UpState {
  pid: number;
  start: string;
  clusters: Record<string, { server: string; kubeconfig: string }>;
}

const stateFile = () => join(envRoot(), "clusters-up.json");

function readState(): UpState | undefined {
  if (!existsSync(stateFile())) return undefined;
  const s = JSON.parse(readFileSync(stateFile(), "utf8")) as UpState;
  return isSameProcessAlive(s.pid, s.start) ? s : undefined;
}

const program = new Command("clusters").description(
  "Local multi-cluster Kubernetes environment (real API servers)",
);

program
  .command("up")
  .description("start the clusters and keep them running until Ctrl-C or `clusters down`")
  .option("--clusters <names>", "comma-separated cluster names", "primary,east,west")
  .option("--no-controller-manager", "skip kube-controller-manager")
  .action(async (opts: { clusters: string; controllerManager: boolean }) => {
    const running = readState();
    if (running) {
      console.error(`A set is already running (pid ${running.pid}); stop it with: npm run clusters -- down`);
      process.exit(1);
    }
    const names = opts.clusters
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    let set: ClusterSet | undefined;
    const shutdown = stopEverythingOnSignals(async () => {
      await set?.stop();
      rmSync(stateFile(), { force: true });
    });
    const kubectl = (await ensureBinaries(["kubectl"])).kubectl;
    const started = Date.now();
    console.log(`starting ${names.join(", ")} …`);
    try {
      set = await startClusterSet({ clusters: names, controllerManager: opts.controllerManager });
    } catch (err) {
      return failedStart(shutdown, err);
    }
    if (shutdown.stopping) return shutdown.stopped;
    const state: UpState = { pid: process.pid, start: processStartTime(process.pid) ?? "", clusters: {} };
    for (const n of names) {
      const c = set.get(n);
      state.clusters[n] = { server: c.server, kubeconfig: c.adminKubeconfigPath };
    }
    mkdirSync(envRoot(), { recursive: true });
    writeFileSync(stateFile(), JSON.stringify(state, null, 2));
    console.log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    for (const [n, c] of Object.entries(state.clusters)) {
      console.log(
        `${n.padEnd(12)} ${c.server}\n${"".padEnd(12)} ${kubectl} --kubeconfig ${c.kubeconfig} get ns`,
      );
    }
    console.log("\nCtrl-C (or `npm run clusters -- down`) stops everything.");
    setInterval(() => {}, 1 << 30);
  });

program
  .command("stack")
  .description(
    "the embedded environment: clusters + the chart + control planes, routers and agents, ready for switchyard exec",
  )
  .option(
    "--pods",
    "real nodes instead of local processes: the chart's Deployments run the control planes and routers in pods, agents are injected as sidecars (needs root and test/env/nodes/install-host-packages.sh)",
  )
  .action(async (opts: { pods?: boolean }) => {
    if (opts.pods) return podStack();
    let stack: EmbeddedStack | undefined;
    const shutdown = stopEverythingOnSignals(async () => stack?.stop());
    const started = Date.now();
    console.log("starting primary (management-only), east (Default) and west with Switchyard installed …");
    try {
      stack = await startEmbeddedStack({
        keepLogsOnFailure: true,
        // Once ready, a component that dies is news. A Ctrl-C reaches every process of the
        // group at once, so a component may exit just before this process hears of it: wait a moment.
        onComponentExit: (name, status, logFile) =>
          setTimeout(() => {
            if (!stack || shutdown.stopping) return;
            console.error(
              `\n${name} exited (${status}); its log: ${logFile}\n` +
                "likely fix: Ctrl-C and npm start again (a start sweeps what an earlier run left); if it exits again, its log says why",
            );
          }, 500),
      });
    } catch (err) {
      return failedStart(shutdown, err);
    }
    if (shutdown.stopping) return shutdown.stopped;
    const routers = stack.primaryRouterUrls.map((u) => `--router ${u}`).join(" ");
    console.log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s; logs in ${stack.logDir}\n`);
    console.log(
      `Primary:       kubectl --kubeconfig ${stack.primary.adminKubeconfigPath} get switchyardoperators`,
    );
    for (const w of Object.values(stack.workloads)) {
      console.log(`${w.name.padEnd(14)} app ${w.appUrl}   through its agent ${w.trafficUrl}`);
    }
    // The routers' admin ports: /metrics and /debug/* are not on the session ports.
    const admin = [
      ...stack.primaryRouterAdminUrls.map((u, i) => `primary-router-${i} ${u}`),
      ...Object.values(stack.workloads).map((w) => `${w.name}-router ${w.routerAdminUrl}`),
    ];
    console.log(`router admin   /metrics, /debug/routes, /debug/memory on: ${admin.join(", ")}`);
    const curls = Object.values(stack.workloads)
      .map((w) => `  curl ${w.trafficUrl}/   # through ${w.name}: answered by your local process\n`)
      .join("");
    console.log(
      `\nTry (another terminal):\n  npm run switchyard -- exec --kubeconfig ${stack.developer.kubeconfigPath} -n default ` +
        `-t deployment/demo --steal --port 8080:9000 ${routers} -- python3 -m http.server 9000\n` +
        curls +
        `\nCtrl-C stops everything and removes ${stack.dir} and ${stack.set.dir}.`,
    );
    setInterval(() => {}, 1 << 30);
  });

/** `stack --pods`: the same quick start on real nodes, Switchyard from its own images. */
async function podStack(): Promise<void> {
  let stack: PodStack | undefined;
  const shutdown = stopEverythingOnSignals(async () => stack?.stop());
  console.log(
    "starting primary (management-only), east (Default) and west on real nodes; Switchyard from its own images …",
  );
  try {
    stack = await startPodStack({
      onPhase: (phase, ms) => console.log(`  ${phase} (${(ms / 1000).toFixed(1)} s)`),
    });
  } catch (err) {
    return failedStart(shutdown, err);
  }
  if (shutdown.stopping) return shutdown.stopped;
  console.log(`ready in ${((stack.phases["Primary ready"] ?? 0) / 1000).toFixed(1)} s\n`);
  for (const name of ["primary", ...Object.keys(stack.workloads)]) {
    const c = stack.set.get(name);
    console.log(`${name.padEnd(8)} kubectl --kubeconfig ${c.adminKubeconfigPath} get pods -A`);
  }
  const curls = Object.values(stack.workloads)
    .map((w) => `  curl ${w.demoUrl}/   # the demo Service in ${w.name}: answered by your local process\n`)
    .join("");
  console.log(
    `\nTry (another terminal):\n  npm run switchyard -- exec ${stack.developerCliArgs.join(" ")} ` +
      `--steal --port 8080:9000 -- python3 -m http.server 9000\n` +
      curls +
      `\nCtrl-C stops everything (pods, nodes, clusters) and removes ${stack.dir} and ${stack.set.dir}.`,
  );
  setInterval(() => {}, 1 << 30);
}

program
  .command("down")
  .description("stop the set started by `clusters up`")
  .action(async () => {
    const s = readState();
    if (!s) {
      console.log("no cluster set is running");
      return;
    }
    process.kill(s.pid, "SIGTERM");
    await eventually("the cluster set to stop", () => !isSameProcessAlive(s.pid, s.start), {
      timeoutMs: Infinity,
    });
    console.log("stopped");
  });

program
  .command("env")
  .description("print shell exports for the running set")
  .action(() => {
    const s = readState();
    if (!s) {
      console.error("no cluster set is running; start one with: npm run clusters -- up");
      process.exit(1);
    }
    for (const [n, c] of Object.entries(s.clusters)) {
      console.log(`export KUBECONFIG_${n.toUpperCase().replace(/-/g, "_")}=${c.kubeconfig}`);
    }
  });

program
  .command("build")
  .description(
    "build (or find cached) kube-apiserver, kube-controller-manager, kubectl, etcd, k6, helm, the node binaries (kubelet, kube-proxy, kube-scheduler, coredns), the checkers, tun2socks, ElasticMQ's jars and the real-pod images' Node",
  )
  .action(async () => {
    const names: BinaryName[] = [
      "etcd",
      "kube-apiserver",
      "kube-controller-manager",
      "kubectl",
      "kubelet",
      "kube-proxy",
      "kube-scheduler",
      "coredns",
      "k6",
      "helm",
      "kube-score",
      "polaris",
      "dashboard-linter",
      "tun2socks",
    ];
    await ensureBinaries(names, (l) => console.log(l));
    const elasticmq = await ensureElasticmq((l) => console.log(l));
    const node = imageNodeBinary(undefined, (l) => console.log(l));
    for (const n of names) console.log(`${n.padEnd(24)} ${binaryPath(n)}`);
    console.log(`${"elasticmq".padEnd(24)} ${elasticmq}`);
    console.log(`${"node (pod images)".padEnd(24)} ${node}`);
  });

/**
 * Ctrl-C, SIGTERM or SIGHUP at any moment stops what this process started: `stop` (the
 * ordered stop of what is up), then a sweep of every directory this process owns — which
 * also covers a start still in progress, whose processes `hurry` has killed.
 */
function stopEverythingOnSignals(stop: () => Promise<void>): SignalShutdown {
  // SWITCHYARD_ENV_STOP_DELAY_MS holds the stop open that long (a second Ctrl-C cuts it
  // short), so a test can send its second Ctrl-C while the stop is surely under way.
  const delayMs = Number(process.env.SWITCHYARD_ENV_STOP_DELAY_MS ?? 0);
  const hurried = new AbortController();
  return shutdownOnSignals({
    stop: async () => {
      try {
        if (delayMs > 0) await sleep(delayMs, hurried.signal);
        await stop();
      } finally {
        killChildren();
        await sweepOrphans({ mine: true });
      }
    },
    hurry: () => {
      hurried.abort();
      killChildren();
    },
  });
}

/** A start that failed: quiet when a signal caused it (the shutdown is under way), else say why and exit 1. */
async function failedStart(shutdown: SignalShutdown, err: unknown): Promise<void> {
  if (shutdown.stopping) return shutdown.stopped;
  console.error(`\n${(err as Error).message}`);
  process.exit(1);
}

program.parseAsync().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
