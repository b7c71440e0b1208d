// Sessions without rollouts, on real pods, side by side in one run. Each round:
//   1. `switchyard agents remove deployment/demo` and the rollout back: no agent anywhere;
//      the app's req/s through east's demo NodePort with no agent;
//   2. a cold session (`exec --steal` while no pod runs the agent): exec → the first stolen
//      request in every cluster, then Ctrl-C: the agent stays, idle (linger);
//   3. the app's req/s with that idle agent in every pod (no session: a pure pass-through);
//   4. a warm session on the lingering agent: exec → stolen in every cluster, Ctrl-C;
//   5. the removal again, which is the cold session's restore.
// Rollouts are counted, not guessed: the Deployment's `deployment.kubernetes.io/revision`
// moves once per rollout (a new ReplicaSet, or an old one made current again). A cold
// session's agent costs its injection and its restore; a warm session should cost none.
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { Agent } from "node:http";
import { AppsV1Api } from "@kubernetes/client-node";
import { LINGER_UNTIL_ANNOTATION } from "../../control-plane/src/member/agent-annotations.js";
import { multiClusterSessionClient } from "../../proto/api/v1alpha1/index.js";
import { launch, tsx } from "../../test/support/launch.js";
import { eventually } from "../../test/support/poll.js";
import {
  kc,
  msUntil,
  rolledOut,
  sec,
  startExec,
  stolenOnce,
  stopExec,
  timedGet,
  WAIT,
} from "./pods-support.js";
import { pct, round } from "../support/stats-support.js";

export interface LingerRound {
  cold: StartPhases;
  warm: StartPhases;
  /** The warm start with the baseline CLI (`--baseline-cli`), in the same round. */
  warmBaseline?: StartPhases;
  /** Per cluster: rollouts of the cold session's agent (injection + restore) and of the warm session. */
  coldRollouts: Record<string, number>;
  warmRollouts: Record<string, number>;
  /** req/s through east's NodePort, answered by the app, with no agent and with an idle one. */
  noAgentRps?: number;
  idleAgentRps?: number;
}

const REVISION = "deployment.kubernetes.io/revision";

async function revisions(stack: PodStack): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const c of Object.keys(stack.workloads)) {
    const d = await kc(stack, c)
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ name: "demo", namespace: "default" });
    out[c] = Number(d.metadata?.annotations?.[REVISION] ?? 0);
  }
  return out;
}

const delta = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(Object.keys(a).map((c) => [c, b[c]! - a[c]!]));

/** `switchyard agents remove deployment/demo` as the developer runs it, then every rollout back. */
async function removeAgents(stack: PodStack): Promise<void> {
  const args = stack.developerCliArgs.slice(0, 4); // --kubeconfig <file> -n default
  const p = await launch({
    name: "switchyard-agents-remove",
    ...tsx("cli/src/main.ts", ["agents", "remove", "deployment/demo", ...args]),
  });
  const code = await p.exited;
  if (code !== 0) throw new Error(`switchyard agents remove exited with ${code}:\n${p.output()}`);
  for (const c of Object.keys(stack.workloads))
    await eventually(`${c}'s demo without the agent`, () => rolledOut(kc(stack, c), false), WAIT);
}

/** Every demo pod runs the agent and the template carries a linger record (no session on it). */
async function lingering(stack: PodStack): Promise<void> {
  for (const c of Object.keys(stack.workloads))
    await eventually(
      `${c}'s agent lingering`,
      async () => {
        const d = await kc(stack, c)
          .makeApiClient(AppsV1Api)
          .readNamespacedDeployment({ name: "demo", namespace: "default" });
        return (
          d.metadata?.annotations?.[LINGER_UNTIL_ANNOTATION] !== undefined &&
          (await rolledOut(kc(stack, c), true))
        );
      },
      WAIT,
    );
}

/** ms from the exec's spawn to each step of a session's start (the last is the goal). */
export interface StartPhases {
  /** The MultiClusterSession exists on the Primary: CLI start-up, operator read, create. */
  created: number;
  /** Its status says Ready: the Primary and both members reconciled. */
  ready: number;
  /** The local app printed "local app ready": the CLI connected, subscribed and started it. */
  appReady: number;
  /** The first request through every cluster's NodePort answered by the local app. */
  stolen: number;
}

/**
 * exec → the first stolen request through every cluster's NodePort (`url` of each cluster: the
 * demo's by default), by phase; Ctrl-C after. `target` is the exec's (deployment/demo by default).
 */
export async function sessionToStolen(
  stack: PodStack,
  target?: string,
  url: (cluster: string) => string = (c) => stack.workloads[c]!.demoUrl,
  /** The bin to run (default: this checkout's product build). */
  cli?: string,
): Promise<StartPhases> {
  const sessions = multiClusterSessionClient(kc(stack, "primary"));
  const before = new Set((await sessions.list({ namespace: "default" })).items.map((x) => x.metadata.name));
  const mine = async () =>
    (await sessions.list({ namespace: "default" })).items.find((x) => !before.has(x.metadata.name));
  const e = await startExec(stack, target, cli);
  try {
    const [created, ready, appReady, ...stolen] = await Promise.all([
      msUntil(e, "the session to be created", async () => (await mine()) !== undefined, 50),
      msUntil(e, "the session to be Ready", async () => (await mine())?.status?.phase === "Ready", 50),
      msUntil(e, "the local app to start", () => e.proc.output().includes("local app ready"), 10),
      ...Object.keys(stack.workloads).map((c) =>
        msUntil(e, `a stolen request through ${c}'s NodePort`, () => stolenOnce(url(c)), 25),
      ),
    ]);
    return { created, ready, appReady, stolen: Math.max(...stolen) };
  } catch (err) {
    (err as Error).message += `\nswitchyard exec output:\n${e.proc.output().slice(-3000)}`;
    throw err;
  } finally {
    const status = await stopExec(e);
    if (status !== 130) console.log(`switchyard exec exited with ${status} (expected 130)`);
  }
}

/** `requests` GETs over `connections` kept-alive connections, each answered by the app: req/s. */
async function appRps(url: string, requests: number, connections = 8): Promise<number> {
  const agents = Array.from({ length: connections }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
  try {
    const run = async (count: number) => {
      let next = 0;
      const worker = async (agent: Agent) => {
        while (next < count) {
          const i = next++;
          const a = await timedGet(`${url}/rps/${i}`, agent);
          if (!a.servedBy?.startsWith("app-"))
            throw new Error(`GET #${i} answered by ${a.servedBy ?? "nobody"}`);
        }
      };
      await Promise.all(agents.map(worker));
    };
    // Warm-up: the pods just (re)started, so their JIT and every connection get going first.
    await run(Math.max(connections, Math.round(requests / 3)));
    const t0 = performance.now();
    await run(requests);
    return requests / ((performance.now() - t0) / 1000);
  } finally {
    for (const a of agents) a.destroy();
  }
}

/**
 * The same start with this build's CLI and with `baselineCli` (another build's bin), in turns
 * (which goes first alternates by round): both figures of one round share the stack's state.
 */
export async function sideBySide(
  round: number,
  thisCli: () => Promise<StartPhases>,
  baselineCli: (() => Promise<StartPhases>) | undefined,
): Promise<{ phases: StartPhases; baseline?: StartPhases }> {
  if (!baselineCli) return { phases: await thisCli() };
  if (round % 2 === 0) {
    const baseline = await baselineCli();
    return { phases: await thisCli(), baseline };
  }
  const phases = await thisCli();
  return { phases, baseline: await baselineCli() };
}

/** p50 of each phase, s. */
export function phaseP50s(ps: StartPhases[]): Record<keyof StartPhases, number> {
  const p50 = (k: keyof StartPhases) =>
    round(
      pct(
        ps.map((p) => p[k]),
        50,
      ) / 1000,
      2,
    );
  return { created: p50("created"), ready: p50("ready"), appReady: p50("appReady"), stolen: p50("stolen") };
}

export async function sessionsWithoutRollouts(
  stack: PodStack,
  rounds: number,
  rpsRequests: number,
  baselineCli?: string,
) {
  const east = stack.workloads.east!.demoUrl;
  const rows: LingerRound[] = [];
  for (let n = 1; n <= rounds; n++) {
    await removeAgents(stack);
    const noAgentRps = await appRps(east, rpsRequests);
    const r0 = await revisions(stack);
    const cold = await sessionToStolen(stack);
    await lingering(stack);
    const idleAgentRps = await appRps(east, rpsRequests);
    const r1 = await revisions(stack);
    const { phases: warm, baseline: warmBaseline } = await sideBySide(
      n,
      () => sessionToStolen(stack),
      baselineCli
        ? async () => {
            await lingering(stack);
            return sessionToStolen(stack, undefined, undefined, baselineCli);
          }
        : undefined,
    );
    await lingering(stack);
    const r2 = await revisions(stack);
    await removeAgents(stack);
    const r3 = await revisions(stack);
    const coldRollouts = Object.fromEntries(
      Object.entries(delta(r0, r1)).map(([c, n]) => [c, n + delta(r2, r3)[c]!]),
    );
    const row = {
      cold,
      warm,
      ...(warmBaseline ? { warmBaseline } : {}),
      coldRollouts,
      warmRollouts: delta(r1, r2),
      noAgentRps,
      idleAgentRps,
    };
    rows.push(row);
    console.log(
      `round ${n}/${rounds}: cold exec → created ${sec(cold.created)}, Ready ${sec(cold.ready)}, app ` +
        `${sec(cold.appReady)}, stolen in both ${sec(cold.stolen)} (${JSON.stringify(coldRollouts)} rollouts); warm ` +
        `created ${sec(warm.created)}, Ready ${sec(warm.ready)}, app ${sec(warm.appReady)}, stolen ${sec(warm.stolen)} ` +
        `(${JSON.stringify(row.warmRollouts)}); app ${Math.round(noAgentRps)} req/s without ` +
        `an agent, ${Math.round(idleAgentRps)} with an idle one` +
        (warmBaseline
          ? `; warm with the baseline CLI: created ${sec(warmBaseline.created)}, Ready ${sec(warmBaseline.ready)}, ` +
            `app ${sec(warmBaseline.appReady)}, stolen ${sec(warmBaseline.stolen)}`
          : ""),
    );
  }
  const phasesS = (p: StartPhases) =>
    Object.fromEntries(Object.entries(p).map(([k, ms]) => [k, round(ms / 1000, 2)]));
  const phaseDist = (ps: StartPhases[]) =>
    Object.fromEntries(
      (["created", "ready", "appReady", "stolen"] as const).map((k) => [
        k,
        round(
          pct(
            ps.map((p) => p[k]),
            50,
          ) / 1000,
          2,
        ),
      ]),
    );
  // Unrounded: goals are decided on them (support/goal.ts); printing rounds.
  const dist = (xs: number[]) => ({ p50: pct(xs, 50) / 1000, p90: pct(xs, 90) / 1000 });
  const maxOf = (pick: (r: LingerRound) => Record<string, number>) =>
    Math.max(...rows.flatMap((r) => Object.values(pick(r))));
  const minOf = (pick: (r: LingerRound) => Record<string, number>) =>
    Math.min(...rows.flatMap((r) => Object.values(pick(r))));
  const none = rows.map((r) => r.noAgentRps!);
  const idle = rows.map((r) => r.idleAgentRps!);
  return {
    rounds: rows.map((r) => ({
      ...r,
      cold: phasesS(r.cold),
      warm: phasesS(r.warm),
      ...(r.warmBaseline ? { warmBaseline: phasesS(r.warmBaseline) } : {}),
      noAgentRps: Math.round(r.noAgentRps!),
      idleAgentRps: Math.round(r.idleAgentRps!),
    })),
    coldS: dist(rows.map((r) => r.cold.stolen)),
    warmS: dist(rows.map((r) => r.warm.stolen)),
    coldPhasesS: phaseDist(rows.map((r) => r.cold)),
    warmPhasesS: phaseDist(rows.map((r) => r.warm)),
    ...(baselineCli
      ? {
          baseline: {
            cli: baselineCli,
            warmS: dist(rows.map((r) => r.warmBaseline!.stolen)),
            warmPhasesS: phaseP50s(rows.map((r) => r.warmBaseline!)),
          },
        }
      : {}),
    coldRollouts: { min: minOf((r) => r.coldRollouts), max: maxOf((r) => r.coldRollouts) },
    warmRollouts: { min: minOf((r) => r.warmRollouts), max: maxOf((r) => r.warmRollouts) },
    rps: {
      requests: rpsRequests,
      noAgent: Math.round(pct(none, 50)),
      idleAgent: Math.round(pct(idle, 50)),
      ratio: pct(idle, 50) / pct(none, 50),
    },
  };
}
