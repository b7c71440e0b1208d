// Chaos scenario 1: sessions initialising while the Primary's control-plane leader pod is
// deleted. `sessions` sessions on deployment/demo are opened at once with the SDK, as the CLI
// opens them (the developer's kubeconfig, the Primary routers through their NodePort); the
// moment every one exists on the Primary — injection and rollouts not done yet — the pod
// holding the control-plane Lease is deleted. Each session then must become Ready under the
// new leader, connect, and take its own requests: a steal filtered on header
// `x-chaos-session: s<i>` (distinct filters coexist on one port), answered by the session
// itself, through east's and west's demo NodePorts. A session that never got there within the
// deadline is lost, with the reason.
import { openSession, type Session } from "../../cli/src/sdk/kube/open-session.js";
import { parseHeaderFlag } from "../../cli/src/sdk/session/http-filter.js";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { eventually } from "../../test/support/poll.js";
import { servedBy } from "./chaos-exec.js";
import { controlPlaneLeader, deletePrimaryPod, primaryPodGone, waitQuiet } from "./chaos-stack.js";
import { round } from "../support/stats-support.js";

export interface LeaderKillOptions {
  sessions: number;
  /** How long each session may take to become Ready, then to steal in both clusters (ms each). */
  readyTimeoutMs: number;
  stealTimeoutMs: number;
}

export interface LeaderKillResult {
  sessions: number;
  leaderPod: string;
  /** All sessions created → leader pod deleted, ms. */
  createdToKillMs: number;
  /** Leader pod deleted → another pod holds the Lease, s (undefined: not within the wait). */
  newLeaderAfterS: number | undefined;
  /** Per session: created → Ready and connected, and → stealing in both clusters, s. */
  readyS: (number | undefined)[];
  stealingS: (number | undefined)[];
  lost: number;
  lostReasons: string[];
  /** All sessions closed → no session left and both demos restored (false: not in time). */
  restored: boolean;
}

const HEADER = "x-chaos-session";

export async function sessionsThroughLeaderKill(
  stack: PodStack,
  o: LeaderKillOptions,
): Promise<LeaderKillResult> {
  const leader = await controlPlaneLeader(stack);
  const kc = stack.developer.kubeConfig();
  const createdAt: (number | undefined)[] = Array.from({ length: o.sessions }, (): undefined => undefined);
  let settled = 0;
  let allCreated!: () => void;
  const everyCreate = new Promise<void>((r) => (allCreated = r));
  const createSettled = () => {
    if (++settled === o.sessions) allCreated();
  };
  const none = () => Array.from({ length: o.sessions }, (): undefined => undefined);
  const opened: (Session | undefined)[] = none();
  const readyS: (number | undefined)[] = none();
  const stealingS: (number | undefined)[] = none();
  const lostReasons: string[] = [];
  const opens = Array.from({ length: o.sessions }, (_, i) =>
    openSession({
      kubeConfig: kc,
      target: "deployment/demo",
      namespace: "default",
      routerUrls: [stack.routerEndpoint],
      routerCaPem: stack.caPem,
      readyTimeoutMs: o.readyTimeoutMs,
      onCreated: () => {
        createdAt[i] = performance.now();
        createSettled();
      },
    }).then(
      (s) => {
        opened[i] = s;
        readyS[i] = round((performance.now() - createdAt[i]!) / 1000, 2);
        s.client.on("lost", (err) =>
          lostReasons.push(`s${i} (${s.id}) lost its router connection: ${err.message}`),
        );
        return s;
      },
      (err: unknown) => {
        if (createdAt[i] === undefined) createSettled();
        lostReasons.push(`s${i}: ${(err as Error).message}`);
        return undefined;
      },
    ),
  );
  await everyCreate;
  const lastCreated = Math.max(...createdAt.map((t) => t ?? 0));
  await deletePrimaryPod(stack, leader.pod);
  const killAt = performance.now();
  const newLeader = eventually(
    "another control-plane pod to hold the Lease",
    async () => {
      const l = await controlPlaneLeader(stack);
      return l.pod !== leader.pod ? performance.now() : undefined;
    },
    { timeoutMs: o.readyTimeoutMs, intervalMs: 100 },
  ).catch(() => undefined);
  try {
    const sessions = await Promise.all(opens);
    await Promise.all(
      sessions.map(async (s, i) => {
        if (!s) return;
        try {
          s.client.on("httpRequest", (r) =>
            r.respond({ status: 200, headers: [{ name: "x-served-by", value: `s${i}` }] }),
          );
          await s.client.subscribe(8080, "steal", { header: parseHeaderFlag(`${HEADER}: s${i}`) });
          await Promise.all(
            Object.values(stack.workloads).map((w) =>
              eventually(
                `session s${i} to take its requests through ${w.name}`,
                async () => (await servedBy(`${w.demoUrl}/s${i}`, 2000, { [HEADER]: `s${i}` })) === `s${i}`,
                { timeoutMs: o.stealTimeoutMs, intervalMs: 200 },
              ),
            ),
          );
          stealingS[i] = round((performance.now() - createdAt[i]!) / 1000, 2);
        } catch (err) {
          lostReasons.push(`s${i} (${s.id}) Ready but not stealing: ${(err as Error).message}`);
        }
      }),
    );
  } finally {
    await Promise.all(opened.map((s) => s?.close("chaos bench done").catch(() => {})));
  }
  const leaderAt = await newLeader;
  await eventually("the deleted leader pod to be gone", () => primaryPodGone(stack, leader.pod), {
    timeoutMs: 60_000,
    intervalMs: 500,
  }).catch(() => {});
  const lost = Array.from({ length: o.sessions }, (_, i) => i).filter(
    (i) => stealingS[i] === undefined,
  ).length;
  return {
    sessions: o.sessions,
    leaderPod: leader.pod,
    createdToKillMs: round(killAt - lastCreated, 1),
    newLeaderAfterS: leaderAt === undefined ? undefined : round((leaderAt - killAt) / 1000, 2),
    readyS,
    stealingS,
    lost,
    lostReasons,
    restored: await waitQuiet(stack, 180_000),
  };
}
