// Session start-up benchmark (issue 5), on the whole local stack (startEmbeddedStack: real
// API servers, the Helm chart, control planes, routers and process agents):
//   1. create -> status.phase Ready as the CLI sees it (KubeSessions.create + waitReady with
//      the developer's kubeconfig): the first session (process agents start) and later ones;
//   2. Ready -> the session present in /debug/routes of every Primary router (its admin port, polled);
//   3. push cost versus table size (route-push-support.ts, no stack needed);
//   4. RSS of the Primary control-plane process before/after M extra sessions.
// Numbers only; nothing here asserts speed.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { KubeSessions, type SessionHandle } from "../cli/src/sdk/kube/kube-sessions.js";
import { sessionKey } from "../proto/session-endpoint.js";
import { readOperator } from "../cli/src/sdk/kube/operator-info.js";
import { startEmbeddedStack, type EmbeddedStack } from "../test/env/embedded-stack.js";
import { eventually } from "../test/support/poll.js";
import { measurePushCost } from "./route-push-support.js";
import { round, summary, writeResult } from "./stats-support.js";

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
}

export const defaultSessionsBench: SessionsBenchOptions = {
  sessions: 20,
  memorySessions: 200,
  concurrency: 10,
  pushSizes: [10, 100, 1000, 10_000],
  pushOnly: false,
};

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

/** Polls every Primary router's /debug/routes (on its admin port) until each lists the session; ms taken. */
async function untilOnAllRouters(adminUrls: string[], id: string, timeoutMs = 30_000): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    adminUrls.map((b) =>
      // No pause between polls: the time to the routers is what is measured.
      eventually(
        `${id} on router ${b}`,
        async () => (await (await fetch(`${b}/debug/routes`)).text()).includes(`"${id}"`),
        { timeoutMs, intervalMs: 0 },
      ),
    ),
  );
  return performance.now() - t0;
}

async function openOne(kube: KubeSessions, op: Awaited<ReturnType<typeof readOperator>>) {
  const t0 = performance.now();
  const h = await kube.create({ target: TARGET, namespace: NAMESPACE, ttlSeconds: 3600 }, op);
  await kube.waitReady(h, { timeoutMs: 120_000 }, op.spec.clusterName);
  return { h, ms: performance.now() - t0 };
}

async function stackPart(stack: EmbeddedStack, o: SessionsBenchOptions) {
  const kc = stack.developer.kubeConfig();
  // The control plane writes the operator's status shortly after the stack is up.
  const op = await eventually(
    "the operator's router endpoint",
    async () => {
      const o = await readOperator(kc);
      return o.status?.routerEndpoint ? o : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  const kube = new KubeSessions(kc);
  const handles: SessionHandle[] = [];
  const cpPid = primaryControlPlanePid();
  const rssBeforeAny = rssKiB(cpPid);

  const first = await openOne(kube, op);
  handles.push(first.h);
  const firstToRouters = await untilOnAllRouters(
    stack.primaryRouterAdminUrls,
    sessionKey(NAMESPACE, first.h.id),
  );
  console.log(
    `first session: create -> Ready ${first.ms.toFixed(1)} ms, Ready -> routers ${firstToRouters.toFixed(1)} ms`,
  );

  const ready: number[] = [];
  const toRouters: number[] = [];
  for (let i = 0; i < o.sessions; i++) {
    const s = await openOne(kube, op);
    handles.push(s.h);
    ready.push(s.ms);
    toRouters.push(await untilOnAllRouters(stack.primaryRouterAdminUrls, sessionKey(NAMESPACE, s.h.id)));
  }
  console.log("later sessions create -> Ready:", summary(ready));
  console.log("Ready -> all Primary routers:", summary(toRouters));

  let memory: Record<string, unknown> | undefined;
  if (o.memorySessions > 0) {
    await new Promise((r) => setTimeout(r, 2000)); // let the sequential phase's garbage settle
    const before = rssKiB(cpPid);
    const t0 = performance.now();
    const concurrentReady: number[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        while (next < o.memorySessions) {
          next++;
          const s = await openOne(kube, op);
          handles.push(s.h);
          concurrentReady.push(s.ms);
        }
      }),
    );
    const fillMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 2000));
    const after = rssKiB(cpPid);
    memory = {
      sessionsBefore: o.sessions + 1,
      added: o.memorySessions,
      concurrency: o.concurrency,
      allReadyMs: round(fillMs),
      createToReadyUnderLoadMs: summary(concurrentReady),
      rssBeforeAnySessionMiB: round(rssBeforeAny / 1024, 1),
      rssBeforeMiB: round(before / 1024, 1),
      rssAfterMiB: round(after / 1024, 1),
      rssPerSessionKiB: round((after - before) / o.memorySessions, 1),
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

export async function runSessionsBench(o: SessionsBenchOptions = defaultSessionsBench): Promise<void> {
  const result: Record<string, unknown> = {
    when: new Date().toISOString(),
    node: process.version,
    options: o,
  };
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
  const s = result.stack as
    { laterSessions: { createToReadyMs: { p50: number }; readyToAllRoutersMs: { p99: number } } } | undefined;
  if (s) {
    console.log(
      `goals: create -> Ready p50 ${s.laterSessions.createToReadyMs.p50} ms (goal <= 1000), ` +
        `Ready -> all routers p99 ${s.laterSessions.readyToAllRoutersMs.p99} ms (goal <= 50)`,
    );
  }
  console.log(`written ${writeResult("sessions", result)}`);
}
