// SubscriptionReplay on its own: what is replayed, with router-owned request ids, and
// which results are consumed.
import { describe, expect, it } from "vitest";
import { encodeFrame } from "../../../proto/frame-codec.js";
import { FrameFamily, SubscribeSchema, SubscriptionKind } from "../../../proto/gen/session_pb.js";
import { SubscriptionReplay } from "./subscription-replay.js";

const steal = (subscriptionId: number, requestId: number) =>
  encodeFrame(
    {
      family: FrameFamily.SUBSCRIPTION,
      kind: SubscriptionKind.STEAL,
      requestId,
      connectionId: subscriptionId,
    },
    SubscribeSchema,
    { port: 8000 + subscriptionId },
  );

describe("SubscriptionReplay", () => {
  it("replays accepted subscriptions with router-owned request ids and consumes their results", () => {
    const r = new SubscriptionReplay<string>();
    r.accept(1, steal(1, 10));
    r.accept(2, steal(2, 11));
    r.remove(1);
    const frames = r.replayFor("west");
    expect(frames).toHaveLength(1);
    const requestId = frames[0]!.readUInt32BE(4);
    expect(requestId).toBeGreaterThanOrEqual(0x80000000);
    expect(frames[0]!.readUInt32BE(8)).toBe(2);
    expect(r.consume("east", requestId)).toBe(false);
    expect(r.consume("west", 11)).toBe(false);
    expect(r.consume("west", requestId)).toBe(true);
    expect(r.consume("west", requestId)).toBe(false);
  });

  it("keeps its own copy of the accepted frame", () => {
    const r = new SubscriptionReplay<string>();
    const frame = steal(3, 12);
    r.accept(3, frame);
    frame.fill(0);
    expect(r.replayFor("east")[0]!.readUInt32BE(8)).toBe(3);
  });

  it("forgets pending results of an upstream that went away", () => {
    const r = new SubscriptionReplay<string>();
    r.accept(4, steal(4, 13));
    const requestId = r.replayFor("north")[0]!.readUInt32BE(4);
    r.forget("north");
    expect(r.consume("north", requestId)).toBe(false);
    expect([r.size, r.has(4)]).toEqual([1, true]);
  });
});
