// Chaos scenarios 2 and 3: steady traffic through east's and west's demo NodePorts into a
// `switchyard exec --steal` session while the bench breaks something under it.
//   2. A Primary router pod is deleted every `killEveryMs` (the oldest that is not already
//      terminating, so the one the CLI is on goes every other time); the Deployment replaces
//      it and the CLI reconnects. A kill is in progress from the delete call until the pod is
//      gone, and, when the CLI lost its router connection meanwhile, until it reconnected.
//   3. west's API server is stopped for `outageMs` mid-session and started again; the outage is
//      the disruption. Afterwards the session must be Ready and stealing in both clusters.
// Failures are explained against the disruptions by chaos-traffic.ts; a session that is gone
// afterwards (the CLI exited, or it no longer steals in both clusters) is one more loss.
import { sleep } from "../../lib/abortable-sleep.js";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { eventually } from "../../test/support/poll.js";
import {
  disconnections,
  startStealExec,
  stealingEverywhere,
  stopExec,
  type StealExec,
} from "./chaos-exec.js";
import {
  componentLogs,
  deletePrimaryPod,
  primaryPodGone,
  primaryPods,
  sessionReady,
  waitQuiet,
} from "./chaos-stack.js";
import {
  explainFailures,
  steadyTraffic,
  type Disruption,
  type FailureBreakdown,
  type RequestRecord,
} from "./chaos-traffic.js";
import { pct, round } from "../support/stats-support.js";

export interface TrafficOptions {
  ratePerSecond: number;
  timeoutMs: number;
}

export interface DisruptionResult {
  sessionId: string;
  breakdown: FailureBreakdown;
  /** The CLI still ran and stole through every cluster afterwards (false: the session was lost). */
  sessionSurvived: boolean;
  sessionProblem?: string;
  /** 0 or 1: the session itself, lost. */
  sessionLost: number;
  /** The CLI's router disconnections: count, how long (s), and those no disruption explains. */
  disconnections: { count: number; p50S: number; maxS: number; unexplained: number };
  restored: boolean;
  /** CLI output and component logs, when something was lost. */
  evidence?: { cli: string; logs: string };
}

const targets = (stack: PodStack) =>
  Object.values(stack.workloads).map((w) => ({ name: w.name, url: w.demoUrl }));

/** What is common to both: the session afterwards, the CLI's disconnections, the evidence. */
async function conclude(
  stack: PodStack,
  e: StealExec,
  records: RequestRecord[],
  disruptions: Disruption[],
  t0: number,
  afterCheck: () => Promise<string | undefined>,
): Promise<DisruptionResult> {
  const disc = disconnections(e.lines);
  const explained = (d: { startAt: number }) =>
    disruptions.some((x) => d.startAt >= x.startAt && d.startAt <= x.endAt);
  const all = [
    ...disruptions,
    ...disc.filter(explained).map((d) => ({ what: "the CLI reconnecting", ...d })),
  ];
  const breakdown = explainFailures(records, all, t0);
  let problem: string | undefined;
  if (e.proc.hasExited()) problem = `the CLI exited (${await e.proc.exited})`;
  else problem = await afterCheck();
  const lens = disc.map((d) => (Math.min(d.endAt, performance.now()) - d.startAt) / 1000);
  const result: DisruptionResult = {
    sessionId: e.sessionId,
    breakdown,
    sessionSurvived: problem === undefined,
    ...(problem ? { sessionProblem: problem } : {}),
    sessionLost: problem ? 1 : 0,
    disconnections: {
      count: disc.length,
      p50S: lens.length ? round(pct(lens, 50), 2) : 0,
      maxS: lens.length ? round(Math.max(...lens), 2) : 0,
      unexplained: disc.filter((d) => !explained(d)).length,
    },
    restored: false,
  };
  if (breakdown.lost > 0 || problem || result.disconnections.unexplained > 0)
    result.evidence = {
      cli: e.proc.output().slice(-8000),
      logs: await componentLogs(stack, 150).catch((err: unknown) => `(no logs: ${String(err)})`),
    };
  return result;
}

async function stealsEverywhere(stack: PodStack, timeoutMs: number): Promise<string | undefined> {
  try {
    await stealingEverywhere(stack, "local", timeoutMs, "/after");
    return undefined;
  } catch (err) {
    return `not stealing in every cluster afterwards: ${(err as Error).message}`;
  }
}

export interface RouterKillOptions extends TrafficOptions {
  durationMs: number;
  killEveryMs: number;
}

export interface RouterKillResult extends DisruptionResult {
  kills: number;
  /** Delete → pod gone, s. */
  podGoneS: { p50: number; max: number };
  killErrors: string[];
}

export async function trafficThroughRouterKills(
  stack: PodStack,
  o: RouterKillOptions,
): Promise<RouterKillResult> {
  const e = await startStealExec(stack, { name: "router-kills" });
  const kills: { pod: string; deleteAt: number; goneAt?: number }[] = [];
  const killErrors: string[] = [];
  try {
    const t0 = performance.now();
    const traffic = steadyTraffic({ targets: targets(stack), ...o, path: "/routers" });
    const watchers: Promise<unknown>[] = [];
    for (let k = 1; k * o.killEveryMs < o.durationMs; k++) {
      const due = t0 + k * o.killEveryMs - performance.now();
      if (due > 0) await sleep(due);
      try {
        const victim = (await primaryPods(stack, "router"))[0];
        if (!victim) {
          killErrors.push(`kill ${k}: no router pod that is not terminating`);
          continue;
        }
        const kill: (typeof kills)[number] = { pod: victim.metadata!.name!, deleteAt: performance.now() };
        await deletePrimaryPod(stack, kill.pod);
        kills.push(kill);
        watchers.push(
          eventually(`${kill.pod} to be gone`, () => primaryPodGone(stack, kill.pod), {
            timeoutMs: 90_000,
            intervalMs: 100,
          }).then(
            () => (kill.goneAt = performance.now()),
            () => {},
          ),
        );
      } catch (err) {
        killErrors.push(`kill ${k}: ${(err as Error).message.split("\n")[0]}`);
      }
    }
    const records = await traffic;
    await Promise.all(watchers);
    const disruptions = kills.map((k) => ({
      what: `router pod ${k.pod} deleted`,
      startAt: k.deleteAt,
      endAt: k.goneAt ?? Infinity,
    }));
    const result = await conclude(stack, e, records, disruptions, t0, () => stealsEverywhere(stack, 60_000));
    const gone = kills.filter((k) => k.goneAt !== undefined).map((k) => (k.goneAt! - k.deleteAt) / 1000);
    return {
      ...result,
      kills: kills.length,
      podGoneS: { p50: round(pct(gone, 50), 2), max: gone.length ? round(Math.max(...gone), 2) : 0 },
      killErrors,
      restored: await stopAndRestore(stack, e),
    };
  } finally {
    if (!e.proc.hasExited()) await e.proc.stop(0, "SIGKILL");
  }
}

export interface ApiOutageOptions extends TrafficOptions {
  cluster: string;
  beforeMs: number;
  outageMs: number;
  afterMs: number;
  /** After the API server is back, how long the session may take to be Ready and stealing again. */
  recoveryTimeoutMs: number;
}

export interface ApiOutageResult extends DisruptionResult {
  /** The parent's phase and ready clusters each time they changed (s from the outage's start). */
  phases: { atS: number; phase: string; ready: string[] }[];
  /** API server back → session Ready with every cluster and stealing everywhere, s. */
  recoveredAfterS: number | undefined;
}

export async function trafficThroughApiOutage(
  stack: PodStack,
  o: ApiOutageOptions,
): Promise<ApiOutageResult> {
  const e = await startStealExec(stack, { name: "api-outage" });
  const cluster = stack.set.get(o.cluster);
  const phases: ApiOutageResult["phases"] = [];
  let sampling = true;
  try {
    const t0 = performance.now();
    const traffic = steadyTraffic({
      targets: targets(stack),
      ...o,
      durationMs: o.beforeMs + o.outageMs + o.afterMs,
      path: "/outage",
    });
    await sleep(o.beforeMs);
    const stopAt = performance.now();
    const sampler = (async () => {
      let last = "";
      while (sampling) {
        const s = await sessionReady(stack, e.sessionId).catch(() => undefined);
        const key = JSON.stringify(s);
        if (s && key !== last) {
          last = key;
          phases.push({ atS: round((performance.now() - stopAt) / 1000, 1), ...s });
        }
        await sleep(500);
      }
    })();
    await cluster.stopApiServer();
    const rest = stopAt + o.outageMs - performance.now();
    if (rest > 0) await sleep(rest);
    await cluster.startApiServer();
    const startedAt = performance.now();
    // From the moment the API server is back: the session Ready in every cluster, then a
    // stolen request through each; the time it took, or what was still wrong at the deadline.
    const all = Object.keys(stack.workloads);
    const recovery = (async (): Promise<{ at: number } | { problem: string }> => {
      const left = () => Math.max(1000, startedAt + o.recoveryTimeoutMs - performance.now());
      try {
        await eventually(
          "the session Ready in every cluster",
          async () => {
            const s = await sessionReady(stack, e.sessionId);
            return s.phase === "Ready" && all.every((c) => s.ready.includes(c));
          },
          { timeoutMs: left(), intervalMs: 250 },
        );
      } catch (err) {
        return { problem: `not Ready afterwards: ${(err as Error).message}` };
      }
      const problem = await stealsEverywhere(stack, left());
      return problem ? { problem } : { at: performance.now() };
    })();
    const records = await traffic;
    const recovered = await recovery;
    const result = await conclude(
      stack,
      e,
      records,
      [{ what: `${o.cluster}'s API server stopped`, startAt: stopAt, endAt: startedAt }],
      t0,
      () => Promise.resolve("problem" in recovered ? recovered.problem : undefined),
    );
    const recoveredAt = "at" in recovered ? recovered.at : undefined;
    sampling = false;
    await sampler;
    return {
      ...result,
      phases,
      recoveredAfterS: recoveredAt === undefined ? undefined : round((recoveredAt - startedAt) / 1000, 2),
      restored: await stopAndRestore(stack, e),
    };
  } finally {
    sampling = false;
    if (!cluster.isApiServerRunning()) await cluster.startApiServer();
    if (!e.proc.hasExited()) await e.proc.stop(0, "SIGKILL");
  }
}

/** Ctrl-C the CLI, then wait until no session is left and both demos are back. */
async function stopAndRestore(stack: PodStack, e: StealExec): Promise<boolean> {
  await stopExec(e);
  return waitQuiet(stack, 180_000);
}
