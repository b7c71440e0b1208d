import { describe, expect, it } from "vitest";
import type { ClusterSession, ClusterSessionStatus } from "../../../proto/api/v1alpha1/index.js";
import { computeStatus, type ChildObservation, type ObservedCluster } from "./session-status.js";

function child(status: ClusterSessionStatus | undefined): ChildObservation {
  return {
    state: "present",
    child: {
      apiVersion: "switchyard.dev/v1alpha1",
      kind: "ClusterSession",
      metadata: { name: "x" },
      spec: { target: "deployment/web", clientKeyHash: "0".repeat(64) },
      ...(status ? { status } : {}),
    } as ClusterSession,
  };
}
const ready = (cluster: string) =>
  child({ phase: "Ready", gateway: `wss://${cluster}.gw:8443`, pod: { name: "web-0" } });
const failed = child({
  phase: "Failed",
  conditions: [
    {
      type: "Ready",
      status: "False",
      reason: "TargetNotFound",
      message: "deployment web not found",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    },
  ],
});
const obs = (name: string, observation: ChildObservation, isDefault = false): ObservedCluster => ({
  name,
  isDefault,
  childName: `mc-0123456789abcdef-${name}`,
  observation,
});

describe("computeStatus", () => {
  it("is Initializing while a child is not created yet, Pending until all are ready, then Ready", () => {
    expect(
      computeStatus([obs("east", ready("east"), true), obs("west", { state: "absent" })], "AllOrNothing")
        .phase,
    ).toBe("Initializing");
    expect(
      computeStatus([obs("east", ready("east"), true), obs("west", child(undefined))], "AllOrNothing").phase,
    ).toBe("Pending");
    const s = computeStatus([obs("east", ready("east"), true), obs("west", ready("west"))], "AllOrNothing");
    expect(s.phase).toBe("Ready");
    expect(s.children.east).toEqual({
      name: "mc-0123456789abcdef-east",
      ready: true,
      gateway: "wss://east.gw:8443",
      defaultCluster: true,
    });
    expect(s.conditions.find((c) => c.type === "Degraded")?.status).toBe("False");
  });

  it("fails under AllOrNothing when any child fails, naming the cluster and the member's reason", () => {
    const s = computeStatus([obs("east", ready("east"), true), obs("west", failed)], "AllOrNothing");
    expect(s.phase).toBe("Failed");
    expect(s.failed).toEqual(["west"]);
    expect(s.children.west!.error).toBe("TargetNotFound: deployment web not found");
    expect(s.conditions[0]).toMatchObject({ type: "Ready", status: "False", reason: "ChildFailed" });
    expect(s.conditions[0]!.message).toMatch(/west \(TargetNotFound/);
  });

  it("is Ready and Degraded under BestEffort when only non-default children failed", () => {
    const s = computeStatus(
      [
        obs("east", ready("east"), true),
        obs("west", failed),
        obs("north", { state: "refused", error: "forbidden" }),
      ],
      "BestEffort",
    );
    expect(s.phase).toBe("Ready");
    expect(s.conditions.find((c) => c.type === "Degraded")).toMatchObject({
      status: "True",
      reason: "ChildrenFailed",
    });
    expect(s.failed).toEqual(["north", "west"]);
  });

  it("fails under BestEffort when the Default child fails", () => {
    const s = computeStatus([obs("east", failed, true), obs("west", ready("west"))], "BestEffort");
    expect(s.phase).toBe("Failed");
    expect(s.conditions[0]!.reason).toBe("DefaultChildFailed");
  });

  it("treats a transient creation error as not created yet, not as failed", () => {
    const s = computeStatus(
      [obs("east", ready("east"), true), obs("west", { state: "absent", error: "connection refused" })],
      "AllOrNothing",
    );
    expect(s.phase).toBe("Initializing");
    expect(s.children.west).toMatchObject({ ready: false, error: "connection refused" });
  });

  it("does not call a Ready child without a gateway ready", () => {
    const s = computeStatus([obs("east", child({ phase: "Ready" }), true)], "AllOrNothing");
    expect(s.phase).toBe("Pending");
  });

  it("keeps an unreachable cluster's last recorded ready child routed, and calls the session Degraded", () => {
    const last = { name: "mc-0123456789abcdef-west", ready: true, gateway: "wss://west.gw:8443" };
    const s = computeStatus(
      [
        obs("east", ready("east"), true),
        obs("west", { state: "unreachable", error: "no answer within 5000 ms", last }),
      ],
      "AllOrNothing",
    );
    expect(s.phase).toBe("Ready");
    expect(s.failed).toEqual([]);
    expect(s.children.west).toMatchObject({ ready: true, gateway: "wss://west.gw:8443" });
    expect(s.children.west!.error).toBe(
      "unreachable, routed to its last known gateway: no answer within 5000 ms",
    );
    expect(s.conditions.find((c) => c.type === "Degraded")).toMatchObject({
      status: "True",
      reason: "ClusterUnreachable",
      message: expect.stringContaining("west (unreachable"),
    });
  });

  it("waits for an unreachable cluster that never had a ready child, as for one not created yet", () => {
    const never = computeStatus(
      [obs("east", ready("east"), true), obs("west", { state: "unreachable", error: "connection refused" })],
      "AllOrNothing",
    );
    expect(never.phase).toBe("Initializing");
    expect(never.children.west).toMatchObject({ ready: false, error: "unreachable: connection refused" });
    const notReady = computeStatus(
      [
        obs("east", ready("east"), true),
        obs("west", {
          state: "unreachable",
          error: "connection refused",
          last: { name: "mc-0123456789abcdef-west", ready: false },
        }),
      ],
      "AllOrNothing",
      { routed: true },
    );
    expect(notReady.phase).toBe("Pending");
  });

  it("keeps a routed session Pending, not Initializing, while one child is created again", () => {
    const s = computeStatus(
      [obs("east", ready("east"), true), obs("west", { state: "absent", error: "was being deleted" })],
      "AllOrNothing",
      { routed: true },
    );
    expect(s.phase).toBe("Pending");
    expect(s.children.east!.ready).toBe(true);
  });
});
