// Leader failover of the control plane's Lease election against a real API server: two
// LeaseElectors campaign for one Lease, the leader is stopped, and the time from the stop
// to the other replica leading is measured. Two kinds of stop take turns in every round, so
// drift hits both alike: a crash (the Lease is not released; the successor must see it
// unchanged for a whole lease duration) and a clean stop (the Lease is released). The goal
// is the crash case's median: lease duration (3 s) + a few retry periods (0.25 s) + an
// API call or two, at most 6 s. The timings are the ones the integration test uses.
import { CoreV1Api } from "@kubernetes/client-node";
import { LeaseElector } from "../../control-plane/src/leader/lease-elector.js";
import { startClusterSet } from "../../test/env/index.js";
import { eventually } from "../../test/support/poll.js";
import { printGoals } from "../support/goal.js";
import { round, summary, writeResult } from "../support/stats-support.js";

export interface FailoverBenchOptions {
  /** Rounds; each measures one crash and one clean stop. */
  runs: number;
  /** Lease timings in ms, as LeaseElectorOptions. */
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** The goal for the crash case's median, in ms. */
  goalMs: number;
}

export const defaultFailoverBench: FailoverBenchOptions = {
  runs: 10,
  leaseDurationMs: 3_000,
  renewDeadlineMs: 2_000,
  retryPeriodMs: 250,
  goalMs: 6_000,
};

const NAMESPACE = "switchyard";

export async function runFailoverBench(o: FailoverBenchOptions = defaultFailoverBench): Promise<void> {
  const set = await startClusterSet({ clusters: ["primary"], controllerManager: false });
  try {
    const kc = set.get("primary").kubeConfig();
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });

    /** One failover on a fresh Lease: ms from stopping the leader to the other leading. */
    const failover = async (lease: string, crash: boolean): Promise<number> => {
      const led = new Map<string, number>();
      const mk = (identity: string) =>
        new LeaseElector({
          kubeConfig: kc,
          namespace: NAMESPACE,
          name: lease,
          identity,
          leaseDurationMs: o.leaseDurationMs,
          renewDeadlineMs: o.renewDeadlineMs,
          retryPeriodMs: o.retryPeriodMs,
          releaseOnStop: !crash,
          onStartedLeading: () => led.set(identity, performance.now()),
        });
      const a = mk("replica-a");
      const b = mk("replica-b");
      const stopA = new AbortController();
      const stopB = new AbortController();
      const runA = a.start(stopA.signal);
      const runB = b.start(stopB.signal);
      try {
        const first = await eventually("a leader", () => (a.isLeader() ? a : b.isLeader() ? b : undefined));
        const [other, stopFirst, runFirst] = first === a ? [b, stopA, runA] : [a, stopB, runB];
        const successor = first === a ? "replica-b" : "replica-a";
        // Let the leader renew a few times, as a long-running one would have.
        await new Promise((r) => setTimeout(r, 4 * o.retryPeriodMs));
        const stoppedAt = performance.now();
        stopFirst.abort();
        await runFirst;
        await eventually("failover", () => other.isLeader(), { timeoutMs: 60_000, intervalMs: 10 });
        return led.get(successor)! - stoppedAt;
      } finally {
        stopA.abort();
        stopB.abort();
        await Promise.all([runA, runB]);
      }
    };

    const crash: number[] = [];
    const clean: number[] = [];
    for (let i = 0; i < o.runs; i++) {
      crash.push(await failover(`failover-bench-${i}-crash`, true));
      clean.push(await failover(`failover-bench-${i}-clean`, false));
      console.log(
        `round ${i + 1}/${o.runs}: crash ${(crash.at(-1)! / 1000).toFixed(2)} s, clean stop ${(clean.at(-1)! / 1000).toFixed(2)} s`,
      );
    }
    const seconds = (xs: number[]) => summary(xs.map((x) => x / 1000));
    const result = {
      at: new Date().toISOString(),
      options: o,
      crashSeconds: seconds(crash),
      cleanStopSeconds: seconds(clean),
      crashRuns: crash.map((x) => round(x / 1000)),
      cleanStopRuns: clean.map((x) => round(x / 1000)),
    };
    console.log(
      `leader crash -> successor leads (lease ${o.leaseDurationMs / 1000} s, retry ${o.retryPeriodMs / 1000} s):`,
      result.crashSeconds,
    );
    console.log("leader clean stop (Lease released) -> successor leads:", result.cleanStopSeconds);
    console.log(`written ${writeResult("failover", result)}`);
    const p50 = result.crashSeconds.p50;
    printGoals([{ name: "leader-failover-p50", value: p50, op: "<=", target: o.goalMs / 1000, unit: "s" }]);
  } finally {
    await set.stop();
  }
}
