import { describe, expect, it } from "vitest";
import { isLiveSession, LiveSessionCounts, type SessionCache } from "./live-session-counts.js";
import { featuresFor, identityStatus, type OperatorIdentity } from "./operator-identity.js";
import type { KubeConfig } from "@kubernetes/client-node";
import type { ClusterSession } from "../../proto/api/v1alpha1/index.js";

const base: OperatorIdentity = {
  mode: "both",
  clusterName: "primary",
  routerEndpoint: undefined,
  defaultNamespace: "default",
};

describe("featuresFor", () => {
  it("advertises MultiClusterPrimary only where multi-cluster is enabled", () => {
    expect(featuresFor("both", true)).toEqual([
      "MultiClusterPrimary",
      "MultiClusterMember",
      "LayerReconnect",
    ]);
    expect(featuresFor("both", false)).toEqual(["MultiClusterMember", "LayerReconnect"]);
    expect(featuresFor("primary", false)).toEqual(["LayerReconnect"]);
    expect(featuresFor("member", true)).toEqual(["MultiClusterMember", "LayerReconnect"]);
  });
});

describe("identityStatus", () => {
  it("follows the configuration in force and publishes nothing before it is loaded", () => {
    let enabled: boolean | undefined;
    const id: OperatorIdentity = { ...base, multiClusterEnabled: () => enabled };
    expect(identityStatus(id)).toBeUndefined();
    enabled = false;
    expect(identityStatus(id)?.supportedFeatures).not.toContain("MultiClusterPrimary");
    enabled = true;
    expect(identityStatus(id)?.supportedFeatures).toContain("MultiClusterPrimary");
  });

  it("carries the session counts once they are known", () => {
    const known: { counts?: { multiClusterSessions: number; clusterSessions: number } } = {};
    const id: OperatorIdentity = { ...base, sessions: { start: async () => {}, counts: () => known.counts } };
    expect(identityStatus(id)).not.toHaveProperty("sessions");
    known.counts = { multiClusterSessions: 2, clusterSessions: 3 };
    expect(identityStatus(id)?.sessions).toEqual({ multiClusterSessions: 2, clusterSessions: 3 });
  });
});

describe("live sessions", () => {
  const s = (phase?: string, deleting = false) =>
    ({
      metadata: { name: "x", ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}) },
      ...(phase ? { status: { phase } } : {}),
    }) as ClusterSession;

  it("are those not being deleted and not Failed", () => {
    expect([undefined, "Initializing", "Pending", "Ready"].every((p) => isLiveSession(s(p)))).toBe(true);
    expect(isLiveSession(s("Failed"))).toBe(false);
    expect(isLiveSession(s("Terminating"))).toBe(false);
    expect(isLiveSession(s("Ready", true))).toBe(false);
  });

  it("count 0 for a kind not served and are unknown until the caches synced", () => {
    const children: SessionCache<ClusterSession> & { hasSynced: boolean } = {
      hasSynced: false,
      list: () => [s("Ready"), s("Failed"), s(undefined)],
    };
    const memberOnly = new LiveSessionCounts({ kubeConfig: {} as KubeConfig, parents: false, children });
    expect(memberOnly.counts()).toBeUndefined();
    children.hasSynced = true;
    expect(memberOnly.counts()).toEqual({ multiClusterSessions: 0, clusterSessions: 2 });
    // A Primary counts parents from its own informer, which runs only during a term.
    const primaryOnly = new LiveSessionCounts({ kubeConfig: {} as KubeConfig, parents: true });
    expect(primaryOnly.counts()).toBeUndefined();
  });
});
