// Member mode against a real kube-apiserver with kube-controller-manager (real
// Deployments → ReplicaSets → Pods; the test plays the kubelet). Covers target
// resolution and its conditions, the process provisioner with the real agent and the
// routing table reaching a router over the real RouteDiscovery gRPC stream, pod
// replacement, restart recovery, the sidecar patch and its exact restore, and the
// child's own TTL.
import { createHash } from "node:crypto";
import {
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1Deployment,
} from "@kubernetes/client-node";
import { WebSocket } from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clusterSessionClient,
  LABELS,
  type ClusterSession,
  type ClusterSessionSpec,
} from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import {
  AGENT_CONTAINER,
  agentSecretName,
  MEMBER_FINALIZER,
  ORIGINAL_TEMPLATE_ANNOTATION,
  ProcessAgentProvisioner,
  type AgentProvisioner,
  SidecarAgentProvisioner,
} from "../../../control-plane/src/member/index.js";
import type { ControllerMetrics } from "../../../control-plane/src/runtime/index.js";
import { SessionState } from "../../../proto/gen/route_discovery_pb.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import { markPodRunning, runPods, startClusterSet, type ClusterSet } from "../../env/index.js";
import {
  ROUTER_ENDPOINT,
  removeTempDirs,
  startMember,
  startRouteDiscovery,
  tempDir,
} from "./member-harness.js";
import { eventually } from "../../support/poll.js";

const NS = "member-tests";
const HASH = createHash("sha256").update("client-secret").digest("hex");
let set: ClusterSet;
let kc: KubeConfig;
let kubeconfigPath: string;
let apps: AppsV1Api;
let core: CoreV1Api;
const sessions = () => clusterSessionClient(kc);
/** A session's key in routing tables and URLs. */
const key = (name: string) => sessionKey(NS, name);

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"], controllerManager: true });
  const east = set.get("east");
  kc = east.kubeConfig();
  kubeconfigPath = east.adminKubeconfigPath;
  apps = kc.makeApiClient(AppsV1Api);
  core = kc.makeApiClient(CoreV1Api);
  await installCrds(kc);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await eventually("the default ServiceAccount", () =>
    core.readNamespacedServiceAccount({ namespace: NS, name: "default" }).then(() => true),
  );
});

afterAll(async () => {
  await set?.stop();
  removeTempDirs();
});

async function createDeployment(name: string, replicas = 1): Promise<V1Deployment> {
  return apps.createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name },
      spec: {
        replicas,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: {
            automountServiceAccountToken: false,
            containers: [{ name: "app", image: "example.test/app:1", ports: [{ containerPort: 8080 }] }],
          },
        },
      },
    },
  });
}

async function createSession(
  name: string,
  spec: Partial<ClusterSessionSpec> & { target: string },
  labels = {},
) {
  return sessions().create({
    metadata: { name, namespace: NS, labels },
    spec: { clientKeyHash: HASH, ...spec },
  });
}

const get = (name: string) => sessions().get({ namespace: NS, name });
const readyCondition = (s: ClusterSession | undefined) =>
  s?.status?.conditions?.find((c) => c.type === "Ready");

/** Reconciles finished so far (any result), from the controller's metrics. */
async function reconciles(metrics: ControllerMetrics): Promise<number> {
  const text = await metrics.registry.metrics();
  return [...text.matchAll(/^switchyard_reconcile_duration_seconds_count\{[^}]*\} (\d+)$/gm)].reduce(
    (a, m) => a + Number(m[1]),
    0,
  );
}

async function gone(name: string): Promise<void> {
  await eventually(`session ${name} to be gone`, async () => (await get(name)) === undefined);
}

/** Opens a WebSocket to an agent upstream and reports the upgrade status. */
function upgradeStatus(url: string, secret: string): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${secret}` } });
    ws.once("open", () => {
      ws.close();
      resolve(101);
    });
    ws.once("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once("error", () => resolve(-1));
  });
}

describe("member mode with process agents", () => {
  it("resolves targets, reports conditions, serves through a real agent and recovers after a restart", async () => {
    const stateDir = tempDir("sy-member-");
    const provisioner = new ProcessAgentProvisioner({ kubeconfigPath, stateDir });
    let m = startMember(kc, provisioner);
    const router = await startRouteDiscovery(m.routes);
    try {
      // Single-cluster session (no parent) on a target that does not exist yet.
      await createSession("solo", { target: "deployment/api" });
      const failed = await eventually("TargetNotFound", async () => {
        const s = await get("solo");
        return s?.status?.phase === "Failed" && s;
      });
      expect(readyCondition(failed)).toMatchObject({ status: "False", reason: "TargetNotFound" });
      expect(readyCondition(failed)!.message).toContain("deployment api not found in namespace member-tests");
      expect(failed.metadata.finalizers).toContain(MEMBER_FINALIZER);
      // The table was complete (one session, reconciled once), so the router got a snapshot.
      await eventually("the first push", () => router.client.version() !== "");
      expect(router.sink.table.has(key("solo"))).toBe(false);

      // The deployment appears; its pod is not running yet.
      await createDeployment("api");
      const pending = await eventually("NoReadyPod", async () => {
        const s = await get("solo");
        return s?.status?.phase === "Pending" && readyCondition(s)?.reason === "NoReadyPod" && s;
      });
      expect(readyCondition(pending)!.message).toContain("no Running and Ready pod");
      await eventually(
        "a CREATING route",
        () => router.sink.table.get(key("solo"))?.state === SessionState.CREATING,
      );

      // The kubelet starts the pod: an agent is started for it and the session is Ready.
      const [pod1] = await runPods(kc, NS, "app=api", 1);
      const ready = await eventually("Ready", async () => {
        const s = await get("solo");
        return s?.status?.phase === "Ready" && s;
      });
      expect(ready.status).toMatchObject({
        gateway: `${ROUTER_ENDPOINT}/v1/sessions/${NS}:solo`,
        pod: { name: pod1!.metadata!.name, container: "app" },
        agents: 1,
      });
      const route = await eventually("a READY route on the router", () => {
        const r = router.sink.table.get(key("solo"));
        return r?.state === SessionState.READY && r;
      });
      expect(route.clientKeyHash).toBe(HASH);
      expect(route.upstreams).toHaveLength(1);
      const up = route.upstreams[0]!;
      expect(up.isDefault).toBe(true);
      expect(up.cluster).toBe(pod1!.metadata!.name);
      expect(up.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/v1\/sessions\/member-tests:solo$/);
      // The agent accepts exactly the secret in the table; the Secret holds it; the agent only has its hash.
      expect(await upgradeStatus(up.url, up.secret)).toBe(101);
      expect(await upgradeStatus(up.url, "not-the-secret")).toBe(401);
      const secretObj = await core.readNamespacedSecret({
        namespace: NS,
        name: agentSecretName(`${NS}/deployment/api`),
      });
      expect(Buffer.from(secretObj.data!.secret!, "base64").toString()).toBe(up.secret);
      const [record] = provisioner.records();
      expect(record).toMatchObject({
        podName: pod1!.metadata!.name,
        secretHash: createHash("sha256").update(up.secret).digest("hex"),
      });

      // The pod goes away; the ReplicaSet makes another; the session follows it.
      await core.deleteNamespacedPod({ namespace: NS, name: pod1!.metadata!.name! });
      const pod2 = await eventually("a replacement pod", async () => {
        const list = await core.listNamespacedPod({ namespace: NS, labelSelector: "app=api" });
        return list.items.find(
          (p) => p.metadata!.name !== pod1!.metadata!.name && !p.metadata!.deletionTimestamp,
        );
      });
      await markPodRunning(kc, NS, pod2.metadata!.name!);
      await eventually(
        "the session on the new pod",
        async () => (await get("solo"))?.status?.pod?.name === pod2.metadata!.name,
      );
      await eventually(
        "the router on the new agent",
        () => router.sink.table.get(key("solo"))?.upstreams[0]?.cluster === pod2.metadata!.name,
      );
      // Single-cluster mode: routers' live-session reports renew the session (no Primary does).
      expect((await get("solo"))!.status!.renewedAt).toBeUndefined();
      // Reports name session keys: a bare name, or the same name in another namespace, renews nothing.
      await m.member.observeLiveSessions(["solo", "elsewhere:solo"]);
      expect((await get("solo"))!.status!.renewedAt).toBeUndefined();
      await m.member.observeLiveSessions([key("solo")]);
      expect(Date.parse((await get("solo"))!.status!.renewedAt!)).toBeGreaterThan(Date.now() - 60_000);
      const before = router.sink.table.get(key("solo"))!;
      const pidBefore = provisioner.records()[0]!.pid;

      // Restart: a new control plane (new cache, new provisioner on the same state) adopts the agent.
      await m.stop();
      const provisioner2 = new ProcessAgentProvisioner({ kubeconfigPath, stateDir });
      m = startMember(kc, provisioner2);
      await eventually("the rebuilt table", () => m.routes.ready() && m.routes.get(key("solo")));
      const rebuilt = m.routes.get(key("solo"))!;
      expect(rebuilt.upstreams.map((u) => [u.url, u.secret, u.isDefault])).toEqual(
        before.upstreams.map((u) => [u.url, u.secret, u.isDefault]),
      );
      expect(provisioner2.records()[0]!.pid).toBe(pidBefore);

      // The adopted agent dies on its own: the member notices (not at the next resync, a
      // minute away) and the session moves to a new agent.
      process.kill(pidBefore, "SIGKILL");
      const replacement = await eventually("a replacement agent", () => {
        const r = provisioner2.records()[0];
        return r && r.pid !== pidBefore && r;
      });
      await eventually(
        "the route on the replacement agent",
        () =>
          m.routes.get(key("solo"))?.upstreams[0]?.url ===
          `ws://127.0.0.1:${replacement.port}/v1/sessions/${key("solo")}`,
      );
      const pidReplacement = replacement.pid;

      // The session ends: agent stopped, Secret deleted, table gone, object released.
      await sessions().delete({ namespace: NS, name: "solo" });
      await gone("solo");
      expect(provisioner2.records()).toEqual([]);
      expect(() => process.kill(pidReplacement, 0)).toThrow();
      await expect(
        core.readNamespacedSecret({ namespace: NS, name: agentSecretName(`${NS}/deployment/api`) }),
      ).rejects.toMatchObject({ code: 404 });
      expect(m.routes.get(key("solo"))).toBeUndefined();
    } finally {
      await m.stop();
      await router.stop();
      await provisioner.stopAll();
    }
  });

  it("deletes a child whose Primary stopped renewing it, and keeps one that is renewed", async () => {
    const stateDir = tempDir("sy-member-ttl-");
    const provisioner = new ProcessAgentProvisioner({ kubeconfigPath, stateDir });
    let offsetMs = 0;
    const m = startMember(kc, provisioner, { now: () => Date.now() + offsetMs });
    try {
      await createDeployment("ttl");
      await runPods(kc, NS, "app=ttl", 1);
      const parent = "mc-00000000000000aa";
      const child = `${parent}-east`;
      await createSession(
        child,
        {
          target: "deployment/ttl",
          ttlSeconds: 60,
          parent: { name: parent, cluster: "east", primaryClusterId: "primary" },
        },
        { [LABELS.parent]: parent, [LABELS.primary]: "primary", [LABELS.cluster]: "east" },
      );
      await eventually("child Ready", async () => (await get(child))?.status?.phase === "Ready");
      expect(provisioner.records()).toHaveLength(1);

      // The Primary renews it; 40 s later (member clock) it is still within its TTL.
      await sessions().patchStatus({ namespace: NS, name: child }, { renewedAt: new Date().toISOString() });
      offsetMs = 40_000;
      const before = await reconciles(m.member.metrics);
      m.member.enqueue({ namespace: NS, name: child });
      await eventually(
        "a reconcile at the later time",
        async () => (await reconciles(m.member.metrics)) > before,
      );
      expect((await get(child))?.status?.phase).toBe("Ready");
      expect((await get(child))?.metadata.deletionTimestamp).toBeUndefined();

      // No renewal for longer than ttlSeconds: the member deletes it by itself and cleans up.
      offsetMs = 120_000;
      m.member.enqueue({ namespace: NS, name: child });
      await gone(child);
      expect(provisioner.records()).toEqual([]);
      expect(m.routes.get(key(child))).toBeUndefined();
    } finally {
      await m.stop();
      await provisioner.stopAll();
    }
  });

  it("makes sure of a target's agents once for a burst of sessions on it, and again when its agent dies", async () => {
    const stateDir = tempDir("sy-member-burst-");
    const provisioner = new ProcessAgentProvisioner({ kubeconfigPath, stateDir });
    let ensures = 0;
    const counting: AgentProvisioner = {
      mode: provisioner.mode,
      ensure: (input) => (ensures++, provisioner.ensure(input)),
      release: (target) => provisioner.release(target),
      watch: (onGone, signal) => provisioner.watch(onGone, signal),
    };
    const m = startMember(kc, counting);
    const names = Array.from({ length: 12 }, (_, i) => `burst-${i}`);
    try {
      await createDeployment("burst");
      await runPods(kc, NS, "app=burst", 1);
      await Promise.all(names.map((n) => createSession(n, { target: "deployment/burst" })));
      for (const n of names)
        await eventually(`${n} Ready`, async () => (await get(n))?.status?.phase === "Ready");
      // One ensure starts the agent; the sessions reconciled while it stands reuse it (a
      // check per session would be 12 or more).
      expect(ensures).toBeLessThan(names.length / 2);
      // Nor did each session's own finalizer and status writes wake the reconciler again.
      expect(m.member.reconciler.ownWrites.skipped).toBeGreaterThanOrEqual(names.length / 2);
      const [record] = provisioner.records();
      expect(provisioner.records()).toHaveLength(1);
      // The agent dies: the result is forgotten at once and every route moves to a new agent.
      const before = ensures;
      process.kill(record!.pid, "SIGKILL");
      const replacement = await eventually("a replacement agent", () => {
        const r = provisioner.records()[0];
        return r && r.pid !== record!.pid && r;
      });
      for (const n of names)
        await eventually(
          `${n} on the replacement agent`,
          () =>
            m.routes.get(key(n))?.upstreams[0]?.url ===
            `ws://127.0.0.1:${replacement.port}/v1/sessions/${key(n)}`,
        );
      expect(ensures).toBeGreaterThan(before);
    } finally {
      await Promise.all(
        names.map((n) =>
          sessions()
            .delete({ namespace: NS, name: n })
            .catch(() => undefined),
        ),
      );
      for (const n of names) await gone(n);
      await m.stop();
      await provisioner.stopAll();
    }
  });
});

describe("member mode with sidecar agents", () => {
  it("patches the workload (new ReplicaSet) and restores it exactly when the last session ends", async () => {
    await createDeployment("shop");
    await runPods(kc, NS, "app=shop", 1);
    const original = await apps.readNamespacedDeployment({ namespace: NS, name: "shop" });
    const originalTemplate = JSON.stringify(original.spec!.template);
    const replicaSets = async () =>
      (await apps.listNamespacedReplicaSet({ namespace: NS, labelSelector: "app=shop" })).items;
    const [originalRs] = await eventually("the original ReplicaSet", async () => {
      const rs = await replicaSets();
      return rs.length === 1 && rs;
    });
    const m = startMember(
      kc,
      new SidecarAgentProvisioner({
        kubeConfig: kc,
        agentImage: "example.test/switchyard-agent:1",
        redirectImage: "example.test/switchyard-iptables:1",
      }),
    );
    try {
      const parent = "mc-00000000000000bb";
      const child = `${parent}-east`;
      await createSession(
        child,
        { target: "deployment/shop", parent: { name: parent, cluster: "east", primaryClusterId: "primary" } },
        { [LABELS.parent]: parent, [LABELS.primary]: "primary", [LABELS.cluster]: "east" },
      );
      const patched = await eventually("the sidecar in the template", async () => {
        const d = await apps.readNamespacedDeployment({ namespace: NS, name: "shop" });
        return d.spec!.template.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER) && d;
      });
      expect(patched.metadata!.annotations![ORIGINAL_TEMPLATE_ANNOTATION]).toBeDefined();
      expect(patched.spec!.template.spec!.containers[0]).toEqual(original.spec!.template.spec!.containers[0]);
      const waiting = await eventually("AgentStarting", async () => {
        const s = await get(child);
        return readyCondition(s)?.reason === "AgentStarting" && s;
      });
      expect(waiting.status?.phase).toBe("Pending");
      // A new ReplicaSet rolls out the new template; the kubelet starts its pod.
      await eventually("a second ReplicaSet", async () => (await replicaSets()).length === 2);
      const newPod = await eventually("a pod with the agent", async () => {
        const list = await core.listNamespacedPod({ namespace: NS, labelSelector: "app=shop" });
        return list.items.find((p) => p.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER));
      });
      const running = await markPodRunning(kc, NS, newPod.metadata!.name!);
      const ready = await eventually("child Ready", async () => {
        const s = await get(child);
        return s?.status?.phase === "Ready" && s;
      });
      expect(ready.status!.pod).toMatchObject({ name: newPod.metadata!.name, ip: running.status!.podIP });
      expect(m.routes.get(key(child))!.upstreams.map((u) => u.url)).toEqual([
        `ws://${running.status!.podIP}:9440/v1/sessions/${key(child)}`,
      ]);

      // A second replica: one upstream per agent, the resolved pod's agent stays the default.
      await apps.patchNamespacedDeploymentScale(
        { namespace: NS, name: "shop", body: { spec: { replicas: 2 } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      const second = await eventually("a second pod with the agent", async () => {
        const list = await core.listNamespacedPod({ namespace: NS, labelSelector: "app=shop" });
        return list.items.find(
          (p) =>
            p.metadata!.name !== newPod.metadata!.name &&
            !p.metadata!.deletionTimestamp &&
            p.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER),
        );
      });
      await markPodRunning(kc, NS, second.metadata!.name!);
      const two = await eventually("two upstreams", () => {
        const r = m.routes.get(key(child));
        return r?.upstreams.length === 2 && r;
      });
      expect(two.upstreams.filter((u) => u.isDefault).map((u) => u.cluster)).toEqual([newPod.metadata!.name]);
      expect(new Set(two.upstreams.map((u) => u.secret)).size).toBe(1);
      await eventually("agents: 2 in status", async () => (await get(child))?.status?.agents === 2);
      const route = m.routes.get(key(child))!;

      // The node controller takes Ready from both pods (their kubelet unheard), containers
      // still ready: the agents stay — the first only for what is left of its grace (8 s).
      await markPodRunning(kc, NS, newPod.metadata!.name!, { nodeNotReadyForMs: 52_000 });
      await markPodRunning(kc, NS, second.metadata!.name!, { nodeNotReadyForMs: 0 });
      // The kubelet reports the second's containers unready: that one goes at once.
      await markPodRunning(kc, NS, second.metadata!.name!, { ready: false });
      const held = await eventually("one agent left", async () => {
        const s = await get(child);
        return s?.status?.agents === 1 && s;
      });
      expect(held.status!.phase).toBe("Ready");
      expect(m.routes.get(key(child))!.upstreams.map((u) => u.cluster)).toEqual([newPod.metadata!.name]);
      // With no further event, the first's grace ends and the session waits for a ready pod.
      const lapsed = await eventually(
        "the withheld pod's grace to end",
        async () => {
          const s = await get(child);
          return s?.status?.phase === "Pending" && s;
        },
        { timeoutMs: 20_000 },
      );
      expect(readyCondition(lapsed)?.status).toBe("False");
      expect(m.routes.get(key(child))!.state).toBe(SessionState.CREATING);
      await markPodRunning(kc, NS, newPod.metadata!.name!);
      await markPodRunning(kc, NS, second.metadata!.name!);
      await eventually("agents: 2 again", async () => (await get(child))?.status?.agents === 2);

      // A second (single-cluster) session on the same target shares the sidecar.
      const generation = (await apps.readNamespacedDeployment({ namespace: NS, name: "shop" })).metadata!
        .generation;
      await createSession("shop-solo", { target: "deployment/shop" });
      await eventually(
        "second session Ready",
        async () => (await get("shop-solo"))?.status?.phase === "Ready",
      );
      expect(m.routes.get(key("shop-solo"))!.upstreams[0]!.secret).toBe(route.upstreams[0]!.secret);
      expect(
        (await apps.readNamespacedDeployment({ namespace: NS, name: "shop" })).metadata!.generation,
      ).toBe(generation);

      // The first ends: the sidecar stays for the other.
      await sessions().delete({ namespace: NS, name: child });
      await gone(child);
      const still = await apps.readNamespacedDeployment({ namespace: NS, name: "shop" });
      expect(still.spec!.template.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER)).toBe(true);

      // The last ends: the original template returns byte for byte, and with it the original ReplicaSet.
      await sessions().delete({ namespace: NS, name: "shop-solo" });
      await gone("shop-solo");
      const restored = await apps.readNamespacedDeployment({ namespace: NS, name: "shop" });
      expect(JSON.stringify(restored.spec!.template)).toBe(originalTemplate);
      expect(restored.metadata!.annotations?.[ORIGINAL_TEMPLATE_ANNOTATION]).toBeUndefined();
      await eventually("the original ReplicaSet current again", async () => {
        const rs = await replicaSets();
        const orig = rs.find((r) => r.metadata!.name === originalRs!.metadata!.name);
        const d = await apps.readNamespacedDeployment({ namespace: NS, name: "shop" });
        const revision = "deployment.kubernetes.io/revision";
        // No third ReplicaSet: the restored template hashes to the original one, which is current again.
        return (
          rs.length === 2 &&
          (orig?.spec?.replicas ?? 0) >= 1 &&
          orig?.metadata?.annotations?.[revision] === d.metadata?.annotations?.[revision]
        );
      });
      await expect(
        core.readNamespacedSecret({ namespace: NS, name: agentSecretName(`${NS}/deployment/shop`) }),
      ).rejects.toMatchObject({ code: 404 });
    } finally {
      await m.stop();
    }
  });

  it("fails a session on a bare pod with a clear reason (a pod's containers cannot change)", async () => {
    await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name: "lonely", labels: { app: "lonely" } },
        spec: {
          automountServiceAccountToken: false,
          containers: [{ name: "app", image: "example.test/app:1" }],
        },
      },
    });
    await markPodRunning(kc, NS, "lonely");
    const m = startMember(
      kc,
      new SidecarAgentProvisioner({
        kubeConfig: kc,
        agentImage: "example.test/switchyard-agent:1",
        redirectImage: "example.test/switchyard-iptables:1",
      }),
    );
    try {
      await createSession("lonely-session", { target: "pod/lonely" });
      const failed = await eventually("Failed", async () => {
        const s = await get("lonely-session");
        return s?.status?.phase === "Failed" && s;
      });
      expect(readyCondition(failed)).toMatchObject({ status: "False", reason: "SidecarUnsupported" });
      expect(readyCondition(failed)!.message).toContain("process provisioner");
      await sessions().delete({ namespace: NS, name: "lonely-session" });
      await gone("lonely-session");
    } finally {
      await m.stop();
    }
  });
});
