// Member mode across leadership terms, against a real kube-apiserver with
// kube-controller-manager (the test plays the kubelet). The MemberController runs behind a
// real LeaseElector wired as the control plane wires it: every term calls `start` with that
// term's signal. Another holder takes the Lease away and hands it back; a session created
// while this replica does not lead is left alone (and its routing table is not served while it
// does not lead), and the next term reconciles it (sidecar
// injected, Ready, routed) and, once it is deleted, restores the workload exactly.
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  V1MicroTime,
  type KubeConfig,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../../lib/abortable-sleep.js";
import { clusterSessionClient, type ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import { LeaseElector } from "../../../control-plane/src/leader/lease-elector.js";
import {
  AGENT_CONTAINER,
  agentSecretName,
  MEMBER_FINALIZER,
  MemberController,
  ORIGINAL_TEMPLATE_ANNOTATION,
  SidecarAgentProvisioner,
} from "../../../control-plane/src/member/index.js";
import {
  RouteSnapshotCache,
  stopServingRoutesWhenLeadershipEnds,
} from "../../../control-plane/src/route-discovery/index.js";
import { installCrds, LeadershipTerms } from "../../../control-plane/src/runtime/index.js";
import { markPodRunning, runPods, startClusterSet, type ClusterSet } from "../../env/index.js";
import { eventually } from "../../support/poll.js";
import { ROUTER_ENDPOINT } from "./member-harness.js";

const NS = "member-leadership";
const LEASE = "switchyard-member";
const HASH = "cd".repeat(32);
let set: ClusterSet;
let kc: KubeConfig;
let apps: AppsV1Api;
let core: CoreV1Api;
let leases: CoordinationV1Api;
const sessions = () => clusterSessionClient(kc);
const get = (name: string) => sessions().get({ namespace: NS, name });
const readyCondition = (s: ClusterSession | undefined) =>
  s?.status?.conditions?.find((c) => c.type === "Ready");

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"], controllerManager: true });
  kc = set.get("east").kubeConfig();
  apps = kc.makeApiClient(AppsV1Api);
  core = kc.makeApiClient(CoreV1Api);
  leases = kc.makeApiClient(CoordinationV1Api);
  await installCrds(kc);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await eventually("the default ServiceAccount", () =>
    core.readNamespacedServiceAccount({ namespace: NS, name: "default" }).then(() => true),
  );
});

afterAll(async () => {
  await set?.stop();
});

/**
 * Another replica holding the Lease: it takes the Lease over and renews it until released,
 * then clears the holder (as a leader that stops does), so the next candidate takes it at once.
 */
function holdLeaseAs(identity: string) {
  const stop = new AbortController();
  const write = async (holder: string | undefined) => {
    const lease = await leases.readNamespacedLease({ name: LEASE, namespace: NS });
    const now = new V1MicroTime(Date.now());
    await leases.replaceNamespacedLease({
      name: LEASE,
      namespace: NS,
      body: {
        ...lease,
        spec: holder
          ? {
              ...lease.spec,
              holderIdentity: holder,
              renewTime: now,
              acquireTime: now,
              leaseDurationSeconds: 30,
            }
          : { ...lease.spec, holderIdentity: undefined, renewTime: undefined, leaseDurationSeconds: 1 },
      },
    });
  };
  // A write that loses a race with the elector (409) is simply made again on the next round.
  let lastError: unknown;
  const holding = (async () => {
    while (!stop.signal.aborted) {
      await write(identity).then(
        () => (lastError = undefined),
        (err: unknown) => (lastError = err),
      );
      await sleep(100, stop.signal);
    }
  })();
  return {
    /** Why the latest takeover write failed, if it did (for the waits' failure messages). */
    get lastError() {
      return lastError;
    },
    async release() {
      stop.abort();
      await holding;
      await eventually("the Lease released", () => write(undefined).then(() => true));
    },
  };
}

async function createDeployment(name: string) {
  return apps.createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name },
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
}

describe("member mode across leadership terms", () => {
  it("reconciles again after losing and re-acquiring the Lease, and cleans up", async () => {
    await createDeployment("web");
    await runPods(kc, NS, "app=web", 1);
    const original = await apps.readNamespacedDeployment({ namespace: NS, name: "web" });
    const originalTemplate = JSON.stringify(original.spec!.template);
    const routes = new RouteSnapshotCache();
    const member = new MemberController({
      kubeConfig: kc,
      routerEndpoint: ROUTER_ENDPOINT,
      provisioner: new SidecarAgentProvisioner({
        kubeConfig: kc,
        agentImage: "example.test/switchyard-agent:1",
        redirectImage: "example.test/switchyard-iptables:1",
      }),
      routes,
      waitingRecheckMs: 500,
    });
    // As in control-plane.ts: the runtime's LeadershipTerms starts the member with each term's
    // signal (never two terms at once), and the routers' streams end with the term.
    const closed: string[] = [];
    const streams = { closeAll: (reason: string) => void closed.push(reason) };
    const failures: unknown[] = [];
    const terms = new LeadershipTerms(pino({ level: "silent" }));
    terms.add("member", (leading) => member.start(leading).catch((err: unknown) => void failures.push(err)));
    const elector = new LeaseElector({
      kubeConfig: kc,
      namespace: NS,
      name: LEASE,
      identity: "replica-a",
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      retryPeriodMs: 200,
      onStartedLeading: (leading) => {
        stopServingRoutesWhenLeadershipEnds(leading, routes, streams);
        terms.startTerm(leading);
      },
    });
    const stopElector = new AbortController();
    const electing = elector.start(stopElector.signal);
    try {
      // Term 1 reconciles: a session on a missing target fails with its reason and, deleted, goes.
      await eventually("replica-a leads", () => elector.isLeader() && terms.terms === 1);
      await sessions().create({
        metadata: { name: "first", namespace: NS },
        spec: { clientKeyHash: HASH, target: "deployment/absent" },
      });
      await eventually(
        "TargetNotFound in term 1",
        async () => readyCondition(await get("first"))?.reason === "TargetNotFound",
      );
      await sessions().delete({ namespace: NS, name: "first" });
      await eventually("first gone", async () => (await get("first")) === undefined);

      // Another replica takes the Lease: this one steps down and its term ends.
      const other = holdLeaseAs("replica-b");
      try {
        await eventually(
          "replica-a stepped down",
          () => {
            if (other.lastError) throw other.lastError;
            return !elector.isLeader();
          },
          { timeoutMs: 20_000 },
        );
        await terms.ended("member");
        // It serves no routes now: its table would go stale while the other replica leads.
        expect(routes.ready()).toBe(false);
        expect(closed).toEqual(["this control-plane replica stopped leading; reconnect to reach the leader"]);
        // A session created meanwhile is nobody's here: no finalizer, no status, no sidecar.
        await sessions().create({
          metadata: { name: "web-session", namespace: NS },
          spec: { clientKeyHash: HASH, target: "deployment/web" },
        });
        await sleep(1_500);
        const untouched = await get("web-session");
        expect(untouched?.metadata.finalizers ?? []).not.toContain(MEMBER_FINALIZER);
        expect(untouched?.status).toBeUndefined();
      } finally {
        await other.release();
      }

      // The Lease comes back: a second term with a fresh controller picks the session up.
      await eventually("replica-a leads again", () => elector.isLeader() && terms.terms === 2, {
        timeoutMs: 20_000,
      });
      const patched = await eventually("the sidecar in the template", async () => {
        const d = await apps.readNamespacedDeployment({ namespace: NS, name: "web" });
        return d.spec!.template.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER) && d;
      });
      expect(patched.metadata!.annotations![ORIGINAL_TEMPLATE_ANNOTATION]).toBeDefined();
      const agentPod = await eventually("a pod with the agent", async () => {
        const list = await core.listNamespacedPod({ namespace: NS, labelSelector: "app=web" });
        return list.items.find((p) => p.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER));
      });
      const running = await markPodRunning(kc, NS, agentPod.metadata!.name!);
      const ready = await eventually("Ready in term 2", async () => {
        const s = await get("web-session");
        return s?.status?.phase === "Ready" && s;
      });
      expect(ready.metadata.finalizers).toContain(MEMBER_FINALIZER);
      expect(routes.ready()).toBe(true);
      expect(ready.status!.pod).toMatchObject({ name: agentPod.metadata!.name, ip: running.status!.podIP });
      expect(routes.get(sessionKey(NS, "web-session"))!.upstreams.map((u) => u.url)).toEqual([
        `ws://${running.status!.podIP}:9440/v1/sessions/${sessionKey(NS, "web-session")}`,
      ]);

      // Deleted: the workload gets its template back byte for byte, and nothing is left.
      await sessions().delete({ namespace: NS, name: "web-session" });
      await eventually("web-session gone", async () => (await get("web-session")) === undefined);
      const restored = await apps.readNamespacedDeployment({ namespace: NS, name: "web" });
      expect(JSON.stringify(restored.spec!.template)).toBe(originalTemplate);
      expect(restored.metadata!.annotations?.[ORIGINAL_TEMPLATE_ANNOTATION]).toBeUndefined();
      await expect(
        core.readNamespacedSecret({ namespace: NS, name: agentSecretName(`${NS}/deployment/web`) }),
      ).rejects.toMatchObject({ code: 404 });
      expect(routes.get(sessionKey(NS, "web-session"))).toBeUndefined();
    } finally {
      stopElector.abort();
      await electing;
      await terms.ended("member");
    }
    // Every term ended when its leadership did, and none refused to start.
    expect(failures).toEqual([]);
  });
});
