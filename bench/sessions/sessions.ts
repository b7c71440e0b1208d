// Session start-up benchmark (issue 5), on the whole local stack (startEmbeddedStack: real
// API servers, the Helm chart, control planes, routers and process agents):
//   1. create -> status.phase Ready as the CLI sees it (KubeSessions.create + waitReady with
//      the developer's kubeconfig): the first session (process agents start) and later ones;
//   2. Ready -> the session applied READY on every Primary router (each router's own time of
//      applying it, from /debug/routes?session= on its admin port: scale-probes.ts RouteWatch);
//   3. push cost versus table size (route-push-support.ts, no stack needed);
//   4. RSS of the Primary control-plane process before/after M extra sessions (and at half-way).
// Numbers only; nothing here asserts speed.
import { execFileSync } from "node:child_process";
import { cpSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { KubeSessions, type SessionHandle } from "../../cli/src/sdk/kube/kube-sessions.js";
import type { SessionProgress } from "../../cli/src/sdk/kube/session-progress.js";
import { sessionKey } from "../../proto/session-endpoint.js";
import { readOperator } from "../../cli/src/sdk/kube/operator-info.js";
import { startEmbeddedStack, type EmbeddedStack } from "../../test/env/stack/embedded-stack.js";
import { eventually } from "../../test/support/poll.js";
import { measurePushCost } from "./route-push-support.js";
import { RouteWatch } from "./scale-probes.js";
import { heapAfterGc } from "../support/heap-after-gc.js";
import { printGoals } from "../support/goal.js";
import { round, summary, writeResult } from "../support/stats-support.js";

export interface SessionsBenchOptions {
  /** Sequential sessions after the first (create -> Ready, Ready -> routers). */
  sessions: number;
  /** Extra concurrent sessions for the memory reading (0: skip). */
  memorySessions: number;
  /** How many creates are in flight at once while filling up for the memory reading. */
  concurrency: number;
  /** Table sizes for the push-cost comparison. */
  pushSizes: number[];
  /** Skip the stack parts (push cost only). */
  pushOnly: boolean;
  /** Fresh stacks started one after another, first session create -> Ready on each (0: skip; then nothing else runs). */
  freshStacks: number;
}

export const defaultSessionsBench: SessionsBenchOptions = {
  sessions: 20,
  memorySessions: 200,
  concurrency: 10,
  pushSizes: [10, 100, 1000, 10_000],
  pushOnly: false,
  freshStacks: 0,
};

/** Goals of issue 5 on this bench (seconds / KiB / ms). */
const GOALS = { firstReadyP99S: 3, createReadyP50S: 0.5, heapPerSessionKiB: 64, routersP99Ms: 50 };

function machine() {
  const c = cpus();
  return { cpuModel: c[0]?.model ?? "?", cpus: c.length, node: process.version };
}

const TARGET = "deployment/demo";
const NAMESPACE = "default";

function rssKiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

function primaryControlPlanePid(): number {
  const out = execFileSync("pgrep", ["-f", "control-plane/src/main.ts --mode=primary"], { encoding: "utf8" });
  const pids = out.trim().split("\n").map(Number);
  // Only the one started by this process's stack (a child of ours).
  const mine = pids.filter((p) => {
    const ppid = Number(/PPid:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, "utf8"))?.[1]);
    return ppid === process.pid;
  });
  if (mine.length !== 1) throw new Error(`expected one Primary control plane child, found ${mine.join(",")}`);
  return mine[0]!;
}

/**
 * Ready → applied on every Primary router, ms (0 when the routers had it before the SDK saw
 * Ready): each router's own time of applying the route (scale-probes.ts RouteWatch).
 */
async function toAllRouters(stack: EmbeddedStack, id: string, readyWall: number): Promise<number> {
  const watch = new RouteWatch(stack.primaryRouterAdminUrls, Object.keys(stack.workloads).length);
  return Math.max(0, (await watch.until(id)) - readyWall);
}

async function openOne(
  kube: KubeSessions,
  op: Awaited<ReturnType<typeof readOperator>>,
  onProgress?: (atMs: number, p: SessionProgress) => void,
) {
  const t0 = performance.now();
  const h = await kube.create({ target: TARGET, namespace: NAMESPACE, ttlSeconds: 3600 }, op);
  await kube.waitReady(
    h,
    {
      timeoutMs: 120_000,
      ...(onProgress ? { onProgress: (p) => onProgress(performance.now() - t0, p) } : {}),
    },
    op.spec.clusterName,
  );
  return { h, ms: performance.now() - t0, readyWall: Date.now() };
}

async function operatorReady(kc: ReturnType<EmbeddedStack["developer"]["kubeConfig"]>) {
  // The control plane writes the operator's status shortly after the stack is up.
  return eventually(
    "the operator's router endpoint",
    async () => {
      const o = await readOperator(kc);
      return o.status?.routerEndpoint ? o : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
}

async function stackPart(stack: EmbeddedStack, o: SessionsBenchOptions) {
  const kc = stack.developer.kubeConfig();
  const op = await operatorReady(kc);
  const kube = new KubeSessions(kc);
  const handles: SessionHandle[] = [];
  const cpPid = primaryControlPlanePid();
  const rssBeforeAny = rssKiB(cpPid);

  const first = await openOne(kube, op);
  handles.push(first.h);
  const firstToRouters = await toAllRouters(stack, sessionKey(NAMESPACE, first.h.id), first.readyWall);
  console.log(
    `first session: create -> Ready ${first.ms.toFixed(1)} ms, Ready -> routers ${firstToRouters.toFixed(1)} ms`,
  );

  const ready: number[] = [];
  const toRouters: number[] = [];
  for (let i = 0; i < o.sessions; i++) {
    const s = await openOne(kube, op);
    handles.push(s.h);
    ready.push(s.ms);
    toRouters.push(await toAllRouters(stack, sessionKey(NAMESPACE, s.h.id), s.readyWall));
  }
  console.log("later sessions create -> Ready:", summary(ready));
  console.log("Ready -> all Primary routers:", summary(toRouters));

  let memory:
    | {
        createToReadyUnderLoadMs: ReturnType<typeof summary>;
        heapPerSessionKiB: number;
        [k: string]: unknown;
      }
    | undefined;
  if (o.memorySessions > 0) {
    await new Promise((r) => setTimeout(r, 2000)); // let the sequential phase's garbage settle
    const before = rssKiB(cpPid);
    const heapBefore = await heapAfterGc(cpPid);
    const t0 = performance.now();
    const concurrentReady: number[] = [];
    const fill = async (n: number) => {
      let started = 0;
      await Promise.all(
        Array.from({ length: o.concurrency }, async () => {
          while (started < n) {
            started++;
            const s = await openOne(kube, op);
            handles.push(s.h);
            concurrentReady.push(s.ms);
          }
        }),
      );
    };
    // Two halves: RSS also moves with what start-up left behind (given back once a major GC runs,
    // in either half), so each half's slope is read too.
    const firstHalf = Math.floor(o.memorySessions / 2);
    await fill(firstHalf);
    const half = rssKiB(cpPid);
    await fill(o.memorySessions - firstHalf);
    const fillMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 2000));
    const after = rssKiB(cpPid);
    const heapAfter = await heapAfterGc(cpPid);
    const perSession = (after - before) / o.memorySessions;
    const perSessionFirstHalf = firstHalf > 0 ? (half - before) / firstHalf : perSession;
    const perSessionSecondHalf = (after - half) / (o.memorySessions - firstHalf);
    memory = {
      sessionsBefore: o.sessions + 1,
      added: o.memorySessions,
      concurrency: o.concurrency,
      allReadyMs: round(fillMs),
      createToReadyUnderLoadMs: summary(concurrentReady),
      rssBeforeAnySessionMiB: round(rssBeforeAny / 1024, 1),
      rssBeforeMiB: round(before / 1024, 1),
      rssHalfwayMiB: round(half / 1024, 1),
      rssAfterMiB: round(after / 1024, 1),
      rssPerSessionAllKiB: round(perSession, 1),
      rssPerSessionFirstHalfKiB: round(perSessionFirstHalf, 1),
      rssPerSessionSecondHalfKiB: round(perSessionSecondHalf, 1),
      // RSS moves with what the allocator keeps and gives back: figures only. The goal's figure
      // is the heap after a full GC before and after the sessions (support/heap-after-gc.ts).
      rssPerSessionKiB: round(Math.max(perSession, perSessionFirstHalf, perSessionSecondHalf), 1),
      heapBeforeMiB: round(heapBefore / 1024 / 1024, 1),
      heapAfterMiB: round(heapAfter / 1024 / 1024, 1),
      heapPerSessionKiB: (heapAfter - heapBefore) / 1024 / o.memorySessions,
    };
    console.log("control-plane memory:", memory);
  }
  // Best effort: the stack is torn down next anyway.
  await Promise.allSettled(handles.map((h) => kube.delete(h)));
  return {
    firstSession: { createToReadyMs: round(first.ms), readyToAllRoutersMs: round(firstToRouters) },
    laterSessions: { createToReadyMs: summary(ready), readyToAllRoutersMs: summary(toRouters) },
    primaryRouters: stack.primaryRouterUrls.length,
    memory,
  };
}

/**
 * `--fresh-stacks n`: n embedded stacks started one after another; on each, the first session's
 * create -> Ready (process agents start), with the progress the CLI saw on the way. A run slower
 * than the goal keeps its stack's logs in bench/results/ for a person to read.
 */
async function freshStacksPart(n: number) {
  const firstMs: number[] = [];
  const runs: Array<Record<string, unknown>> = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const stack = await startEmbeddedStack();
    const stackUpMs = performance.now() - t0;
    try {
      const kc = stack.developer.kubeConfig();
      const op = await operatorReady(kc);
      const operatorMs = performance.now() - t0 - stackUpMs;
      const timeline: Array<{ atMs: number; progress: string }> = [];
      const first = await openOne(new KubeSessions(kc), op, (atMs, p) =>
        timeline.push({
          atMs: round(atMs, 0),
          progress:
            `${p.phase} ` +
            p.clusters.map((c) => `${c.cluster}:${c.ready ? "ready" : (c.error ?? "waiting")}`).join(",") +
            (p.message ? ` (${p.message})` : ""),
        }),
      );
      firstMs.push(first.ms);
      const run: Record<string, unknown> = {
        stackUpMs: round(stackUpMs, 0),
        operatorReadyMs: round(operatorMs, 0),
        createToReadyMs: round(first.ms, 0),
        timeline,
      };
      if (first.ms > GOALS.firstReadyP99S * 1000) {
        const kept = join(
          import.meta.dirname,
          "..",
          "results",
          `sessions-slow-${new Date().toISOString().replace(/[:.]/g, "-")}`,
        );
        cpSync(stack.logDir, kept, { recursive: true });
        run.logsKeptIn = kept;
      }
      runs.push(run);
      console.log(
        `stack ${i + 1}/${n}: up ${(stackUpMs / 1000).toFixed(1)} s, operator +${(operatorMs / 1000).toFixed(1)} s, ` +
          `first session create -> Ready ${(first.ms / 1000).toFixed(2)} s`,
      );
      for (const t of timeline) console.log(`  +${t.atMs} ms ${t.progress}`);
      if (run.logsKeptIn) console.log(`  slow: logs kept in ${String(run.logsKeptIn)}`);
    } finally {
      await stack.stop();
    }
  }
  return { firstSessionCreateToReadyMs: summary(firstMs), runs };
}

export async function runSessionsBench(o: SessionsBenchOptions = defaultSessionsBench): Promise<void> {
  const result: Record<string, unknown> = {
    when: new Date().toISOString(),
    node: process.version,
    options: o,
    machine: machine(),
  };
  console.log("machine:", result.machine);
  if (o.freshStacks > 0) {
    const fresh = await freshStacksPart(o.freshStacks);
    result.freshStacks = fresh;
    const f = fresh.firstSessionCreateToReadyMs;
    console.log(
      `first session create -> Ready over ${f.n} fresh stacks: p50 ${(f.p50 / 1000).toFixed(2)} s, ` +
        `p99 ${(f.p99 / 1000).toFixed(2)} s, max ${(f.max / 1000).toFixed(2)} s`,
    );
    console.log(`written ${writeResult("sessions-fresh", result)}`);
    printGoals([
      {
        name: "first-session-ready-p99",
        value: f.p99 / 1000,
        op: "<=",
        target: GOALS.firstReadyP99S,
        unit: "s",
      },
    ]);
    return;
  }
  const push = await measurePushCost(o.pushSizes);
  result.pushCost = push;
  console.log("push cost (one change vs full resync, 2 routers):");
  console.table(
    push.map((r) => ({
      sessions: r.sessions,
      "change p50 ms": r.oneChange.p50Ms,
      "change p99 ms": r.oneChange.p99Ms,
      "change bytes": r.oneChange.bytes,
      "resync p50 ms": r.fullResync.p50Ms,
      "resync bytes": r.fullResync.bytes,
    })),
  );
  if (!o.pushOnly) {
    const t0 = performance.now();
    const stack = await startEmbeddedStack();
    console.log(`stack up in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    try {
      result.stack = await stackPart(stack, o);
    } finally {
      await stack.stop();
    }
  }
  console.log(`written ${writeResult("sessions", result)}`);
  const s = result.stack as Awaited<ReturnType<typeof stackPart>> | undefined;
  if (s) {
    const routers = s.laterSessions.readyToAllRoutersMs.p99;
    printGoals([
      { name: "ready-to-routers-p99", value: routers, op: "<=", target: GOALS.routersP99Ms, unit: "ms" },
      ...(s.memory
        ? [
            {
              name: "create-ready-p50",
              value: s.memory.createToReadyUnderLoadMs.p50 / 1000,
              op: "<=" as const,
              target: GOALS.createReadyP50S,
              unit: "s",
            },
            {
              name: "cp-heap-per-session",
              value: s.memory.heapPerSessionKiB,
              op: "<=" as const,
              target: GOALS.heapPerSessionKiB,
              unit: "KiB",
              digits: 1,
              // A heap that did not grow measured nothing (the sessions were not held).
              requires: { "the heap grew with the sessions": s.memory.heapPerSessionKiB > 0 },
            },
          ]
        : []),
    ]);
  }
}
