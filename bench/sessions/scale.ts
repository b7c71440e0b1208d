// Many sessions on the whole local stack (startEmbeddedStack: real API servers, the chart,
// a management-only Primary, east and west with process agents, two Primary routers):
//   1. --sessions MultiClusterSessions on deployment/demo, created as the CLI does
//      (KubeSessions.create + waitReady with the developer's kubeconfig), --concurrency at a
//      time, until each is Ready. They share the target: one agent per cluster serves them all;
//   2. Ready (seen by the SDK's watch) → applied READY with both clusters' upstreams on every
//      Primary router (RouteWatch reads each router's own time of applying it), reported for
//      the sessions made Ready while at least half of them already were; create → Ready for all;
//   3. VmRSS of the control planes and routers before the first session and once all are Ready;
//   4. traffic on --sample sessions through the Primary routers (scale-traffic.ts);
//   5. every session deleted, then what is left (scale-probes.ts `leftovers`) polled until it
//      is all 0 / the process count is back to its baseline, within a bound.
// Nothing is left behind however the run ends (Ctrl-C included): the stack stops, and with it
// every agent; GOAL lines are printed after it stopped.
import { cpus } from "node:os";
import { KubeSessions, type SessionHandle } from "../../cli/src/sdk/kube/kube-sessions.js";
import { readOperator } from "../../cli/src/sdk/kube/operator-info.js";
import { sessionKey } from "../../proto/session-endpoint.js";
import { startEmbeddedStack, type EmbeddedStack } from "../../test/env/stack/embedded-stack.js";
import { killChildren, sweepOrphans } from "../../test/env/processes.js";
import { shutdownOnSignals } from "../../test/env/stack/signal-shutdown.js";
import { eventually } from "../../test/support/poll.js";
import { apiRequests, requestsPer } from "./api-requests.js";
import { cpuDelta, cpuSnapshot, descendants } from "../support/cpu-support.js";
import { requireWholeNumbers } from "../support/pod-stack-run.js";
import {
  componentPids,
  controlPlaneMetricsUrl,
  debugRoutes,
  leftovers,
  pushLatencyBetween,
  pushLatencyBuckets,
  RouteWatch,
  rssOf,
} from "./scale-probes.js";
import { ChildWatch, type SessionPhases } from "./scale-phases.js";
import { sampleTraffic } from "./scale-traffic.js";
import { heapAfterGc } from "../support/heap-after-gc.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { pct, round, summary, writeResult } from "../support/stats-support.js";

export interface ScaleBenchOptions {
  sessions: number;
  /** Creates (each until Ready) in flight at once. */
  concurrency: number;
  /** Sessions that connect and carry traffic once all are Ready. */
  sample: number;
  /** Per session, create → Ready. */
  readyTimeoutMs: number;
  /** After the deletes, how long everything may take to be gone. */
  leakTimeoutMs: number;
  /** Keep every component's log (control planes, routers, agents, API servers) here; default: removed with the stack. */
  logDir?: string;
}

export const defaultScaleBench: ScaleBenchOptions = {
  sessions: 1000,
  concurrency: 10,
  sample: 10,
  readyTimeoutMs: 120_000,
  leakTimeoutMs: 180_000,
};
export const quickScaleBench: ScaleBenchOptions = { ...defaultScaleBench, sessions: 100 };

const TARGET = "deployment/demo";
const NAMESPACE = "default";
const GOALS = { readyToRoutersP99Ms: 50, cpHeapPerSessionKiB: 64, createReadyP50S: 0.5 };

interface Created {
  h: SessionHandle;
  startAt: number;
  phases?: SessionPhases;
  createToReadyMs?: number;
  /** Sessions already Ready when this one was. */
  liveAtReady?: number;
  readyToRoutersMs?: number;
  error?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const dist = (xs: number[]) => ({ ...summary(xs), p90: round(pct(xs, 90)) });

async function fill(
  stack: EmbeddedStack,
  o: ScaleBenchOptions,
  watch: RouteWatch,
  children: ChildWatch,
  onHalf: () => Promise<void>,
) {
  const kc = stack.developer.kubeConfig();
  const op = await eventually(
    "the operator's router endpoint",
    async () => {
      const r = await readOperator(kc);
      return r.status?.routerEndpoint ? r : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  const kube = new KubeSessions(kc);
  const created: Created[] = [];
  const errors: string[] = [];
  const routed: Promise<void>[] = [];
  let next = 0;
  let ready = 0;
  // Ready → routers is measured once half the sessions are Ready; the routers are not polled before.
  const half = Math.floor(o.sessions / 2);
  let halfway: Promise<void> | undefined;
  const t0 = performance.now();
  const progress = setInterval(() => {
    const s = ((performance.now() - t0) / 1000).toFixed(0);
    console.log(`  ${s} s: ${created.length} created, ${ready} Ready, ${errors.length} failed`);
  }, 10_000);
  try {
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        while (next < o.sessions) {
          next++;
          const start = performance.now();
          let c: Created | undefined;
          try {
            const h = await kube.create({ target: TARGET, namespace: NAMESPACE, ttlSeconds: 3600 }, op);
            c = { h, startAt: start };
            created.push(c);
            await kube.waitReady(h, { timeoutMs: o.readyTimeoutMs }, op.spec.clusterName);
            const readyAt = performance.now();
            const readyWall = Date.now();
            const rec = c;
            rec.createToReadyMs = readyAt - start;
            rec.liveAtReady = ready++;
            rec.phases = children.phases(h.id, start, readyAt, Object.keys(stack.workloads).length);
            if (rec.liveAtReady === half) halfway = onHalf();
            if (rec.liveAtReady < half) continue;
            routed.push(
              watch.until(sessionKey(NAMESPACE, h.id)).then(
                (t) => void (rec.readyToRoutersMs = t - readyWall),
                (err: Error) => void (rec.error = err.message),
              ),
            );
          } catch (err) {
            const msg = (err as Error).message;
            if (c) c.error = msg;
            errors.push(msg);
          }
        }
      }),
    );
    await Promise.all(routed);
    await halfway;
  } finally {
    clearInterval(progress);
  }
  return { kube, created, errors, fillMs: performance.now() - t0, ready };
}

/** Something running beside the measurement that a stop (Ctrl-C included) must end first. */
type Stopper = () => Promise<void> | void;

/** Each control plane's heap after a full GC, one at a time (they share the inspector's port). */
async function controlPlaneHeaps(pids: Record<string, number>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [k, pid] of Object.entries(pids))
    if (k.endsWith("-control-plane")) out[k] = await heapAfterGc(pid);
  return out;
}

async function measure(stack: EmbeddedStack, o: ScaleBenchOptions, track: (s: Stopper) => void) {
  const pids = componentPids(stack);
  await sleep(2000); // start-up allocations settle
  const baselineProcesses = descendants(process.pid).length;
  const rssBefore = rssOf(pids);
  const heapBefore = await controlPlaneHeaps(pids);
  const watch = new RouteWatch(stack.primaryRouterAdminUrls, Object.keys(stack.workloads).length);
  track(() => watch.stop());
  const children = new ChildWatch(
    Object.fromEntries(Object.values(stack.workloads).map((w) => [w.name, w.cluster.kubeConfig()])),
  );
  track(() => children.stop());
  console.log(`creating ${o.sessions} sessions on ${TARGET}, ${o.concurrency} at a time`);
  const primaryMetrics = controlPlaneMetricsUrl(stack, "primary");
  const push0 = await pushLatencyBuckets(primaryMetrics);
  const clusters = ["primary", ...Object.keys(stack.workloads)];
  const api0 = await Promise.all(clusters.map((c) => apiRequests(stack.set.get(c).kubeConfig())));
  const cpu0 = cpuSnapshot();
  let pushHalf = push0;
  const f = await fill(stack, o, watch, children, async () => {
    pushHalf = await pushLatencyBuckets(primaryMetrics);
  });
  const fillCpu = cpuDelta(cpu0, cpuSnapshot(), 8);
  const api1 = await Promise.all(clusters.map((c) => apiRequests(stack.set.get(c).kubeConfig())));
  // Every API call is API-server and etcd CPU: the calls each created session cost, per cluster.
  const apiPerSession = Object.fromEntries(
    clusters.map((c, i) => [c, requestsPer(api0[i]!, api1[i]!, f.created.length)]),
  );
  const pushEnd = await pushLatencyBuckets(primaryMetrics);
  // The Primary's own figure for its share (route change published → each router's ACK):
  // in the first half no one reads the routers, in the second half RouteWatch does.
  const push = {
    firstHalf: pushLatencyBetween(push0, pushHalf),
    secondHalf: pushLatencyBetween(pushHalf, pushEnd),
  };
  watch.stop();
  children.stop();
  await sleep(2000);
  const rssAfter = rssOf(pids);
  const heapAfter = await controlPlaneHeaps(pids);
  const readyOnes = f.created.filter((c) => c.createToReadyMs !== undefined);
  const tables = await Promise.all(
    stack.primaryRouterAdminUrls.map(async (u) => (await debugRoutes(u)).sessions.length),
  );
  console.log(
    `${readyOnes.length}/${o.sessions} Ready in ${(f.fillMs / 1000).toFixed(1)} s; ` +
      `Primary router tables: ${tables.join(", ")} sessions`,
  );

  // Ready → routers: measured on the sessions made Ready while at least half of the others already were.
  const loaded = readyOnes.filter((c) => c.readyToRoutersMs !== undefined);
  const lat = loaded.map((c) => Math.max(0, c.readyToRoutersMs!));
  const readyToRouters = {
    ...dist(lat),
    liveAtReady: {
      min: Math.min(...loaded.map((c) => c.liveAtReady!)),
      max: Math.max(...loaded.map((c) => c.liveAtReady!)),
    },
    appliedBeforeReadySeen: loaded.filter((c) => c.readyToRoutersMs! < 0).length,
    readMs: dist(watch.readMs),
    readsPerSession: dist(watch.reads),
    primaryPushToAck: push,
  };
  const createToReady = dist(readyOnes.map((c) => c.createToReadyMs!));
  const perSessionKiB = Object.fromEntries(
    Object.keys(pids).map((k) => [
      k,
      round((rssAfter[k]! - rssBefore[k]!) / Math.max(1, readyOnes.length), 1),
    ]),
  );
  // Sessions created once the first was Ready: the agents ran by then (the first ones wait for them).
  const firstReady = Math.min(...readyOnes.map((c) => c.startAt + c.createToReadyMs!));
  const steady = readyOnes.filter((c) => c.startAt >= firstReady);
  const phased = steady.flatMap((c) => (c.phases ? [c.phases] : []));
  const createPhases = {
    createdOnceAgentsRan: dist(steady.map((c) => c.createToReadyMs!)),
    childrenCreated: dist(phased.map((p) => p.childrenCreatedMs)),
    childrenReady: dist(phased.map((p) => p.childrenReadyMs)),
    parentReady: dist(phased.map((p) => p.parentReadyMs)),
  };
  console.log("create → Ready (ms):", createToReady);
  console.log("  of sessions created once the first was Ready, and its parts (ms):", createPhases);
  console.log(
    "Ready → listed on every Primary router (ms), sessions Ready with >= half live:",
    readyToRouters,
  );
  console.table(
    Object.keys(pids).map((k) => ({
      process: k,
      "RSS before MiB": round(rssBefore[k]! / 1024, 1),
      "RSS after MiB": round(rssAfter[k]! / 1024, 1),
      "KiB per session": perSessionKiB[k],
    })),
  );
  console.log("CPU seconds while creating:", fillCpu);
  console.log("API requests per created session, by cluster:", apiPerSession);

  const n = Math.min(o.sample, readyOnes.length);
  const sample = Array.from({ length: n }, (_, i) => readyOnes[Math.floor((i * readyOnes.length) / n)]!.h);
  const traffic = await sampleTraffic(stack, sample);
  const trafficOk = traffic.filter((t) => t.ok).length;
  console.log(`traffic on ${n} sessions: ${trafficOk} ok`);
  for (const t of traffic.filter((x) => !x.ok)) console.log(`  ${t.id}: ${t.error}`);

  // Delete everything, then wait for what the sessions made to be gone.
  const cpu1 = cpuSnapshot();
  const d0 = performance.now();
  const queue = [...f.created];
  const deleteErrors: string[] = [];
  await Promise.all(
    Array.from({ length: o.concurrency }, async () => {
      for (let c = queue.shift(); c; c = queue.shift())
        await f.kube.delete(c.h).catch((err: Error) => void deleteErrors.push(err.message));
    }),
  );
  const deleteCallsMs = performance.now() - d0;
  let left = await leftovers(stack, baselineProcesses);
  const total = (l: Record<string, number>) => Object.values(l).reduce((a, b) => a + b, 0);
  while (total(left) > 0 && performance.now() - d0 < o.leakTimeoutMs) {
    await sleep(2000); // each look lists every cluster's sessions: not more often, to leave the API servers to the members
    left = await leftovers(stack, baselineProcesses);
  }
  const cleanMs = performance.now() - d0;
  const deleteCpu = cpuDelta(cpu1, cpuSnapshot(), 8);
  const rssDeleted = rssOf(pids);
  console.log(
    `deleted: calls ${(deleteCallsMs / 1000).toFixed(1)} s (${deleteErrors.length} errors), ` +
      `${total(left) === 0 ? "all gone" : "still left"} after ${(cleanMs / 1000).toFixed(1)} s:`,
  );
  for (const [k, v] of Object.entries(left)) console.log(`  ${k}: ${v}`);
  console.log("CPU seconds while deleting:", deleteCpu);

  const firstErrors = [
    ...new Set([...f.errors, ...f.created.flatMap((c) => (c.error ? [c.error] : []))]),
  ].slice(0, 5);
  for (const e of firstErrors) console.log(`error: ${e}`);
  // The goal's figure: each control plane's heap after a full GC, after minus before, per
  // Ready session (support/heap-after-gc.ts); the largest of them. RSS is reported beside it.
  const heapPerSessionKiB = Object.fromEntries(
    Object.keys(heapBefore).map((k) => [
      k,
      (heapAfter[k]! - heapBefore[k]!) / 1024 / Math.max(1, readyOnes.length),
    ]),
  );
  const cpPerSession = Math.max(...Object.values(heapPerSessionKiB));
  const machine = { cpuModel: cpus()[0]?.model ?? "?", cpus: cpus().length, node: process.version };
  const result = {
    when: new Date().toISOString(),
    machine,
    options: o,
    ready: readyOnes.length,
    fillMs: round(f.fillMs),
    createToReadyMs: createToReady,
    createToReadyPartsMs: createPhases,
    readyToRoutersMs: readyToRouters,
    rssKiB: { before: rssBefore, after: rssAfter, afterDelete: rssDeleted, perSession: perSessionKiB },
    controlPlaneHeapBytes: { before: heapBefore, after: heapAfter },
    controlPlaneHeapPerSessionKiB: heapPerSessionKiB,
    cpuSeconds: { creating: fillCpu, deleting: deleteCpu },
    apiRequestsPerSession: apiPerSession,
    traffic,
    delete: {
      callsMs: round(deleteCallsMs),
      errors: deleteErrors.length,
      untilCleanMs: round(cleanMs),
      left,
    },
    errors: { count: f.errors.length, first: firstErrors },
  };
  const file = writeResult("scale", result);
  const leaks = total(left);
  const goals: Goal[] = [
    { name: "scale-all-ready", value: readyOnes.length, op: "==", target: o.sessions, digits: 0 },
    {
      name: "scale-ready-to-router-p99",
      value: lat.length > 0 ? readyToRouters.p99 : undefined,
      op: "<=",
      target: GOALS.readyToRoutersP99Ms,
      unit: "ms",
    },
    {
      name: "scale-cp-heap-per-session",
      value: cpPerSession,
      op: "<=",
      target: GOALS.cpHeapPerSessionKiB,
      unit: "KiB",
      digits: 1,
      // A heap that did not grow measured nothing (the sessions were not held).
      requires: { "the heap grew with the sessions": cpPerSession > 0 },
    },
    {
      name: "scale-create-ready-p50",
      value: createToReady.p50 / 1000,
      op: "<=",
      target: GOALS.createReadyP50S,
      unit: "s",
    },
    {
      name: "scale-sample-traffic",
      value: trafficOk,
      op: "==",
      target: o.sample,
      digits: 0,
      requires: { "every sampled session probed": n === o.sample },
    },
    { name: "scale-leaks", value: leaks, op: "==", target: 0, digits: 0 },
  ];
  return [
    `written ${file}`,
    `machine: ${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}`,
    ...goals.map((g) => decideGoal(g).line),
  ];
}

export async function runScaleBench(o: ScaleBenchOptions = defaultScaleBench): Promise<void> {
  requireWholeNumbers([
    ["--sessions", o.sessions],
    ["--concurrency", o.concurrency],
    ["--sample", o.sample],
  ]);
  if (o.sample > o.sessions) throw new Error(`--sample: at most --sessions (${o.sessions}), got ${o.sample}`);
  let stack: EmbeddedStack | undefined;
  const stoppers: Stopper[] = [];
  const stopAll = async () => {
    for (const stop of stoppers.splice(0)) await stop();
    await stack?.stop();
  };
  // Ctrl-C or kill: stop the stack (agents included) and remove its files before exiting.
  const shutdown = shutdownOnSignals({
    stop: async () => {
      try {
        await stopAll();
      } finally {
        killChildren();
        await sweepOrphans({ mine: true });
      }
    },
    hurry: () => killChildren(),
  });
  const t0 = performance.now();
  let closing: string[];
  try {
    stack = await startEmbeddedStack(o.logDir ? { logDir: o.logDir } : {});
    console.log(`stack up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    closing = await measure(stack, o, (stop) => stoppers.push(stop));
  } catch (err) {
    // A signal stops everything under the run's feet: its failures are expected.
    if (shutdown.stopping) return shutdown.stopped;
    throw err;
  } finally {
    if (!shutdown.stopping) {
      await stopAll();
      console.log(`wall time ${((performance.now() - t0) / 1000).toFixed(1)} s, stack stopped`);
    }
  }
  for (const line of closing) console.log(line);
}
