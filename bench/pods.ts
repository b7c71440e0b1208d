// Switchyard on real pods (test/env/pod-stack.ts: a management-only Primary, east — the
// Default — and west on real nodes, the chart installed, a two-replica demo Deployment behind
// a NodePort Service in each workload cluster), with the real CLI as a developer runs it:
//   1. `switchyard exec --steal` start → the session exists, → both templates carry the agent,
//      → the local app runs (the session is Ready) and → the first request through east's and
//      west's demo NodePort answered by the local app (the goal); each
//      run injects the agent into both Deployments and waits for their rollout, and after
//      Ctrl-C the bench waits until both are restored, so the next run starts from scratch;
//   2. working-set memory of every agent, router and control-plane container while a session
//      is active (the kubelets' summary API, pod-memory.ts);
//   3. sequential GETs on one kept-alive connection to east's NodePort, answered by the app
//      (no session) versus stolen through the pod's agent, both routers and the CLI.
// Numbers only; nothing here asserts speed. One stack per invocation; it needs root and the
// node packages, like the pod suites.
import { request, Agent } from "node:http";
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { multiClusterSessionClient } from "../proto/api/v1alpha1/index.js";
import { freePorts } from "../test/env/ports.js";
import type { PodStack } from "../test/env/pod-stack.js";
import { launch, type LaunchedProcess } from "../test/support/launch.js";
import { eventually } from "../test/support/poll.js";
import { onPodStack, requireWholeNumbers, stealExecCommand } from "./pod-stack-run.js";
import { containerMemory, type ContainerMemory } from "./pod-memory.js";
import { pct, round, summary, writeResult } from "./stats-support.js";

export interface PodsBenchOptions {
  /** exec → Ready runs, each with injection, rollout and restore of both demo Deployments. */
  runs: number;
  /** Sequential GETs per side of the direct vs stolen comparison (after a warm-up). */
  requests: number;
}

export const defaultPodsBench: PodsBenchOptions = { runs: 5, requests: 300 };

/** Goals (bench/README.md says where each comes from). */
const GOAL_EXEC_READY_S = 8;
const GOAL_AGENT_MIB = 64;
const GOAL_STEAL_P50_MS = 25;

const AGENT = "switchyard-agent";
const REDIRECT = "switchyard-redirect";
const WARM_UP = 30;
const WAIT = { timeoutMs: 180_000 };
/** Between API reads while timing (the API servers share the CPUs with what is measured). */
const API_POLL_MS = 100;

interface Answer {
  ms: number;
  servedBy: string | undefined;
  reused: boolean;
}

/** One GET on `agent` (false: a connection of its own), with its latency and who answered. */
function timedGet(url: string, agent: Agent | false, timeoutMs = 10_000): Promise<Answer> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, timeout: timeoutMs }, (res) => {
      res.on("data", () => {});
      res.on("error", reject);
      res.on("end", () =>
        resolve({
          ms: performance.now() - t0,
          servedBy: res.headers["x-served-by"] as string | undefined,
          reused: req.reusedSocket,
        }),
      );
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url}: timed out`)));
    req.on("error", reject);
    req.end();
  });
}

/** `count` sequential GETs on one kept-alive connection, each answered by `expected`; ms each. */
async function sequential(url: string, count: number, expected: (servedBy: string) => boolean) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const ms: number[] = [];
    let reused = 0;
    for (let i = 0; i < WARM_UP + count; i++) {
      const a = await timedGet(`${url}/bench/${i}`, agent);
      if (!expected(a.servedBy ?? ""))
        throw new Error(`GET ${url} #${i}: answered by ${a.servedBy ?? "nobody"} (x-served-by)`);
      if (i < WARM_UP) continue;
      ms.push(a.ms);
      if (a.reused) reused++;
    }
    return { ms, reused };
  } finally {
    agent.destroy();
  }
}

const demoPods = async (kc: KubeConfig): Promise<V1Pod[]> =>
  (await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: "default", labelSelector: "app=demo" }))
    .items;

const hasAgent = (p: V1Pod) =>
  [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])].some(
    (c) => c.name === AGENT || c.name === REDIRECT,
  );
const isReady = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");

/** The demo Deployment's rollout is complete, every pod (terminating ones too) as `injected` says. */
async function rolledOut(kc: KubeConfig, injected: boolean): Promise<boolean> {
  const d = await kc
    .makeApiClient(AppsV1Api)
    .readNamespacedDeployment({ name: "demo", namespace: "default" });
  const template = d.spec!.template.spec!;
  const templateInjected = [...(template.initContainers ?? []), ...template.containers].some(
    (c) => c.name === AGENT,
  );
  const want = d.spec?.replicas ?? 1;
  const s = d.status ?? {};
  if (templateInjected !== injected || (s.observedGeneration ?? 0) < (d.metadata?.generation ?? 0))
    return false;
  if (s.replicas !== want || s.updatedReplicas !== want || s.availableReplicas !== want) return false;
  const pods = await demoPods(kc);
  return pods.length === want && pods.every((p) => hasAgent(p) === injected && isReady(p));
}

interface Exec {
  proc: LaunchedProcess;
  localPort: number;
  startedAt: number;
}

/** `switchyard exec --steal -- node local-app.mjs` as the developer; returns once spawned. */
async function startExec(stack: PodStack): Promise<Exec> {
  const localPort = (await freePorts(1))[0]!;
  const startedAt = performance.now();
  const proc = await launch({
    name: "switchyard-exec",
    ...stealExecCommand(stack, localPort),
    env: { LOCAL_PORT: String(localPort), LOCAL_NAME: "local" },
  });
  return { proc, localPort, startedAt };
}

/** Ctrl-C, as a developer stops it (the session is deleted on the way out); its exit status. */
async function stopExec(e: Exec): Promise<number | string> {
  await e.proc.stop(60_000, "SIGINT");
  return e.proc.exited;
}

/** ms from the exec's start until `probe` holds (polled every `intervalMs`). */
async function msUntil(e: Exec, what: string, probe: () => Promise<boolean> | boolean, intervalMs: number) {
  await eventually(what, async () => ((await probe()) ? true : undefined), {
    ...WAIT,
    intervalMs,
    giveUp: () =>
      e.proc.hasExited() ? new Error(`switchyard exec exited while waiting for ${what}`) : undefined,
  });
  return performance.now() - e.startedAt;
}

/** A fresh connection to `url` (kube-proxy picks a replica per connection) answered by "local". */
const stolenOnce = async (url: string) => (await timedGet(`${url}/ready`, false, 2000)).servedBy === "local";

/** The demo Deployment's pod template carries the agent. */
async function templateInjected(kc: KubeConfig): Promise<boolean> {
  const d = await kc
    .makeApiClient(AppsV1Api)
    .readNamespacedDeployment({ name: "demo", namespace: "default" });
  const t = d.spec!.template.spec!;
  return [...(t.initContainers ?? []), ...t.containers].some((c) => c.name === AGENT);
}

/** ms since the exec started, per phase, of one run. */
interface ReadyRun {
  /** A MultiClusterSession exists on the Primary (CLI start-up, login, create). */
  sessionCreated: number;
  /** Both demo Deployments' templates carry the agent (the Primary and members reconciled). */
  templatesPatched: number;
  /** The local app printed "local app ready" (the CLI saw the session Ready). */
  appReady: number;
  /** The first request through each cluster's demo NodePort answered by the local app. */
  stolen: Record<string, number>;
  /** The later of those: the session works in both clusters. */
  stolenBoth: number;
  /** Ctrl-C → both demo Deployments rolled back and settled (not counted in the above). */
  restored: number;
}

/** Part 1: exec → session, injection, local app ready, first stolen request in each cluster; restore. */
async function execToReady(stack: PodStack, runs: number) {
  const clusters = Object.keys(stack.workloads);
  const sessions = multiClusterSessionClient(kc(stack, "primary"));
  const rows: ReadyRun[] = [];
  for (let run = 1; run <= runs; run++) {
    const before = new Set((await sessions.list({ namespace: "default" })).items.map((x) => x.metadata.name));
    const e = await startExec(stack);
    try {
      const newSession = async () =>
        (await sessions.list({ namespace: "default" })).items.some((x) => !before.has(x.metadata.name));
      const [sessionCreated, appReady, ...rest] = await Promise.all([
        msUntil(e, "the session to be created", newSession, API_POLL_MS),
        msUntil(e, "the local app to start", () => e.proc.output().includes("local app ready"), 10),
        ...clusters.map((c) =>
          msUntil(e, `${c}'s template to get the agent`, () => templateInjected(kc(stack, c)), API_POLL_MS),
        ),
        ...clusters.map((c) =>
          msUntil(
            e,
            `a stolen request through ${c}'s NodePort`,
            () => stolenOnce(stack.workloads[c]!.demoUrl),
            25,
          ),
        ),
      ]);
      const patched = rest.slice(0, clusters.length);
      const stolen = Object.fromEntries(clusters.map((c, i) => [c, rest[clusters.length + i]!]));
      // Wait for the rollout to settle, so the Ctrl-C below restores a settled Deployment and
      // every run does the same work.
      for (const c of clusters)
        await eventually(`${c}'s demo rolled out with the agent`, () => rolledOut(kc(stack, c), true), WAIT);
      const status = await stopExec(e);
      const stoppedAt = performance.now();
      if (status !== 130) console.log(`run ${run}: switchyard exec exited with ${status} (expected 130)`);
      for (const c of clusters)
        await eventually(`${c}'s demo restored`, () => rolledOut(kc(stack, c), false), WAIT);
      const row: ReadyRun = {
        sessionCreated,
        templatesPatched: Math.max(...patched),
        appReady,
        stolen,
        stolenBoth: Math.max(...Object.values(stolen)),
        restored: performance.now() - stoppedAt,
      };
      rows.push(row);
      console.log(
        `run ${run}/${runs}: session created ${sec(row.sessionCreated)}, templates patched ` +
          `${sec(row.templatesPatched)}, local app ready ${sec(row.appReady)}, stolen ` +
          `${clusters.map((c) => `${c} ${sec(stolen[c]!)}`).join(", ")}; Ctrl-C → both restored ${sec(row.restored)}`,
      );
    } catch (err) {
      (err as Error).message += `\nswitchyard exec output:\n${e.proc.output().slice(-3000)}\n${await stack
        .describeProblems()
        .catch(() => "")}`;
      throw err;
    } finally {
      await e.proc.stop(0, "SIGKILL");
    }
  }
  const dist = (pick: (r: ReadyRun) => number) => {
    const xs = rows.map(pick);
    return {
      p50: round(pct(xs, 50) / 1000),
      p90: round(pct(xs, 90) / 1000),
      max: round(Math.max(...xs) / 1000),
    };
  };
  return {
    runsS: rows.map((r) => ({
      sessionCreated: round(r.sessionCreated / 1000),
      templatesPatched: round(r.templatesPatched / 1000),
      appReady: round(r.appReady / 1000),
      stolen: Object.fromEntries(Object.entries(r.stolen).map(([c, ms]) => [c, round(ms / 1000)])),
      restored: round(r.restored / 1000),
    })),
    sessionCreatedS: dist((r) => r.sessionCreated),
    templatesPatchedS: dist((r) => r.templatesPatched),
    appReadyS: dist((r) => r.appReady),
    stolenS: Object.fromEntries(clusters.map((c) => [c, dist((r) => r.stolen[c]!)])),
    stolenBothS: dist((r) => r.stolenBoth),
    restoredS: dist((r) => r.restored),
  };
}

const kc = (stack: PodStack, cluster: string) => stack.set.get(cluster).kubeConfig();
const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** Agents of the demo pods, routers and control planes of every cluster. */
async function switchyardMemory(stack: PodStack): Promise<ContainerMemory[]> {
  const all: ContainerMemory[] = [];
  for (const cluster of ["primary", ...Object.keys(stack.workloads)])
    all.push(
      ...(await containerMemory(
        cluster,
        kc(stack, cluster),
        (ns, _pod, container) => ns === "switchyard" || (ns === "default" && container === AGENT),
      )),
    );
  return all;
}

function printMemory(rows: ContainerMemory[]): void {
  console.log("working set while a session is active (kubelet stats/summary):");
  console.log(
    `  ${"cluster".padEnd(8)} ${"container".padEnd(17)} ${"pod".padEnd(42)} working set MiB   (rss MiB)`,
  );
  const order = (c: ContainerMemory) => (c.container === AGENT ? 0 : c.container === "router" ? 1 : 2);
  for (const r of [...rows].sort((a, b) => order(a) - order(b) || a.cluster.localeCompare(b.cluster)))
    console.log(
      `  ${r.cluster.padEnd(8)} ${r.container.padEnd(17)} ${r.pod.padEnd(42)} ${r.workingSetMiB.toFixed(1).padStart(15)}   (${r.rssMiB.toFixed(1)})`,
    );
}

/** Parts 2 and 3: direct GETs, then a steal session: stolen GETs and memory. */
async function latencyAndMemory(stack: PodStack, requests: number) {
  const east = stack.workloads.east!;
  const direct = await sequential(east.demoUrl, requests, (by) => by.startsWith("app-"));
  const e = await startExec(stack);
  try {
    for (const c of Object.keys(stack.workloads)) {
      await msUntil(
        e,
        `a stolen request through ${c}'s NodePort`,
        () => stolenOnce(stack.workloads[c]!.demoUrl),
        100,
      );
      await eventually(`${c}'s demo rolled out with the agent`, () => rolledOut(kc(stack, c), true), WAIT);
    }
    const stolen = await sequential(east.demoUrl, requests, (by) => by === "local");
    const memory = await switchyardMemory(stack);
    return { direct, stolen, memory };
  } catch (err) {
    (err as Error).message += `\nswitchyard exec output:\n${e.proc.output().slice(-3000)}`;
    throw err;
  } finally {
    await stopExec(e);
  }
}

async function measure(stack: PodStack, o: PodsBenchOptions) {
  const ready = await execToReady(stack, o.runs);
  console.log(`exec → (s, ${o.runs} runs)      p50     p90     max`);
  const line = (what: string, d: { p50: number; p90: number; max: number }) =>
    console.log(
      `  ${what.padEnd(28)} ${[d.p50, d.p90, d.max].map((x) => x.toFixed(2).padStart(7)).join(" ")}`,
    );
  line("session created", ready.sessionCreatedS);
  line("both templates patched", ready.templatesPatchedS);
  line("local app ready", ready.appReadyS);
  for (const [c, d] of Object.entries(ready.stolenS)) line(`first stolen GET via ${c}`, d);
  line("stolen in both (goal)", ready.stolenBothS);
  line("Ctrl-C → both restored", ready.restoredS);
  const { direct, stolen, memory } = await latencyAndMemory(stack, o.requests);
  printMemory(memory);
  const agents = memory.filter((m) => m.container === AGENT);
  if (agents.length === 0)
    throw new Error("the kubelets report no memory for any switchyard-agent container");
  const agentMaxMiB = Math.max(...agents.map((m) => m.workingSetMiB));
  const latency = {
    requests: o.requests,
    direct: { ...summary(direct.ms), reusedConnection: direct.reused },
    stolen: { ...summary(stolen.ms), reusedConnection: stolen.reused },
    p50Ratio: round(pct(stolen.ms, 50) / pct(direct.ms, 50), 2),
    p99Ratio: round(pct(stolen.ms, 99) / pct(direct.ms, 99), 2),
  };
  console.log(`east's demo NodePort, ${o.requests} sequential GETs on one kept-alive connection (ms):`);
  console.log(`  answered by the app:              p50 ${latency.direct.p50}, p99 ${latency.direct.p99}`);
  console.log(`  stolen (agent → 2 routers → CLI): p50 ${latency.stolen.p50}, p99 ${latency.stolen.p99}`);
  console.log(`  stolen / direct: p50 ${latency.p50Ratio}x, p99 ${latency.p99Ratio}x`);
  return {
    execReady: ready,
    memory: memory.map((m) => ({
      ...m,
      workingSetMiB: round(m.workingSetMiB, 1),
      rssMiB: round(m.rssMiB, 1),
    })),
    agentMaxMiB: round(agentMaxMiB, 1),
    latency,
  };
}

export async function runPodsBench(o: PodsBenchOptions = defaultPodsBench): Promise<void> {
  requireWholeNumbers([
    ["--runs", o.runs],
    ["--requests", o.requests],
  ]);
  await onPodStack("pods", async (stack) => {
    const result = {
      when: new Date().toISOString(),
      node: process.version,
      options: o,
      ...(await measure(stack, o)),
    };
    console.log(`written ${writeResult("pods", result)}`);
    const readyP50 = result.execReady.stolenBothS.p50;
    const stealP50 = result.latency.stolen.p50;
    const met = (ok: boolean) => (ok ? "met" : "missed");
    return [
      `GOAL pods-exec-ready-p50 ${readyP50.toFixed(2)}s <=${GOAL_EXEC_READY_S}s ${met(readyP50 <= GOAL_EXEC_READY_S)}`,
      `GOAL pods-agent-memory ${result.agentMaxMiB.toFixed(1)}MiB <=${GOAL_AGENT_MIB}MiB ${met(result.agentMaxMiB <= GOAL_AGENT_MIB)}`,
      `GOAL pods-steal-latency-p50 ${stealP50.toFixed(2)}ms <=${GOAL_STEAL_P50_MS}ms ${met(stealP50 <= GOAL_STEAL_P50_MS)}`,
    ];
  });
}
