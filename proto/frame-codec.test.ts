// Properties of the frame codec: every catalog message round-trips with its header;
// header accessors and in-place id rewriting agree with readHeader; arbitrary bytes are
// either a valid frame or rejected with a FrameError code — never an exception of another kind.
import { create } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { catalogEntries, isKnownKind, payloadSchemaOf } from "./frame-catalog.js";
import {
  checkFrame,
  decodeFrame,
  encodeFrame,
  encodeRaw,
  FrameCheck,
  frameCheckError,
  frameConnectionId,
  HEADER_BYTES,
  readHeader,
  setConnectionId,
} from "./frame-codec.js";
import { FrameError } from "./frame-errors.js";
import { negotiateVersion } from "./frame-version.js";
import * as pb from "./gen/session_pb.js";

const u32 = fc.integer({ min: 0, max: 0xffffffff });
const entry = fc.constantFrom(...catalogEntries());

describe("frame codec", () => {
  it("round-trips header and payload for every catalog entry", () => {
    fc.assert(
      fc.property(entry, u32, u32, fc.boolean(), ([family, kind, schema], requestId, connectionId, error) => {
        const buf = encodeFrame(
          { family, kind, requestId, connectionId, flags: error ? 1 : 0 },
          schema,
          create(schema),
        );
        const d = decodeFrame(buf);
        expect(d.header).toEqual({
          family,
          kind,
          flags: error ? 1 : 0,
          requestId,
          connectionId,
          payloadLength: buf.length - HEADER_BYTES,
        });
        expect(d.schema.typeName).toBe(schema.typeName);
      }),
    );
  });

  it("round-trips data payloads byte for byte", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), u32, (data, id) => {
        const buf = encodeFrame(
          { family: pb.FrameFamily.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: id },
          pb.StreamDataSchema,
          { data },
        );
        const d = decodeFrame(buf);
        expect(Buffer.from((d.message as pb.StreamData).data)).toEqual(Buffer.from(data));
        expect(frameConnectionId(buf)).toBe(id);
      }),
    );
  });

  it("rewrites the connection id in place without touching anything else", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), u32, u32, (payload, a, b) => {
        const buf = encodeRaw(
          { family: pb.FrameFamily.TRAFFIC, kind: pb.TrafficKind.DATA, connectionId: a, requestId: 9 },
          payload,
        );
        const before = Buffer.from(buf);
        setConnectionId(buf, b);
        expect(readHeader(buf).connectionId).toBe(b);
        expect(buf.subarray(0, 8)).toEqual(before.subarray(0, 8));
        expect(buf.subarray(12)).toEqual(before.subarray(12));
      }),
    );
  });

  it("classifies arbitrary bytes as a valid frame or a FrameError with a code", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const buf = Buffer.from(bytes);
        const check = checkFrame(buf, 1024);
        if (check === FrameCheck.Ok) {
          expect(isKnownKind(buf[0]!, buf[1]!)).toBe(true);
          expect(readHeader(buf, 1024).payloadLength).toBe(buf.length - HEADER_BYTES);
        } else {
          const err = frameCheckError(check, buf, 1024);
          expect(err).toBeInstanceOf(FrameError);
          expect(err.code).toMatch(/^SWITCHYARD_FRAME_/);
          expect(() => readHeader(buf, 1024)).toThrow(FrameError);
        }
      }),
    );
  });

  it("detects truncation, padding, oversize, reserved bits, unknown family and kind", () => {
    const ok = encodeRaw({ family: pb.FrameFamily.ENV, kind: pb.EnvKind.GET }, Buffer.alloc(8));
    expect(checkFrame(ok)).toBe(FrameCheck.Ok);
    expect(checkFrame(ok.subarray(0, 10))).toBe(FrameCheck.Truncated);
    expect(checkFrame(ok.subarray(0, 20))).toBe(FrameCheck.Truncated);
    expect(checkFrame(Buffer.concat([ok, Buffer.alloc(1)]))).toBe(FrameCheck.BadLength);
    expect(checkFrame(ok, 4)).toBe(FrameCheck.Oversized);
    const flags = Buffer.from(ok);
    flags[2] = 0x80;
    expect(checkFrame(flags)).toBe(FrameCheck.ReservedBits);
    const fam = Buffer.from(ok);
    fam[0] = 200;
    expect(checkFrame(fam)).toBe(FrameCheck.UnknownFamily);
    const kind = Buffer.from(ok);
    kind[1] = 77;
    expect(checkFrame(kind)).toBe(FrameCheck.UnknownKind);
  });

  it("refuses to encode a message that the catalog does not assign to the kind", () => {
    expect(() =>
      encodeFrame({ family: pb.FrameFamily.ENV, kind: pb.EnvKind.GET }, pb.PingSchema, {}),
    ).toThrow(FrameError);
    expect(payloadSchemaOf(pb.FrameFamily.PING, pb.PingKind.PONG)?.typeName).toBe(
      "switchyard.session.v1.Pong",
    );
  });

  it("negotiates the highest common protocol version", () => {
    fc.assert(
      fc.property(fc.nat(20), fc.nat(20), fc.nat(20), fc.nat(20), (a, b, c, d) => {
        const local = { min: Math.min(a, b), max: Math.max(a, b) };
        const remote = { min: Math.min(c, d), max: Math.max(c, d) };
        const v = negotiateVersion(local, remote);
        const common = [...Array(21).keys()].filter(
          (x) => x >= local.min && x <= local.max && x >= remote.min && x <= remote.max,
        );
        expect(v).toBe(common.length ? Math.max(...common) : undefined);
      }),
    );
  });
});
