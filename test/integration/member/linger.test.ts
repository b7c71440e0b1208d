// Idle sidecar agents against a real kube-apiserver with kube-controller-manager (real
// Deployments → ReplicaSets → Pods; the test plays the kubelet): after the last session the
// agent stays and its linger is recorded on the workload; the next session attaches with no
// template change (same generation, no new ReplicaSet or pod); a member restarted during the
// linger restores on time, byte for byte; `switchyard agents remove` (a release-only session)
// restores an idle agent at once and one in use when its last session ends; a linger of -1
// waits for that removal; the inventory counts what lingers.
import { createHash } from "node:crypto";
import {
  AppsV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clusterSessionClient, type ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import {
  AGENT_CONTAINER,
  agentSecretName,
  ORIGINAL_TEMPLATE_ANNOTATION,
  SidecarAgentProvisioner,
} from "../../../control-plane/src/member/index.js";
import {
  INJECTED_AT_ANNOTATION,
  LINGER_SECONDS_ANNOTATION,
  LINGER_UNTIL_ANNOTATION,
  REMOVE_REQUESTED_ANNOTATION,
} from "../../../control-plane/src/member/agent-annotations.js";
import { markPodRunning, runPods, startClusterSet, type ClusterSet } from "../../env/index.js";
import { startMember } from "./member-harness.js";
import { eventually } from "../../support/poll.js";

const NS = "linger-tests";
const HASH = createHash("sha256").update("client-secret").digest("hex");
let set: ClusterSet;
let kc: KubeConfig;
let apps: AppsV1Api;
let core: CoreV1Api;
const sessions = () => clusterSessionClient(kc);
const get = (name: string) => sessions().get({ namespace: NS, name });
const reason = (s: ClusterSession | undefined) =>
  s?.status?.conditions?.find((c) => c.type === "Ready")?.reason;

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"], controllerManager: true });
  kc = set.get("east").kubeConfig();
  apps = kc.makeApiClient(AppsV1Api);
  core = kc.makeApiClient(CoreV1Api);
  await installCrds(kc);
  await core.createNamespace({ body: { metadata: { name: NS } } });
});

afterAll(async () => {
  await set?.stop();
});

const provisioner = (lingerSeconds: number) =>
  new SidecarAgentProvisioner({
    kubeConfig: kc,
    agentImage: "example.test/switchyard-agent:1",
    redirectImage: "example.test/switchyard-iptables:1",
    lingerSeconds,
  });

async function createDeployment(name: string, annotations: Record<string, string> = {}) {
  await apps.createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name, annotations },
      spec: {
        replicas: 1,
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
  await runPods(kc, NS, `app=${name}`, 1);
  return JSON.stringify((await apps.readNamespacedDeployment({ namespace: NS, name })).spec!.template);
}

const deployment = (name: string) => apps.readNamespacedDeployment({ namespace: NS, name });
const replicaSets = async (name: string) =>
  (await apps.listNamespacedReplicaSet({ namespace: NS, labelSelector: `app=${name}` })).items.length;
const livePods = async (name: string) =>
  (await core.listNamespacedPod({ namespace: NS, labelSelector: `app=${name}` })).items.filter(
    (p) => !p.metadata!.deletionTimestamp,
  );
const hasAgent = async (name: string) =>
  (await deployment(name)).spec!.template.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER) ===
  true;

async function openSession(name: string, target: string, releaseAgents = false) {
  await sessions().create({
    metadata: { name, namespace: NS },
    spec: {
      clientKeyHash: HASH,
      target,
      ...(releaseAgents ? { connectParams: { releaseAgents: true } } : {}),
    },
  });
}

/** A session on `app` until Ready: the first one rolls the agent out (the test marks its pod running). */
async function readySession(name: string, app: string) {
  await openSession(name, `deployment/${app}`);
  await eventually(`${name} Ready`, async () => {
    const pending = (await livePods(app)).filter(
      (p) => p.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER) && !p.status?.podIP,
    );
    for (const p of pending) await markPodRunning(kc, NS, p.metadata!.name!);
    return (await get(name))?.status?.phase === "Ready";
  });
}

async function endSession(name: string) {
  await sessions().delete({ namespace: NS, name });
  await eventually(`${name} gone`, async () => (await get(name)) === undefined);
}

async function restoredExactly(app: string, original: string) {
  await eventually(`${app} restored`, async () => !(await hasAgent(app)), { timeoutMs: 30_000 });
  const d = await deployment(app);
  expect(JSON.stringify(d.spec!.template)).toBe(original);
  for (const a of [
    ORIGINAL_TEMPLATE_ANNOTATION,
    INJECTED_AT_ANNOTATION,
    LINGER_UNTIL_ANNOTATION,
    REMOVE_REQUESTED_ANNOTATION,
  ])
    expect(d.metadata!.annotations?.[a], a).toBeUndefined();
  await expect(
    core.readNamespacedSecret({ namespace: NS, name: agentSecretName(`${NS}/deployment/${app}`) }),
  ).rejects.toMatchObject({ code: 404 });
}

describe("idle sidecar agents", () => {
  it("linger after the last session, attach the next with no rollout, and restore on time across a restart", async () => {
    const original = await createDeployment("cafe");
    let m = startMember(kc, provisioner(600));
    try {
      await readySession("alice", "cafe");
      const injected = await deployment("cafe");
      expect(injected.metadata!.annotations![INJECTED_AT_ANNOTATION]).toMatch(/^\d{4}-\d\d-\d\dT/);
      const t0 = Date.now();
      await endSession("alice");
      // Idle, not restored: the template keeps the agent and the linger is on the workload.
      const idle = await deployment("cafe");
      expect(await hasAgent("cafe")).toBe(true);
      const until = Date.parse(idle.metadata!.annotations![LINGER_UNTIL_ANNOTATION]!);
      expect(until - t0).toBeGreaterThan(590_000);
      expect(until - Date.now()).toBeLessThanOrEqual(600_000);
      await core.readNamespacedSecret({ namespace: NS, name: agentSecretName(`${NS}/deployment/cafe`) });
      await eventually("the inventory to show it lingering", () => {
        const item = m.member.agents()?.items?.find((i) => i.target === "deployment/cafe");
        return (
          item?.sessions === 0 && item.lingerUntil === idle.metadata!.annotations![LINGER_UNTIL_ANNOTATION]
        );
      });
      expect(m.member.agents()).toMatchObject({ injected: 1, lingering: 1 });
      const metrics = await m.member.metrics.registry.metrics();
      expect(metrics).toMatch(/^switchyard_agents\{state="lingering"\} 1$/m);

      // The next session attaches: same generation, no new ReplicaSet, the same pod.
      const template = JSON.stringify(idle.spec!.template);
      const rsBefore = await replicaSets("cafe");
      const podsBefore = (await livePods("cafe")).map((p) => p.metadata!.uid).sort();
      await openSession("bob", "deployment/cafe");
      await eventually("bob Ready", async () => (await get("bob"))?.status?.phase === "Ready");
      const warm = await deployment("cafe");
      // (A Deployment's generation counts annotation writes too: the template is what rolls out.)
      expect(JSON.stringify(warm.spec!.template)).toBe(template);
      expect(warm.metadata!.annotations?.[LINGER_UNTIL_ANNOTATION]).toBeUndefined();
      expect(await replicaSets("cafe")).toBe(rsBefore);
      expect((await livePods("cafe")).map((p) => p.metadata!.uid).sort()).toEqual(podsBefore);

      // The owner wants a short linger for this workload; the member restarts while it runs.
      await apps.patchNamespacedDeployment(
        {
          namespace: NS,
          name: "cafe",
          body: { metadata: { annotations: { [LINGER_SECONDS_ANNOTATION]: "5" } } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      await endSession("bob");
      expect((await deployment("cafe")).metadata!.annotations![LINGER_UNTIL_ANNOTATION]).toBeDefined();
      await m.stop();
      expect(await hasAgent("cafe")).toBe(true);
      m = startMember(kc, provisioner(600));
      const restoredTemplate = original;
      // The owner's own annotation stays; everything of ours goes.
      await restoredExactly("cafe", restoredTemplate);
      expect((await deployment("cafe")).metadata!.annotations![LINGER_SECONDS_ANNOTATION]).toBe("5");
      expect(await m.member.metrics.registry.metrics()).toMatch(
        /^switchyard_agent_restores_total\{reason="linger-expired"\} 1$/m,
      );
    } finally {
      await m.stop();
    }
  });

  it("removes on request: an idle agent at once, one in use when its last session ends, one kept until removed", async () => {
    const original = await createDeployment("deli", { [LINGER_SECONDS_ANNOTATION]: "-1" });
    const m = startMember(kc, provisioner(600));
    try {
      await readySession("carol", "deli");
      // In use: the removal is told and marked; the agent stays while carol's session runs.
      await openSession("remove-1", "deployment/deli", true);
      await eventually(
        "remove-1 answered",
        async () => reason(await get("remove-1")) === "RemovedAfterSessions",
      );
      expect((await get("remove-1"))!.status!.phase).toBe("Ready");
      expect((await get("remove-1"))!.metadata!.finalizers ?? []).toEqual([]);
      expect(await hasAgent("deli")).toBe(true);
      expect((await get("carol"))!.status!.phase).toBe("Ready");
      await endSession("remove-1");
      // Its last session ends: restored at once, whatever the linger (-1 here).
      await endSession("carol");
      await restoredExactly("deli", original);

      // A linger of -1 keeps the idle agent until removed.
      await readySession("dave", "deli");
      await endSession("dave");
      expect((await deployment("deli")).metadata!.annotations![LINGER_UNTIL_ANNOTATION]).toBe("never");
      await new Promise((r) => setTimeout(r, 2000));
      expect(await hasAgent("deli")).toBe(true);
      await openSession("remove-2", "deployment/deli", true);
      await eventually("remove-2 answered", async () => reason(await get("remove-2")) === "AgentsRemoved");
      await restoredExactly("deli", original);
      // Nothing left: told so, and nothing is written.
      await openSession("remove-3", "deployment/deli", true);
      await eventually("remove-3 answered", async () => reason(await get("remove-3")) === "NoAgent");
      expect(JSON.stringify((await deployment("deli")).spec!.template)).toBe(original);
      expect(await m.member.metrics.registry.metrics()).toMatch(
        /^switchyard_agent_restores_total\{reason="removed"\} 1$/m,
      );
    } finally {
      await m.stop();
    }
  });

  it("keeps a user's edit made during the linger, and lingers for a StatefulSet without restarting its pod", async () => {
    await createDeployment("bakery", { [LINGER_SECONDS_ANNOTATION]: "3" });
    await apps.createNamespacedStatefulSet({
      namespace: NS,
      body: {
        metadata: { name: "ledger" },
        spec: {
          replicas: 1,
          serviceName: "ledger",
          selector: { matchLabels: { app: "ledger" } },
          template: {
            metadata: { labels: { app: "ledger" } },
            spec: {
              automountServiceAccountToken: false,
              containers: [{ name: "app", image: "example.test/app:1", ports: [{ containerPort: 8080 }] }],
            },
          },
        },
      },
    });
    await runPods(kc, NS, "app=ledger", 1);
    const m = startMember(kc, provisioner(600));
    try {
      // The StatefulSet: its pod is replaced once for the agent, then a warm session keeps it.
      await openSession("erin", "statefulset/ledger");
      await eventually("erin Ready", async () => {
        for (const p of await livePods("ledger"))
          if (p.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER) && !p.status?.podIP)
            await markPodRunning(kc, NS, p.metadata!.name!);
        return (await get("erin"))?.status?.phase === "Ready";
      });
      const sts = () => apps.readNamespacedStatefulSet({ namespace: NS, name: "ledger" });
      await endSession("erin");
      expect((await sts()).metadata!.annotations![LINGER_UNTIL_ANNOTATION]).toBeDefined();
      const uids = (await livePods("ledger")).map((p) => p.metadata!.uid);
      const revision = (await sts()).status?.updateRevision;
      await openSession("frank", "statefulset/ledger");
      await eventually("frank Ready", async () => (await get("frank"))?.status?.phase === "Ready");
      expect((await livePods("ledger")).map((p) => p.metadata!.uid)).toEqual(uids);
      expect((await sts()).status?.updateRevision).toBe(revision);
      await endSession("frank");

      // A user edits the Deployment's template while its agent lingers: the edit stays, only our
      // containers go when the linger ends.
      await readySession("gina", "bakery");
      await endSession("gina");
      await apps.patchNamespacedDeployment(
        {
          namespace: NS,
          name: "bakery",
          body: [{ op: "add", path: "/spec/template/metadata/labels/tier", value: "edited" }],
        },
        setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
      );
      await eventually("bakery's agent removed", async () => !(await hasAgent("bakery")), {
        timeoutMs: 30_000,
      });
      const d = await deployment("bakery");
      expect(d.spec!.template.metadata!.labels).toEqual({ app: "bakery", tier: "edited" });
      expect(d.metadata!.annotations?.[ORIGINAL_TEMPLATE_ANNOTATION]).toBeUndefined();
      expect(d.metadata!.annotations?.[LINGER_UNTIL_ANNOTATION]).toBeUndefined();
      await openSession("remove-ledger", "statefulset/ledger", true);
      await eventually("ledger removed", async () => reason(await get("remove-ledger")) === "AgentsRemoved");
      await eventually("ledger restored too", async () => {
        const t = (await sts()).spec!.template.spec!;
        return !t.initContainers?.some((c) => c.name === AGENT_CONTAINER);
      });
    } finally {
      await m.stop();
    }
  });
});
