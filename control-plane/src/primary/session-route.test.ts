import { describe, expect, it } from "vitest";
import { SessionState } from "../../../proto/gen/route_discovery_pb.js";
import type { MultiClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { validateSessionRoute } from "../route-discovery/index.js";
import { ChildSecretMissingError } from "./session-errors.js";
import { buildSessionRoute } from "./session-route.js";

function parent(phase: "Ready" | "Pending" | "Initializing" | "Failed"): MultiClusterSession {
  return {
    apiVersion: "switchyard.dev/v1alpha1",
    kind: "MultiClusterSession",
    metadata: { name: "mc-0123456789abcdef", namespace: "shop" },
    spec: { target: "deployment/web", clientKeyHash: "c".repeat(64) },
    status: {
      phase,
      children: {
        west: { name: "mc-0123456789abcdef-west", ready: true, gateway: "wss://west.gw:8443" },
        east: {
          name: "mc-0123456789abcdef-east",
          ready: true,
          gateway: "wss://east.gw:8443",
          defaultCluster: true,
        },
        north: { name: "mc-0123456789abcdef-north", ready: false, error: "TargetNotFound: x" },
      },
    },
  } as MultiClusterSession;
}

describe("buildSessionRoute", () => {
  it("routes a Ready session to each ready child's gateway with that child's secret, Default marked", () => {
    const route = buildSessionRoute(
      parent("Ready"),
      { east: "se", west: "sw", north: "sn" },
      { gatewayCaPem: undefined },
    )!;
    validateSessionRoute(route);
    expect(route.sessionId).toBe("shop:mc-0123456789abcdef");
    expect(route.clientKeyHash).toBe("c".repeat(64));
    expect(route.state).toBe(SessionState.READY);
    expect(route.upstreams.map((u) => [u.cluster, u.url, u.secret, u.isDefault, u.mux])).toEqual([
      ["east", "wss://east.gw:8443", "se", true, true],
      ["west", "wss://west.gw:8443", "sw", false, true],
    ]);
  });

  it("keys the table by namespace and name: a same-named parent of another namespace is another route", () => {
    const other = parent("Ready");
    other.metadata.namespace = "tenant-b";
    other.spec.clientKeyHash = "b".repeat(64);
    const a = buildSessionRoute(parent("Ready"), { east: "se", west: "sw" })!;
    const b = buildSessionRoute(other, { east: "be", west: "bw" })!;
    expect(b.sessionId).toBe("tenant-b:mc-0123456789abcdef");
    expect(b.sessionId).not.toBe(a.sessionId);
  });

  it("keeps a Pending session routed to its ready children, and CREATING when none is ready", () => {
    const partial = buildSessionRoute(parent("Pending"), { east: "se", west: "sw" })!;
    validateSessionRoute(partial);
    expect(partial.state).toBe(SessionState.READY);
    expect(partial.upstreams.map((u) => u.cluster)).toEqual(["east", "west"]);
    const none = parent("Pending");
    for (const c of Object.values(none.status!.children!)) c.ready = false;
    const creating = buildSessionRoute(none, {})!;
    validateSessionRoute(creating);
    expect(creating.state).toBe(SessionState.CREATING);
    expect(creating.upstreams).toEqual([]);
  });

  it("says CREATING while the Default child is not ready, even when another child is first", () => {
    const westFirst = parent("Pending");
    const children = westFirst.status!.children!;
    for (const [name, c] of Object.entries(children)) if (c.defaultCluster) children[name]!.ready = false;
    const route = buildSessionRoute(westFirst, { east: "se", west: "sw" })!;
    validateSessionRoute(route);
    expect(route.state).toBe(SessionState.CREATING);
    expect(route.upstreams.map((u) => [u.cluster, u.isDefault])).toEqual([["west", false]]);
  });

  it("routes nothing for a session that is Initializing, Failed or being deleted", () => {
    expect(buildSessionRoute(parent("Initializing"), { east: "se", west: "sw" })).toBeUndefined();
    expect(buildSessionRoute(parent("Failed"), { east: "se", west: "sw" })).toBeUndefined();
    const deleting = parent("Ready");
    deleting.metadata.deletionTimestamp = new Date();
    expect(buildSessionRoute(deleting, { east: "se", west: "sw" })).toBeUndefined();
  });

  it("refuses to build a table without a ready child's secret", () => {
    expect(() => buildSessionRoute(parent("Ready"), { east: "se" })).toThrow(ChildSecretMissingError);
  });
});
