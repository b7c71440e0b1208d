import type { V1Deployment, V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import {
  rankReadyPods,
  readinessWithheldUntil,
  resolveTarget,
  WITHHELD_READINESS_GRACE_MS,
  type TargetSource,
} from "./target-resolver.js";

function pod(
  name: string,
  opts: { ready?: boolean; created?: string; labels?: Record<string, string> } = {},
): V1Pod {
  return {
    metadata: {
      name,
      namespace: "ns",
      labels: opts.labels ?? { app: "web" },
      creationTimestamp: new Date(opts.created ?? "2026-01-01T00:00:00Z"),
    },
    spec: { containers: [{ name: "app", image: "x" }] },
    status:
      opts.ready === false
        ? { phase: "Pending" }
        : { phase: "Running", podIP: "10.0.0.1", conditions: [{ type: "Ready", status: "True" }] },
  };
}

const deployment: V1Deployment = {
  metadata: { name: "web", namespace: "ns" },
  spec: {
    selector: { matchLabels: { app: "web" } },
    template: {
      metadata: { labels: { app: "web" } },
      spec: {
        containers: [
          { name: "app", image: "x" },
          { name: "side", image: "y" },
        ],
      },
    },
  },
};

function source(pods: V1Pod[]): TargetSource {
  return {
    deployment: (ns, name) => (ns === "ns" && name === "web" ? deployment : undefined),
    statefulSet: () => undefined,
    pod: (ns, name) => pods.find((p) => p.metadata?.name === name),
    pods: () => pods,
  };
}

describe("resolveTarget", () => {
  it("finds a deployment's pods by its selector and ranks ready ones oldest first", () => {
    const pods = [
      pod("web-b", { created: "2026-01-02T00:00:00Z" }),
      pod("web-a", { created: "2026-01-03T00:00:00Z" }),
      pod("web-old", { created: "2026-01-01T00:00:00Z", ready: false }),
      pod("other", { labels: { app: "api" } }),
    ];
    const r = resolveTarget(source(pods), "ns", "deployment/web");
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.resolved.pods.map((p) => p.metadata!.name)).toEqual(["web-b", "web-a", "web-old"]);
    expect(r.resolved.readyPods.map((p) => p.metadata!.name)).toEqual(["web-b", "web-a"]);
    expect(r.resolved.container).toBe("app");
    expect(r.resolved.id).toBe("ns/deployment/web");
  });

  it("keeps the current pod first while it stays ready", () => {
    const pods = [
      pod("web-b", { created: "2026-01-02T00:00:00Z" }),
      pod("web-a", { created: "2026-01-03T00:00:00Z" }),
    ];
    expect(rankReadyPods(pods, "web-a").map((p) => p.metadata!.name)).toEqual(["web-a", "web-b"]);
  });

  it("says TargetNotFound for a missing workload, pod or container", () => {
    const missing = resolveTarget(source([]), "ns", "deployment/nope");
    expect(missing).toMatchObject({ ok: false, reason: "TargetNotFound" });
    expect(!missing.ok && missing.message).toContain("deployment nope not found in namespace ns");
    expect(resolveTarget(source([]), "ns", "pod/p")).toMatchObject({ ok: false, reason: "TargetNotFound" });
    const noContainer = resolveTarget(source([]), "ns", "deployment/web/container/db");
    expect(!noContainer.ok && noContainer.message).toContain("containers: app, side");
  });

  it("resolves a pod target to itself with the named container", () => {
    const r = resolveTarget(source([pod("p1")]), "ns", "pod/p1/container/app");
    expect(r.ok && r.resolved.readyPods.map((p) => p.metadata!.name)).toEqual(["p1"]);
    expect(r.ok && r.resolved.container).toBe("app");
  });
});

describe("readinessWithheldUntil", () => {
  const since = new Date("2026-03-01T10:00:00Z");
  const withConditions = (ready: string, containersReady: string | undefined, extra: Partial<V1Pod> = {}) => {
    const p = pod("web-a");
    p.status!.conditions = [
      { type: "Ready", status: ready, lastTransitionTime: since },
      ...(containersReady ? [{ type: "ContainersReady", status: containersReady }] : []),
    ];
    return { ...p, ...extra };
  };

  it("gives a pod whose Ready alone was taken (containers ready) the grace from that change", () => {
    expect(readinessWithheldUntil(withConditions("False", "True"))).toBe(
      since.getTime() + WITHHELD_READINESS_GRACE_MS,
    );
    expect(readinessWithheldUntil(withConditions("Unknown", "True"), 1000)).toBe(since.getTime() + 1000);
  });

  it("gives none to a Ready pod, one with unready containers, a deleted or a non-running one", () => {
    expect(readinessWithheldUntil(withConditions("True", "True"))).toBeUndefined();
    expect(readinessWithheldUntil(withConditions("False", "False"))).toBeUndefined();
    expect(readinessWithheldUntil(withConditions("False", undefined))).toBeUndefined();
    const deleted = withConditions("False", "True");
    deleted.metadata!.deletionTimestamp = new Date();
    expect(readinessWithheldUntil(deleted)).toBeUndefined();
    const failed = withConditions("False", "True");
    failed.status!.phase = "Failed";
    expect(readinessWithheldUntil(failed)).toBeUndefined();
  });
});
