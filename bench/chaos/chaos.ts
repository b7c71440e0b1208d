// Chaos on real pods (test/env/stack/pod-stack.ts: a management-only Primary with 2 routers and 2
// control planes, east — the Default — and west on real nodes, a two-replica demo behind a
// NodePort in each), with the CLI and the SDK as a developer uses them. In one run:
//   1. sessions initialising while the control-plane leader pod is deleted (chaos-sessions.ts);
//   2. steady traffic into a steal session while a Primary router pod is deleted every few
//      seconds, and 3. while west's API server is stopped for a while (chaos-disruptions.ts);
//   4. the CLI SIGKILLed mid-request (chaos-client-kill.ts).
// They run in the order leader, routers, client, api: what an API server outage breaks can
// outlast the session under test, and would then be counted again by whatever ran after it.
// Counted: lost — every request the session's local app did not answer (a failure, no answer,
// or an answer from the app in the pod), except reported failures of requests in flight at the
// instant a disruption began (each printed with its connection), and sessions that failed;
// wrong answerer — answered by anyone but the local app (also in lost, and its own goal);
// leaked — what the killed CLI's session left past its TTL; orphans — local processes that
// outlived the killed CLI. Numbers only; nothing here asserts. One stack per invocation; it
// needs root and the node packages, like the pod suites.
import { writeFileSync } from "node:fs";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { clientKilledMidRequest, type ClientKillResult } from "./chaos-client-kill.js";
import {
  trafficThroughApiOutage,
  trafficThroughRouterKills,
  type ApiOutageResult,
  type DisruptionResult,
  type RouterKillResult,
} from "./chaos-disruptions.js";
import { sessionsThroughLeaderKill, type LeaderKillResult } from "./chaos-sessions.js";
import { componentLogs, waitQuiet, withoutLinger } from "./chaos-stack.js";
import { breakdownLine } from "./chaos-traffic.js";
import { decideGoal, type Goal } from "../support/goal.js";
import { onPodStack, requireWholeNumbers } from "../support/pod-stack-run.js";
import { writeResult } from "../support/stats-support.js";

/** In the order they run (the API server outage last: see bench/chaos/README.md). */
export const CHAOS_SCENARIOS = ["leader", "routers", "client", "api"] as const;
/** Their numbers in the figures. */
const NUMBER: Record<string, number> = { leader: 1, routers: 2, api: 3, client: 4 };
export type ChaosScenario = (typeof CHAOS_SCENARIOS)[number];

export interface ChaosBenchOptions {
  scenarios: ChaosScenario[];
  /** Scenario 1: sessions opened at once. */
  sessions: number;
  /** Scenarios 2 and 3: requests per second in all, over both clusters. */
  rate: number;
  /** Scenario 2: traffic duration and the interval between router pod deletions, s. */
  durationS: number;
  killEveryS: number;
  /** Scenario 3: how long west's API server is stopped, s. */
  outageS: number;
}

export const defaultChaosBench: ChaosBenchOptions = {
  scenarios: [...CHAOS_SCENARIOS],
  sessions: 10,
  rate: 20,
  durationS: 120,
  killEveryS: 5,
  outageS: 30,
};

/** A request not answered by then counts as unanswered (lost). */
const REQUEST_TIMEOUT_MS = 15_000;

interface ChaosResults {
  leader?: LeaderKillResult;
  routers?: RouterKillResult;
  api?: ApiOutageResult;
  client?: ClientKillResult;
  /** Scenarios that could not run to their end: why, and the components' logs then. */
  failed: Partial<Record<ChaosScenario, { message: string; logs: string }>>;
}

function printDisruption(title: string, r: DisruptionResult): void {
  console.log(`${title}: ${breakdownLine(r.breakdown)}`);
  const kinds = Object.entries(r.breakdown.failureKinds);
  if (kinds.length) console.log(`  failures by kind: ${kinds.map(([k, n]) => `${k} ×${n}`).join(", ")}`);
  for (const x of r.breakdown.lostExamples) console.log(`  lost: ${x}`);
  for (const x of r.breakdown.inFlightExamples) console.log(`  excused, in flight at a disruption: ${x}`);
  console.log(
    `  CLI router disconnections ${r.disconnections.count} (p50 ${r.disconnections.p50S} s, max ` +
      `${r.disconnections.maxS} s, ${r.disconnections.unexplained} unexplained); session afterwards: ` +
      `${r.sessionSurvived ? "Ready and stealing in both clusters" : `LOST — ${r.sessionProblem}`}; ` +
      `restored after Ctrl-C: ${r.restored ? "yes" : "NO"}`,
  );
}

function printScenario(r: ChaosResults, key: ChaosScenario): void {
  if (key === "leader" && r.leader) {
    const l = r.leader;
    const ok = l.stealingS.filter((x) => x !== undefined) as number[];
    console.log(
      `1. ${l.sessions} sessions, leader ${l.leaderPod} deleted ${l.createdToKillMs} ms after the last was created; ` +
        `new leader after ${l.newLeaderAfterS ?? "—"} s; ${ok.length} Ready and stealing ` +
        `(created → stealing in both clusters ${ok.length ? `${Math.min(...ok)}–${Math.max(...ok)} s` : "—"}); ` +
        `lost ${l.lost}; restored after close: ${l.restored ? "yes" : "NO"}`,
    );
    for (const x of l.lostReasons) console.log(`  ${x}`);
  }
  if (key === "routers" && r.routers) {
    printDisruption(
      `2. ${r.routers.kills} router pod deletions (gone after p50 ${r.routers.podGoneS.p50} s, max ${r.routers.podGoneS.max} s)`,
      r.routers,
    );
    for (const x of r.routers.killErrors) console.log(`  ${x}`);
  }
  if (key === "api" && r.api) {
    printDisruption(`3. west's API server stopped`, r.api);
    console.log(
      `  session phases from the stop: ${r.api.phases.map((p) => `${p.atS} s ${p.phase} [${p.ready.join(",")}]`).join("; ")}; ` +
        `Ready and stealing everywhere ${r.api.recoveredAfterS ?? "—"} s after the restart`,
    );
  }
  if (key === "client" && r.client) {
    const c = r.client;
    console.log(
      `4. CLI SIGKILLed mid-request: the caller got ${c.caller.outcome}` +
        `${c.caller.status ? ` ${c.caller.status}` : ""}${c.caller.error ? ` (${c.caller.error})` : ""} ` +
        `${c.caller.afterKillMs} ms after the kill; alive after the check: ` +
        `${c.processes.map((p) => `${p.name} ${p.aliveAfterCheck ? "ALIVE" : "gone"}`).join(", ")}; ` +
        `left in the temporary directory: ${c.filesLeft.length ? c.filesLeft.join(", ") : "nothing"}; ` +
        `TTL ${c.ttlSeconds} s, gone after: ` +
        `${Object.entries(c.goneAfterS)
          .map(([k, s]) => `${k} ${s === undefined ? "NEVER" : `${s} s`}`)
          .join(", ")}`,
    );
  }
  const failed = r.failed[key];
  if (failed)
    console.log(
      `${NUMBER[key]}. ${key}: could not run to its end (counted as 1 lost): ${failed.message.split("\n")[0]}`,
    );
}

function totals(r: ChaosResults) {
  const traffic = (d: DisruptionResult | undefined) => (d ? d.breakdown.lost + d.sessionLost : 0);
  const unrestored = [r.leader, r.routers, r.api].filter((x) => x && !x.restored).length;
  return {
    lost:
      (r.leader?.lost ?? 0) +
      traffic(r.routers) +
      traffic(r.api) +
      (r.client?.lost ?? 0) +
      Object.keys(r.failed).length,
    // A scenario whose sessions were all closed but whose demos never came back leaked too.
    leaked: (r.client?.leaked ?? 0) + unrestored,
    orphans: r.client?.orphans ?? 0,
    inFlightAtDisruption: [r.routers, r.api].reduce(
      (n, d) => n + (d ? d.breakdown.inFlightAtDisruption : 0),
      0,
    ),
    // Answered by the app in the pod (or anyone but the local app): already in `lost`, and a goal of its own.
    wrongAnswerer: [r.routers, r.api].reduce((n, d) => n + (d ? d.breakdown.wrongAnswerer : 0), 0),
  };
}

async function measure(stack: PodStack, o: ChaosBenchOptions): Promise<ChaosResults> {
  const r: ChaosResults = { failed: {} };
  const traffic = { ratePerSecond: o.rate, timeoutMs: REQUEST_TIMEOUT_MS };
  const say = (s: string) => console.log(`[chaos] ${s}`);
  await withoutLinger(stack);
  // A scenario that cannot run to its end (its session never started, say) is one loss; the
  // run goes on with the next, and what the components said is kept.
  const run = async <K extends ChaosScenario>(key: K, title: string, fn: () => Promise<ChaosResults[K]>) => {
    if (!o.scenarios.includes(key)) return;
    say(title);
    try {
      r[key] = await fn();
      printScenario(r, key);
    } catch (err) {
      const message = (err as Error).message;
      say(`${key}: FAILED — ${message.split("\n").slice(0, 12).join("\n")}`);
      r.failed[key] = {
        message,
        logs: await componentLogs(stack, 150).catch((e: unknown) => `(no logs: ${String(e)})`),
      };
      await waitQuiet(stack, 180_000);
    }
  };
  await run("leader", `1: ${o.sessions} sessions while the control-plane leader pod is deleted`, () =>
    sessionsThroughLeaderKill(stack, {
      sessions: o.sessions,
      readyTimeoutMs: 180_000,
      stealTimeoutMs: 60_000,
    }),
  );
  await run(
    "routers",
    `2: ${o.durationS} s of traffic, a Primary router pod deleted every ${o.killEveryS} s`,
    () =>
      trafficThroughRouterKills(stack, {
        ...traffic,
        durationMs: o.durationS * 1000,
        killEveryMs: o.killEveryS * 1000,
      }),
  );
  await run("client", "4: the CLI SIGKILLed mid-request; then the session's TTL", () =>
    clientKilledMidRequest(stack, {
      slowMs: 2000,
      callerTimeoutMs: REQUEST_TIMEOUT_MS,
      orphanCheckAfterMs: 8000,
      expiryMarginMs: 60_000,
    }),
  );
  await run("api", `3: west's API server stopped for ${o.outageS} s under traffic`, () =>
    trafficThroughApiOutage(stack, {
      ...traffic,
      cluster: "west",
      beforeMs: 10_000,
      outageMs: o.outageS * 1000,
      afterMs: 20_000,
      recoveryTimeoutMs: 60_000,
    }),
  );
  return r;
}

export async function runChaosBench(o: ChaosBenchOptions = defaultChaosBench): Promise<void> {
  requireWholeNumbers([
    ["--sessions", o.sessions],
    ["--rate", o.rate],
    ["--duration", o.durationS],
    ["--kill-every", o.killEveryS],
    ["--outage", o.outageS],
  ]);
  await onPodStack("chaos", async (stack) => {
    const results = await measure(stack, o);
    // The logs kept as evidence go to a file of their own; the JSON keeps the figures.
    const evidence: string[] = [];
    for (const key of CHAOS_SCENARIOS) {
      const v = results[key] as Partial<DisruptionResult> | undefined;
      if (v?.evidence)
        evidence.push(
          `##### ${key}: CLI output\n${v.evidence.cli}\n##### ${key}: components\n${v.evidence.logs}`,
        );
      if (v) delete v.evidence;
      const f = results.failed[key];
      if (f) {
        evidence.push(`##### ${key}: failed\n${f.message}\n##### ${key}: components\n${f.logs}`);
        f.logs = "(in the evidence file)";
      }
    }
    const t = totals(results);
    const file = writeResult("chaos", {
      when: new Date().toISOString(),
      node: process.version,
      options: o,
      totals: t,
      ...results,
    });
    console.log(`written ${file}`);
    if (evidence.length) {
      const logFile = file.replace(/\.json$/, "-evidence.txt");
      writeFileSync(logFile, evidence.join("\n\n"));
      console.log(`evidence (CLI output, component logs) in ${logFile}`);
    }
    console.log("--- chaos summary ---");
    for (const key of CHAOS_SCENARIOS) printScenario(results, key);
    console.log(
      `reported failures of requests in flight at the instant of a disruption: ${t.inFlightAtDisruption} (excused, each listed above)`,
    );
    const zero = (name: string, value: number): Goal => ({ name, value, op: "==", target: 0, digits: 0 });
    return [
      `lost=${t.lost} wrong-answerer=${t.wrongAnswerer} leaked=${t.leaked} orphans=${t.orphans}`,
      ...[
        zero("chaos-lost", t.lost),
        zero("chaos-wrong-answerer", t.wrongAnswerer),
        zero("chaos-leaked", t.leaked),
        zero("chaos-orphans", t.orphans),
      ].map((g) => decideGoal(g).line),
    ];
  });
}
