import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { QueueRewriteSchema } from "../../../../proto/gen/session_pb.js";
import { rewriteQueues } from "./queue-rewrite.js";

const q = (variable: string, value: string) => create(QueueRewriteSchema, { variable, value });

describe("rewriteQueues", () => {
  it("sets each named variable and leaves the input and the rest alone", () => {
    const env = new Map([
      ["ORDERS_QUEUE_URL", "http://sqs/0/sy-t-1-orders"],
      ["OTHER", "x"],
    ]);
    const out = rewriteQueues(env, [q("ORDERS_QUEUE_URL", "http://sqs/0/sy-o-2-orders")]);
    expect(out.get("ORDERS_QUEUE_URL")).toBe("http://sqs/0/sy-o-2-orders");
    expect(out.get("OTHER")).toBe("x");
    expect(env.get("ORDERS_QUEUE_URL")).toBe("http://sqs/0/sy-t-1-orders");
  });

  it("refuses a variable the target lacks or an empty value, naming the fix", () => {
    const env = new Map([["A", "1"]]);
    expect(() => rewriteQueues(env, [q("B", "v")])).toThrow(/no variable B .*QueueConsumer/);
    expect(() => rewriteQueues(env, [q("A", "")])).toThrow(/no output queue yet/);
    expect(() => rewriteQueues(env, [q("", "v")])).toThrow(/queues\[0\]\.variable is empty/);
  });
});
