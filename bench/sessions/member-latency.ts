// Member-mode latencies on loopback with one real API server (east) and the member
// controller in this process, with real process agents:
//   first:  ClusterSession create -> Ready, the first session on a target (includes
//           starting its process agent);
//   reuse:  create -> Ready when the target's agent already runs;
//   push:   the session's table published in the snapshot cache -> applied by a router
//           over RouteDiscovery gRPC (the table is published before Ready is written).
// The goal is reuse's median: create -> Ready within 1 s once the agent runs (agent start
// excluded). Uses the member suite's harness (test/integration/member/member-harness.ts).
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { clusterSessionClient } from "../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../control-plane/src/runtime/index.js";
import { ProcessAgentProvisioner } from "../../control-plane/src/member/index.js";
import { runPods, startClusterSet } from "../../test/env/index.js";
import {
  removeTempDirs,
  startMember,
  startRouteDiscovery,
  tempDir,
} from "../../test/integration/member/member-harness.js";
import { eventually } from "../../test/support/poll.js";
import { printGoals } from "../support/goal.js";
import { summary, writeResult } from "../support/stats-support.js";

export interface MemberLatencyBenchOptions {
  /** Targets; each gets one first session and one reuse session. */
  sessions: number;
  /** The goal for reuse create -> Ready (median), in ms. */
  reuseGoalMs: number;
}

export const defaultMemberLatencyBench: MemberLatencyBenchOptions = { sessions: 10, reuseGoalMs: 1_000 };

const NS = "latency";

export async function runMemberLatencyBench(
  o: MemberLatencyBenchOptions = defaultMemberLatencyBench,
): Promise<void> {
  const set = await startClusterSet({ clusters: ["east"], controllerManager: true });
  const kc = set.get("east").kubeConfig();
  const provisioner = new ProcessAgentProvisioner({
    kubeconfigPath: set.get("east").adminKubeconfigPath,
    stateDir: tempDir("sy-latency-"),
  });
  try {
    await installCrds(kc);
    const core = kc.makeApiClient(CoreV1Api);
    const apps = kc.makeApiClient(AppsV1Api);
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await eventually("default SA", () =>
      core.readNamespacedServiceAccount({ namespace: NS, name: "default" }).then(() => true),
    );
    const m = startMember(kc, provisioner);
    const router = await startRouteDiscovery(m.routes);
    const sessions = clusterSessionClient(kc);
    const first: number[] = [];
    const reuse: number[] = [];
    const route: number[] = [];
    const published = new Map<string, number>();
    m.routes.onChange((v) => published.set(v, performance.now()));
    router.sink.onApply = (v) => {
      const t = published.get(v);
      if (t !== undefined) route.push(performance.now() - t);
    };
    const readyAt = async (name: string, t0: number) => {
      await eventually(
        "Ready",
        async () => (await sessions.get({ namespace: NS, name }))?.status?.phase === "Ready",
        { timeoutMs: 60_000, intervalMs: 5 },
      );
      return performance.now() - t0;
    };
    for (let i = 0; i < o.sessions; i++) {
      const app = `app${i}`;
      await apps.createNamespacedDeployment({
        namespace: NS,
        body: {
          metadata: { name: app },
          spec: {
            replicas: 1,
            selector: { matchLabels: { app } },
            template: {
              metadata: { labels: { app } },
              spec: {
                automountServiceAccountToken: false,
                containers: [{ name: "app", image: "x", ports: [{ containerPort: 8080 }] }],
              },
            },
          },
        },
      });
      await runPods(kc, NS, `app=${app}`, 1);
      const spec = { target: `deployment/${app}`, clientKeyHash: "ab".repeat(32) };
      let t0 = performance.now();
      await sessions.create({ metadata: { name: `first-${i}`, namespace: NS }, spec });
      first.push(await readyAt(`first-${i}`, t0));
      t0 = performance.now();
      await sessions.create({ metadata: { name: `reuse-${i}`, namespace: NS }, spec });
      reuse.push(await readyAt(`reuse-${i}`, t0));
    }
    await router.stop();
    await m.stop();
    const result = {
      at: new Date().toISOString(),
      options: o,
      firstMs: summary(first),
      reuseMs: summary(reuse),
      publishToRouterMs: summary(route),
    };
    console.log("create -> Ready, first session (with agent start):", result.firstMs);
    console.log("create -> Ready, agent already running:", result.reuseMs);
    console.log("published -> applied by the router:", result.publishToRouterMs);
    console.log(`written ${writeResult("member-latency", result)}`);
    const p50 = result.reuseMs.p50;
    printGoals([
      {
        name: "member-reuse-ready-p50",
        value: p50 / 1000,
        op: "<=",
        target: o.reuseGoalMs / 1000,
        unit: "s",
        digits: 3,
      },
    ]);
  } finally {
    await provisioner.stopAll();
    await set.stop();
    removeTempDirs();
  }
}
