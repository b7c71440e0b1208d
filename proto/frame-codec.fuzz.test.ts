// Fuzz properties of the frame codec, the first thing every hop runs on a peer's bytes:
// decoding anything — random bytes, valid frames of every catalogue entry with random
// payloads, and those frames broken by every mutation of test/fuzz/frame-arbitraries.ts —
// either succeeds or throws a FrameError whose code is a frame code and whose message
// names what to fix; it never throws anything else. Valid frames round-trip byte for byte.
// Seeded (test/support/fuzz-parameters.ts): a failure prints its seed and the shrunk
// counterexample; SWITCHYARD_FUZZ_SEED replays it.
import { equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { FUZZ_SEED, fuzzParameters as params } from "../test/support/fuzz-parameters.js";
import { describeInput, fuzzInputArb, MESSAGE_NAMES, validFrameArb } from "../test/fuzz/frame-arbitraries.js";
import { ErrorCode, isErrorCode } from "./error-codes.js";
import { errorFrame } from "./error-frame.js";
import { decodeFrame, encodeFrame, HEADER_BYTES } from "./frame-codec.js";
import { FrameError } from "./frame-errors.js";
import * as pb from "./gen/session_pb.js";
import { decodeStreamData } from "./stream-data-frame.js";

/** Runs `decode`, and returns the FrameError it threw (or undefined); any other throw fails. */
function frameErrorOf(decode: () => unknown): FrameError | undefined {
  try {
    decode();
    return undefined;
  } catch (err) {
    if (!(err instanceof FrameError))
      throw new Error(`threw ${String(err)}, not a FrameError`, { cause: err });
    return err;
  }
}

describe(`frame codec under fuzzed input (seed ${FUZZ_SEED})`, () => {
  it("decodes or throws a FrameError naming the field, for any message a peer can send", () => {
    fc.assert(
      fc.property(fuzzInputArb(), (input) => {
        if (input.text) return;
        const err = frameErrorOf(() => decodeFrame(input.bytes, 4096));
        if (!err) return;
        expect(err.code, describeInput(input)).toMatch(/^SWITCHYARD_FRAME_/);
        expect(isErrorCode(err.code)).toBe(true);
        expect(err.message, `${err.code} for ${describeInput(input)}`).toMatch(MESSAGE_NAMES[err.code]!);
        // The offending header fields are carried when they could be read.
        if (input.bytes.length >= 8) expect(err.requestId).toBe(input.bytes.readUInt32BE(4));
      }),
      params(3000),
    );
  });

  it("round-trips every catalogue message with random content, header and ids", () => {
    fc.assert(
      fc.property(validFrameArb(), (f) => {
        const encoded = encodeFrame(
          {
            family: f.family,
            kind: f.kind,
            flags: f.flags,
            requestId: f.requestId,
            connectionId: f.connectionId,
          },
          f.schema,
          f.message as never,
        );
        expect(encoded.equals(f.bytes)).toBe(true);
        const d = decodeFrame(encoded);
        expect(d.header).toEqual({
          family: f.family,
          kind: f.kind,
          flags: f.flags,
          requestId: f.requestId,
          connectionId: f.connectionId,
          payloadLength: encoded.length - HEADER_BYTES,
        });
        expect(d.schema.typeName).toBe(f.schema.typeName);
        expect(equals(f.schema, d.message, f.message as never)).toBe(true);
        // Re-encoding the decoded message gives the same bytes.
        expect(Buffer.from(toBinary(d.schema, d.message)).equals(encoded.subarray(HEADER_BYTES))).toBe(true);
      }),
      params(2000),
    );
  });

  it("reads StreamData payloads, mutated or not, as the codec does or with a FrameError", () => {
    const streamData = validFrameArb([
      [pb.FrameFamily.TRAFFIC, pb.TrafficKind.DATA, pb.StreamDataSchema],
      [pb.FrameFamily.OUTGOING_TCP, pb.OutgoingKind.DATA, pb.StreamDataSchema],
    ]);
    const payload = fc.oneof(
      streamData.map((f) => f.bytes),
      fc.tuple(streamData, fc.uint8Array({ maxLength: 40 }), fc.nat(60)).map(([f, junk, cut]) => {
        // Garbage after (or instead of part of) a real payload, with the length field kept true.
        const b = Buffer.concat([f.bytes.subarray(0, Math.max(HEADER_BYTES, f.bytes.length - cut)), junk]);
        b.writeUInt32BE(b.length - HEADER_BYTES, 12);
        return b;
      }),
    );
    fc.assert(
      fc.property(payload, (frame) => {
        let expected: Uint8Array | undefined;
        try {
          expected = fromBinary(pb.StreamDataSchema, frame.subarray(HEADER_BYTES)).data;
        } catch {
          expected = undefined;
        }
        let data: Buffer | undefined;
        const err = frameErrorOf(() => (data = decodeStreamData(frame)));
        if (expected === undefined) expect(err?.code).toBe(ErrorCode.FRAME_BAD_PAYLOAD);
        else expect(data!.equals(Buffer.from(expected))).toBe(true);
      }),
      params(2000),
    );
  });

  it("builds error frames that decode back to the same code and message", () => {
    const code = fc.constantFrom(...Object.values(ErrorCode));
    fc.assert(
      fc.property(code, fc.string({ maxLength: 200 }), fc.nat(), (c, message, requestId) => {
        const d = decodeFrame(errorFrame(c, message, { requestId, family: 2, kind: 1 }));
        const e = d.message as pb.ProtocolError;
        expect(d.header.requestId).toBe(requestId);
        expect([e.code, e.message, e.frameFamily, e.frameKind]).toEqual([c, message, 2, 1]);
      }),
      params(500),
    );
  });
});
