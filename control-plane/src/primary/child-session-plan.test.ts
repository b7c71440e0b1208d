import { describe, expect, it } from "vitest";
import { LABELS, type ConnectParams, type MultiClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { hashSecret } from "../../../proto/session-auth.js";
import { childConnectParams, desiredChild, foreignOwner, outputQueuesOf } from "./child-session-plan.js";

const params: ConnectParams = {
  databaseBranches: [{ envVar: "DATABASE_URL", kind: "PgBranchDatabase", name: "b1" }],
  sqsSplit: [{ queueId: "orders", messageFilter: { tenant: "^dev$" } }],
  outputQueues: { east: { orders: "https://sqs.example/tmp" } },
  featureFlags: { steal: true },
};

const parent = {
  apiVersion: "switchyard.dev/v1alpha1",
  kind: "MultiClusterSession",
  metadata: { name: "mc-0123456789abcdef", namespace: "shop", uid: "u1" },
  spec: { target: "deployment/web", clientKeyHash: "a".repeat(64), connectParams: params, ttlSeconds: 30 },
} as MultiClusterSession;

describe("child session plan", () => {
  it("gives branch names to the Default child only, the split config and flags to all, output queues to the others", () => {
    const { outputQueues, ...asked } = params;
    expect(childConnectParams(asked, true, outputQueues)).toEqual(asked);
    expect(childConnectParams(asked, false, outputQueues)).toEqual({
      sqsSplit: params.sqsSplit,
      outputQueues,
      featureFlags: params.featureFlags,
    });
    expect(childConnectParams(asked, false)).toEqual({
      sqsSplit: params.sqsSplit,
      featureFlags: params.featureFlags,
    });
    // Output queues a parent's own connectParams carry are never forwarded: only the Default child's status counts.
    expect(childConnectParams({ featureFlags: { a: true }, outputQueues }, false)).toEqual({
      featureFlags: { a: true },
    });
    expect(childConnectParams({ databaseBranches: params.databaseBranches }, false)).toBeUndefined();
    expect(childConnectParams(undefined, true)).toBeUndefined();
  });

  it("reads the output queues from the Default child's status, and marks the Default child", () => {
    const child = {
      status: {
        queues: [
          { queueId: "orders", phase: "Splitting", outputQueueUrl: "http://127.0.0.1:9324/0/sy-o-1-orders" },
          { queueId: "refunds", phase: "Waiting" },
        ],
      },
    } as never;
    expect(outputQueuesOf("east", child)).toEqual({
      east: { orders: "http://127.0.0.1:9324/0/sy-o-1-orders" },
    });
    expect(outputQueuesOf("east", undefined)).toBeUndefined();
    const d = desiredChild(parent, { name: "east", isDefault: true }, "primary", "x");
    expect(d.spec.parent?.defaultCluster).toBe(true);
    const w = desiredChild(
      parent,
      { name: "west", isDefault: false },
      "primary",
      "x",
      outputQueuesOf("east", child),
    );
    expect(w.spec.connectParams?.outputQueues).toEqual({
      east: { orders: "http://127.0.0.1:9324/0/sy-o-1-orders" },
    });
  });

  it("names, labels and ties the child to its parent and Primary, with the hash of its own secret", () => {
    const c = desiredChild(parent, { name: "west", isDefault: false }, "primary", "s3cret");
    expect(c.metadata).toEqual({
      name: "mc-0123456789abcdef-west",
      namespace: "shop",
      labels: {
        [LABELS.parent]: "mc-0123456789abcdef",
        [LABELS.primary]: "primary",
        [LABELS.cluster]: "west",
      },
    });
    expect(c.spec.parent).toEqual({
      name: "mc-0123456789abcdef",
      cluster: "west",
      primaryClusterId: "primary",
    });
    expect(c.spec.clientKeyHash).toBe(hashSecret("s3cret"));
    expect(c.spec.clientKeyHash).not.toBe(parent.spec.clientKeyHash);
    expect(c.spec.ttlSeconds).toBe(30);
    expect(JSON.stringify(c)).not.toContain("s3cret");
  });

  it("recognises children that belong to another parent or Primary", () => {
    const c = desiredChild(parent, { name: "east", isDefault: true }, "primary", "x");
    const asChild = { ...c, apiVersion: "switchyard.dev/v1alpha1", kind: "ClusterSession" } as never;
    expect(foreignOwner(asChild, "mc-0123456789abcdef", "primary")).toBeUndefined();
    expect(foreignOwner(asChild, "mc-0123456789abcdef", "other-primary")).toBe("Primary primary");
    expect(foreignOwner(asChild, "mc-ffffffffffffffff", "primary")).toBe("parent mc-0123456789abcdef");
  });
});
