import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeFrame } from "./frame-codec.js";
import { FrameFamily, OutgoingKind, StreamDataSchema, TrafficKind } from "./gen/session_pb.js";
import { decodeStreamData, encodeStreamData } from "./stream-data-frame.js";

describe("stream-data-frame", () => {
  const check = (data: Uint8Array, id: number) => {
    const fast = encodeStreamData(FrameFamily.OUTGOING_TCP, OutgoingKind.DATA, id, data);
    const codec = encodeFrame(
      { family: FrameFamily.OUTGOING_TCP, kind: OutgoingKind.DATA, connectionId: id },
      StreamDataSchema,
      { data },
    );
    expect(fast.equals(codec)).toBe(true);
    expect(decodeStreamData(fast).equals(Buffer.from(data))).toBe(true);
  };

  it("is byte-identical to the codec and decodes back", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 20_000 }), fc.nat(), check), { numRuns: 100 });
  });

  it("handles every varint length boundary", () => {
    for (const n of [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152])
      check(new Uint8Array(n).fill(n & 255), n);
  });

  it("falls back to the codec for payloads with extra fields", () => {
    const frame = encodeFrame({ family: FrameFamily.TRAFFIC, kind: TrafficKind.DATA }, StreamDataSchema, {
      data: Buffer.from("ab"),
    });
    const withUnknown = Buffer.concat([frame, Buffer.from([0x10, 0x01])]);
    withUnknown.writeUInt32BE(withUnknown.length - 16, 12);
    expect(decodeStreamData(withUnknown).toString()).toBe("ab");
  });
});
