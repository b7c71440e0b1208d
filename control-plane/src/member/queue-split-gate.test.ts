import { describe, expect, it } from "vitest";
import type { ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { queueSplitGate } from "./cluster-session-reconciler.js";

const session = (queues?: NonNullable<ClusterSession["status"]>["queues"], split = true) =>
  ({
    metadata: { name: "s", namespace: "ns" },
    spec: {
      target: "deployment/web",
      clientKeyHash: "a".repeat(64),
      ...(split
        ? {
            connectParams: {
              sqsSplit: [
                { queueId: "orders", messageFilter: { t: "^a$" } },
                { queueId: "refunds", messageFilter: { t: "^a$" } },
              ],
            },
          }
        : {}),
    },
    status: { queues },
  }) as ClusterSession;

describe("queueSplitGate", () => {
  it("lets a session without splits, or with every split in force, be Ready", () => {
    expect(queueSplitGate(session(undefined, false), false)).toBeUndefined();
    expect(
      queueSplitGate(
        session([
          { queueId: "orders", phase: "Splitting" },
          { queueId: "refunds", phase: "Splitting" },
        ]),
        true,
      ),
    ).toBeUndefined();
  });

  it("holds a session whose split is not in force, and fails one whose split failed or cannot run here", () => {
    expect(queueSplitGate(session([{ queueId: "orders", phase: "Splitting" }]), true)).toEqual({
      phase: "Pending",
      reason: "QueueSplitWaiting",
      message: "queue refunds: the split is being set up",
    });
    expect(
      queueSplitGate(
        session([
          { queueId: "orders", phase: "Waiting", message: "waiting for the output queue" },
          { queueId: "refunds", phase: "Failed", message: "no QueueConsumer names it" },
        ]),
        true,
      ),
    ).toEqual({
      phase: "Failed",
      reason: "QueueSplitFailed",
      message: "queue refunds: no QueueConsumer names it",
    });
    expect(queueSplitGate(session([]), false)).toMatchObject({
      phase: "Failed",
      reason: "QueueSplittingDisabled",
      message: expect.stringContaining("queues.sqs.enabled=true"),
    });
  });
});
