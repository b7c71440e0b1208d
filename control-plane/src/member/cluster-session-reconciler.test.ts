import { KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { OptionError } from "../../../lib/option-error.js";
import type { ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { RouteSnapshotCache } from "../route-discovery/index.js";
import type { AgentProvisioner } from "./agent-provisioner.js";
import { agentUpstreams, ClusterSessionReconciler, ttlDeadline } from "./cluster-session-reconciler.js";

function session(created: string, renewedAt?: string, ttlSeconds?: number): ClusterSession {
  return {
    apiVersion: "switchyard.dev/v1alpha1",
    kind: "ClusterSession",
    metadata: { name: "s", namespace: "ns", creationTimestamp: created as unknown as Date },
    spec: { target: "deployment/web", clientKeyHash: "a".repeat(64), ...(ttlSeconds ? { ttlSeconds } : {}) },
    ...(renewedAt ? { status: { renewedAt } } : {}),
  };
}

describe("ttlDeadline", () => {
  it("counts ttlSeconds (default 60) from the last renewal, else from creation", () => {
    const created = "2026-01-01T00:00:00Z";
    expect(ttlDeadline(session(created))).toBe(Date.parse(created) + 60_000);
    expect(ttlDeadline(session(created, undefined, 5))).toBe(Date.parse(created) + 5_000);
    expect(ttlDeadline(session(created, "2026-01-01T00:10:00Z", 30))).toBe(
      Date.parse("2026-01-01T00:10:30Z"),
    );
    // A renewal stamped before creation (clock skew) does not shorten the session's life.
    expect(ttlDeadline(session(created, "2025-12-31T23:00:00Z"))).toBe(Date.parse(created) + 60_000);
  });
});

describe("ClusterSessionReconciler options", () => {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: "https://127.0.0.1:1" }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  const base = {
    kubeConfig: kc,
    provisioner: { mode: "process" } as AgentProvisioner,
    routes: new RouteSnapshotCache(),
    targets: {
      deployment: () => undefined,
      statefulSet: () => undefined,
      pod: () => undefined,
      pods: () => [],
    },
  };

  it("builds the gateway URL from the router endpoint and the session's namespace and name", () => {
    const r = new ClusterSessionReconciler({ ...base, routerEndpoint: "wss://gw.east.example:8443/" });
    expect(r.gatewayFor("shop", "mc-0123456789abcdef-east")).toBe(
      "wss://gw.east.example:8443/v1/sessions/shop:mc-0123456789abcdef-east",
    );
    expect(r.gatewayFor("tenant-b", "mc-0123456789abcdef-east")).not.toBe(
      r.gatewayFor("shop", "mc-0123456789abcdef-east"),
    );
  });

  it("refuses an allow-list that cannot be meant, naming the option", () => {
    expect(
      () =>
        new ClusterSessionReconciler({
          ...base,
          routerEndpoint: "wss://gw",
          allowList: { targets: ["web"] },
        }),
    ).toThrow(/allowList\.targets/);
  });

  it("refuses a router endpoint that is not a ws(s)/http(s) URL", () => {
    expect(() => new ClusterSessionReconciler({ ...base, routerEndpoint: "gw.east:8443" })).toThrow(
      OptionError,
    );
    expect(() => new ClusterSessionReconciler({ ...base, routerEndpoint: "ftp://gw" })).toThrow(
      /routerEndpoint/,
    );
    expect(
      () => new ClusterSessionReconciler({ ...base, routerEndpoint: "wss://gw", waitingRecheckMs: 0 }),
    ).toThrow(/waitingRecheckMs/);
  });
});

describe("agentUpstreams", () => {
  it("gives wss:// agents the CA and the certificate's server name; the first agent is the default", () => {
    const agents = [
      { id: "web-a", baseUrl: "wss://10.0.0.7:9440" },
      { id: "web-b", baseUrl: "wss://[fd00::8]:9440" },
    ];
    expect(
      agentUpstreams(agents, "s", "secret", { agentCaPem: "CA", agentServerName: "switchyard-agent" }),
    ).toEqual([
      {
        cluster: "web-a",
        url: "wss://10.0.0.7:9440/v1/sessions/s",
        secret: "secret",
        isDefault: true,
        caPem: "CA",
        serverName: "switchyard-agent",
        metricsCluster: "agent",
      },
      {
        cluster: "web-b",
        url: "wss://[fd00::8]:9440/v1/sessions/s",
        secret: "secret",
        isDefault: false,
        caPem: "CA",
        serverName: "switchyard-agent",
        metricsCluster: "agent",
      },
    ]);
  });

  it("leaves the server name empty for plaintext agents and when none is configured", () => {
    const [plain] = agentUpstreams([{ id: "a", baseUrl: "ws://10.0.0.7:9440" }], "s", "x", {
      agentServerName: "switchyard-agent",
    });
    expect(plain).toMatchObject({ url: "ws://10.0.0.7:9440/v1/sessions/s", serverName: "", caPem: "" });
    const [unnamed] = agentUpstreams([{ id: "a", baseUrl: "wss://10.0.0.7:9440" }], "s", "x", {});
    expect(unnamed).toMatchObject({ serverName: "", caPem: "" });
  });
});
