// Pods born with the agent, on real pods, in the same run as the linger rounds: an opted-in
// Deployment `born` (test/env/stack/born-workloads.ts) whose pods the members' admission webhook gave
// the agent when the ReplicaSet controller created them. Each round is a first session on it
// (no session ever patched it): exec → the first stolen request through every cluster's `born`
// NodePort, then Ctrl-C. Rollouts are counted from what one would change: the Deployment's
// revision, its ReplicaSets, its pods' uids and restart counts.
import { AppsV1Api } from "@kubernetes/client-node";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import {
  allBornAndReady,
  BORN_DEPLOYMENT,
  BORN_NODE_PORT,
  BORN_STATEFULSET,
  bornState,
  createBornWorkloads,
} from "../../test/env/stack/born-workloads.js";
import { eventually } from "../../test/support/poll.js";
import { phaseP50s, sessionToStolen, sideBySide, type StartPhases } from "./pods-linger.js";
import { kc, sec, WAIT } from "./pods-support.js";
import { pct, round } from "../support/stats-support.js";

const REVISION = "deployment.kubernetes.io/revision";

/** What a rollout or restart of `born` would change in `cluster`, as one comparable string. */
async function fingerprint(stack: PodStack, cluster: string): Promise<string> {
  const k = kc(stack, cluster);
  const d = await k
    .makeApiClient(AppsV1Api)
    .readNamespacedDeployment({ name: BORN_DEPLOYMENT, namespace: "default" });
  const s = await bornState(k);
  return JSON.stringify({ revision: d.metadata?.annotations?.[REVISION], ...s.deployment });
}

export async function bornSessions(stack: PodStack, rounds: number, baselineCli?: string) {
  const clusters = Object.keys(stack.workloads);
  for (const c of clusters) await createBornWorkloads(kc(stack, c), c);
  for (const c of clusters)
    await eventually(
      `${c}'s born pods, each with the agent and Ready`,
      async () =>
        (await allBornAndReady(kc(stack, c), BORN_DEPLOYMENT, 2)) &&
        (await allBornAndReady(kc(stack, c), BORN_STATEFULSET, 1)),
      WAIT,
    );
  const url = (c: string) => `http://${stack.workloads[c]!.nodeIp}:${BORN_NODE_PORT}`;
  const rows: Array<{ phases: StartPhases; baseline?: StartPhases; changed: string[] }> = [];
  const target = `deployment/${BORN_DEPLOYMENT}`;
  for (let n = 1; n <= rounds; n++) {
    const before = await Promise.all(clusters.map((c) => fingerprint(stack, c)));
    const { phases, baseline } = await sideBySide(
      n,
      () => sessionToStolen(stack, target, url),
      baselineCli ? () => sessionToStolen(stack, target, url, baselineCli) : undefined,
    );
    const after = await Promise.all(clusters.map((c) => fingerprint(stack, c)));
    const changed = clusters.filter((_, i) => before[i] !== after[i]);
    rows.push({ phases, ...(baseline ? { baseline } : {}), changed });
    console.log(
      `born round ${n}/${rounds}: first session exec → created ${sec(phases.created)}, Ready ${sec(phases.ready)}, ` +
        `app ${sec(phases.appReady)}, stolen in all ${sec(phases.stolen)}; rolled out or restarted in: ` +
        `${changed.length === 0 ? "none" : changed.join(", ")}` +
        (baseline
          ? `; with the baseline CLI: created ${sec(baseline.created)}, Ready ${sec(baseline.ready)}, ` +
            `app ${sec(baseline.appReady)}, stolen ${sec(baseline.stolen)}`
          : ""),
    );
  }
  // Unrounded: goals are decided on them (support/goal.ts); printing rounds.
  const p50Of = (ms: number[]) => pct(ms, 50) / 1000;
  const p50 = (k: keyof StartPhases) => p50Of(rows.map((r) => r.phases[k]));
  return {
    rounds: rows.map((r) => ({
      ...Object.fromEntries(Object.entries(r.phases).map(([k, ms]) => [k, round(ms / 1000, 2)])),
      changed: r.changed,
    })),
    stolenS: {
      p50: p50("stolen"),
      p90:
        pct(
          rows.map((r) => r.phases.stolen),
          90,
        ) / 1000,
    },
    phasesS: {
      created: p50("created"),
      ready: p50("ready"),
      appReady: p50("appReady"),
      stolen: p50("stolen"),
    },
    ...(baselineCli
      ? {
          baseline: {
            cli: baselineCli,
            stolenS: {
              p50: p50Of(rows.map((r) => r.baseline!.stolen)),
              p90: round(
                pct(
                  rows.map((r) => r.baseline!.stolen),
                  90,
                ) / 1000,
                2,
              ),
            },
            phasesS: phaseP50s(rows.map((r) => r.baseline!)),
          },
        }
      : {}),
    /** Rounds × clusters in which the session changed the workload's pods or ReplicaSets. */
    rollouts: rows.reduce((n, r) => n + r.changed.length, 0),
  };
}
