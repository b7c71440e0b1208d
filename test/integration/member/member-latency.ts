// Measures member-mode latencies on loopback with a real API server (not a test: timing
// goals live in benchmarks). Run: `npx tsx test/integration/member/member-latency.ts [n]`.
//   first:  ClusterSession create → Ready, first session on a target (includes starting a process agent)
//   reuse:  create → Ready when the target's agent already runs (the ≤ 1 s goal excludes agent start)
//   push:   the session's table published in the snapshot cache → applied by a router over
//           RouteDiscovery gRPC (the table is published before Ready is written)
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { clusterSessionClient } from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { ProcessAgentProvisioner } from "../../../control-plane/src/member/index.js";
import { runPods, startClusterSet } from "../../env/index.js";
import { startMember, startRouteDiscovery, tempDir } from "./member-harness.js";
import { eventually } from "../../support/poll.js";

const n = Number(process.argv[2] ?? 10);
const NS = "latency";
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
  for (let i = 0; i < n; i++) {
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
  const pct = (xs: number[], p: number) =>
    [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!.toFixed(1);
  for (const [name, xs] of [
    ["first (with agent start)", first],
    ["reuse (agent running)", reuse],
    ["publish → router applied", route],
  ] as const) {
    console.log(
      `${name}: n=${xs.length} p50=${pct(xs, 0.5)} ms p99=${pct(xs, 0.99)} ms max=${Math.max(...xs).toFixed(1)} ms`,
    );
  }
  await router.stop();
  await m.stop();
} finally {
  await provisioner.stopAll();
  await set.stop();
}
