// What a session's status.queues means to the CLI: ready only when every split is Splitting
// with the value the local variable gets, failed as soon as one Failed, the hold-ups named,
// the rewrites for the EnvGet, and the overlap condition only while True.
import { describe, expect, it } from "vitest";
import type { QueueSplitStatus } from "../../../../proto/api/v1alpha1/index.js";
import {
  describeQueueProblems,
  overlapOf,
  queueRewrites,
  queuesVerdict,
  readyQueues,
} from "./session-queues.js";

const splitting = (queueId: string, localValue = `sy-${queueId}`): QueueSplitStatus => ({
  queueId,
  phase: "Splitting",
  envVar: `${queueId.toUpperCase()}_QUEUE`,
  localValue,
});

describe("session queue splits", () => {
  it("is ready only when every split asked for is Splitting with its local value", () => {
    expect(queuesVerdict(undefined, [])).toBe("ready");
    expect(queuesVerdict([], ["orders"])).toBeUndefined();
    expect(queuesVerdict([splitting("orders")], ["orders", "refunds"])).toBeUndefined();
    expect(queuesVerdict([splitting("orders"), splitting("refunds")], ["orders", "refunds"])).toBe("ready");
    const noValue = { ...splitting("orders"), localValue: undefined } as unknown as QueueSplitStatus;
    expect(queuesVerdict([noValue], ["orders"])).toBeUndefined();
  });

  it("fails as soon as one split Failed, and names what holds the others back", () => {
    const queues: QueueSplitStatus[] = [
      { queueId: "orders", phase: "Failed", reason: "QueueNotFound", message: "no queue orders" },
      { queueId: "refunds", phase: "Waiting" },
    ];
    expect(queuesVerdict(queues, ["orders", "refunds"])).toBe("failed");
    expect(describeQueueProblems(queues, ["orders", "refunds", "audit"])).toBe(
      "queue orders: Failed — QueueNotFound: no queue orders; queue refunds: Waiting; " +
        "queue audit: no status yet (is queues.sqs.enabled on its workload clusters?)",
    );
  });

  it("rewrites each Splitting split's variable to its local value, with the mode the split asked for", () => {
    const ready = readyQueues(
      [splitting("orders", "https://sqs.example/1/sy-orders"), { queueId: "refunds", phase: "Waiting" }],
      [
        { queueId: "orders", messageFilter: { t: "a" }, mode: "mirror" },
        { queueId: "refunds", messageFilter: { t: "b" } },
      ],
    );
    expect(ready).toEqual([
      {
        queueId: "orders",
        envVar: "ORDERS_QUEUE",
        localValue: "https://sqs.example/1/sy-orders",
        mode: "mirror",
      },
    ]);
    expect(queueRewrites(ready)).toEqual([
      { variable: "ORDERS_QUEUE", value: "https://sqs.example/1/sy-orders" },
    ]);
  });

  it("reads the overlap condition only while it is True", () => {
    const at = (status: string) => ({
      status: {
        conditions: [{ type: "QueueSplitOverlap", status, message: "filters overlap mc-1's" }],
      },
    });
    expect(overlapOf(at("True"))).toBe("filters overlap mc-1's");
    expect(overlapOf(at("False"))).toBeUndefined();
    expect(overlapOf({})).toBeUndefined();
  });
});
