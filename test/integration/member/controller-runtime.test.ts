// The controller runtime against a real kube-apiserver: a label-selected informer starts
// right after the CRDs are installed (the first LISTs may be refused while storage
// initialises) and feeds the controller; a mapped source wakes other keys; a conflict
// from a stale write is re-read and retried; an API server outage is survived and events
// after it are still delivered.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clusterSessionClient,
  clusterSessionCrd,
  type ClusterSession,
} from "../../../proto/api/v1alpha1/index.js";
import {
  Controller,
  ControllerMetrics,
  customResourceInformer,
  installCrds,
  podInformer,
  type ObjectKey,
  type Reconciler,
} from "../../../control-plane/src/runtime/index.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { eventually, type PollOptions } from "../../support/poll.js";

const NS = "runtime-tests";
const HASH = "ab".repeat(32);
const LABEL = "runtime-test";
let set: ClusterSet;
let kc: KubeConfig;

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary"], controllerManager: false });
  kc = set.get("primary").kubeConfig();
});

afterAll(async () => {
  await set?.stop();
});

const POLL: PollOptions = { intervalMs: 50 };

describe("controller runtime on a real API server", () => {
  it("reconciles label-selected custom resources, mapped pods, conflicts and an outage", async () => {
    // Installing the CRDs and starting the informer at once exercises the 429 window.
    await installCrds(kc);
    const sessions = clusterSessionClient(kc);
    const informer = customResourceInformer<ClusterSession>(kc, clusterSessionCrd, {
      labelSelector: `${LABEL}=yes`,
      resyncMs: 0,
    });
    const reconciled: string[] = [];
    let conflictOnce = true;
    const reconciler: Reconciler = {
      async reconcile(key: ObjectKey) {
        reconciled.push(key.name);
        const obj = await sessions.get(key);
        if (!obj) return;
        if (obj.metadata.name === "conflicting" && conflictOnce) {
          conflictOnce = false;
          // A write at a stale resourceVersion: the API server answers 409.
          await sessions.patch(key, { metadata: { labels: { touched: "1" } } }, { resourceVersion: "1" });
        }
        if (obj.status?.phase !== "Pending") await sessions.patchStatus(key, { phase: "Pending" });
      },
    };
    const metrics = new ControllerMetrics();
    const controller = new Controller({ name: "runtime-test", reconciler, metrics, concurrency: 2 });
    controller.watch(informer);
    // Pods labelled session=<name> wake that session.
    const pods = podInformer(kc, { namespace: NS, resyncMs: 0 });
    controller.watch(pods, {
      map: (pod) => {
        const s = pod.metadata?.labels?.session;
        return s ? { namespace: NS, name: s } : undefined;
      },
    });
    const ac = new AbortController();
    const running = controller.start(ac.signal);
    try {
      const core = kc.makeApiClient(CoreV1Api);
      await core.createNamespace({ body: { metadata: { name: NS } } });
      // No controller manager here: make the default ServiceAccount pods need ourselves.
      await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: "default" } } });
      const mk = (name: string, labelled: boolean) =>
        sessions.create({
          metadata: { name, namespace: NS, labels: labelled ? { [LABEL]: "yes" } : {} },
          spec: { target: "deployment/web", clientKeyHash: HASH },
        });
      await mk("selected", true);
      await mk("ignored", false);
      await mk("conflicting", true);
      await eventually(
        "selected Pending",
        async () => (await sessions.get({ namespace: NS, name: "selected" }))?.status?.phase === "Pending",
        POLL,
      );
      await eventually(
        "conflicting Pending",
        async () => (await sessions.get({ namespace: NS, name: "conflicting" }))?.status?.phase === "Pending",
        POLL,
      );
      expect(conflictOnce).toBe(false);
      expect(reconciled).not.toContain("ignored");
      const text = await metrics.registry.metrics();
      expect(text).toMatch(
        /switchyard_reconcile_errors_total\{controller="runtime-test",kind="conflict"\} 1/,
      );

      // A pod event maps to its session's key.
      const before = reconciled.filter((n) => n === "selected").length;
      await kc.makeApiClient(CoreV1Api).createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name: "p1", labels: { session: "selected" } },
          spec: {
            automountServiceAccountToken: false,
            containers: [{ name: "c", image: "example.invalid/app" }],
          },
        },
      });
      await eventually(
        "the pod event to reconcile its session",
        () => reconciled.filter((n) => n === "selected").length > before,
        POLL,
      );

      // An outage: the watch breaks; after the API server returns, new objects still arrive.
      const cluster = set.get("primary");
      await cluster.stopApiServer();
      await new Promise((r) => setTimeout(r, 500));
      await cluster.startApiServer();
      await eventually(
        "a session created after the outage",
        async () => {
          try {
            await mk("after-outage", true);
            return true;
          } catch {
            return false;
          }
        },
        POLL,
      );
      await eventually(
        "after-outage Pending",
        async () =>
          (await sessions.get({ namespace: NS, name: "after-outage" }))?.status?.phase === "Pending",
        { ...POLL, timeoutMs: 60_000 },
      );
      expect(informer.get("after-outage", NS)).toBeDefined();
    } finally {
      ac.abort();
      await running;
    }
  });
});
