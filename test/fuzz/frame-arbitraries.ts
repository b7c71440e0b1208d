// fast-check arbitraries of session frames, shared by the fuzz suites in this folder and the
// codec's property tests (proto/frame-codec.fuzz.test.ts): valid frames of every catalogue
// entry carrying random payload messages (built from the message descriptors, so a field
// added to session.proto is fuzzed without touching this file), and the ways a broken or
// hostile peer gets a frame wrong — random bytes, bit flips, truncation and padding, a wrong
// length field, unknown families and kinds, reserved bits, garbage payloads, random stream
// and request ids, kinds of the wrong direction, and text messages instead of binary ones.
import { create, ScalarType, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import fc from "fast-check";
import { catalogEntries, isKnownKind, MAX_FAMILY } from "../../proto/frame-catalog.js";
import { encodeRaw, HEADER_BYTES, KIND_TOWARD_CLIENT } from "../../proto/frame-codec.js";
import { toBinary } from "@bufbuild/protobuf";

/** One WebSocket message a fuzzer sends, and how it was made (printed on failure). */
export type FuzzInput =
  { text: false; bytes: Buffer; mutation: string } | { text: true; string: string; mutation: "text" };

/** Strings peers are likely to send: empty, loopback hosts, names, and random ones. */
const fuzzString = fc.oneof(
  fc.constantFrom("", "127.0.0.1", "localhost", "::1", "a", "*", "GET", "/", "SWITCHYARD_X"),
  fc.string({ maxLength: 24 }),
);

const u32 = fc.integer({ min: 0, max: 0xffffffff });

function scalarArb(t: ScalarType): fc.Arbitrary<unknown> {
  switch (t) {
    case ScalarType.STRING:
      return fuzzString;
    case ScalarType.BYTES:
      return fc.uint8Array({ maxLength: 64 });
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      // No NaN and no -0: neither compares equal to itself after a round trip.
      return fc
        .double({ noNaN: true, noDefaultInfinity: true })
        .map((d) => (d === 0 ? 0 : t === ScalarType.FLOAT ? Math.fround(d) : d));
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return u32;
    default:
      return fc.integer({ min: -0x80000000, max: 0x7fffffff });
  }
}

function fieldArb(f: DescField, depth: number): fc.Arbitrary<unknown> {
  switch (f.fieldKind) {
    case "scalar":
      return scalarArb(f.scalar);
    case "enum":
      return fc.constantFrom(...f.enum.values.map((v) => v.number));
    case "message":
      return messageArb(f.message, depth + 1);
    case "list": {
      const item =
        f.listKind === "scalar"
          ? scalarArb(f.scalar)
          : f.listKind === "enum"
            ? fc.constantFrom(...f.enum.values.map((v) => v.number))
            : messageArb(f.message, depth + 1);
      return fc.array(item, { maxLength: depth > 1 ? 0 : 3 });
    }
    case "map": {
      const value =
        f.mapKind === "scalar"
          ? scalarArb(f.scalar)
          : f.mapKind === "enum"
            ? fc.constantFrom(...f.enum.values.map((v) => v.number))
            : messageArb(f.message, depth + 1);
      const key =
        f.mapKey === ScalarType.STRING
          ? fc.string({ maxLength: 12 }).filter((k) => k !== "__proto__")
          : scalarArb(f.mapKey).map(String);
      return fc.dictionary(key, value, { maxKeys: depth > 1 ? 0 : 3 });
    }
  }
}

const messageCache = new Map<string, fc.Arbitrary<Message>>();

/** Random messages of `schema`: every field and oneof case may be set; nesting is bounded. */
export function messageArb<S extends DescMessage>(schema: S, depth = 0): fc.Arbitrary<Message> {
  const key = `${schema.typeName}@${depth}`;
  const cached = messageCache.get(key);
  if (cached) return cached;
  if (depth > 2) return fc.constant(create(schema) as Message);
  const parts: Record<string, fc.Arbitrary<unknown>> = {};
  for (const m of schema.members) {
    if (m.kind === "field") parts[m.localName] = fc.option(fieldArb(m, depth), { nil: undefined });
    else
      parts[m.localName] = fc.oneof(
        fc.constant(undefined),
        ...m.fields.map((f) => fieldArb(f, depth).map((value) => ({ case: f.localName, value }) as const)),
      );
  }
  const arb = fc.record(parts).map((init) => {
    const clean = Object.fromEntries(Object.entries(init).filter(([, v]) => v !== undefined));
    return create(schema, clean as never) as Message;
  });
  messageCache.set(key, arb);
  return arb;
}

export interface ValidFrame {
  family: number;
  kind: number;
  flags: number;
  requestId: number;
  connectionId: number;
  schema: DescMessage;
  message: Message;
  bytes: Buffer;
}

/** Catalogue entries a given side may send: toward the client (kind >= 128) or away from it. */
export function entriesSentBy(
  side: "client" | "upstream" | "any",
): ReadonlyArray<readonly [number, number, DescMessage]> {
  return catalogEntries().filter(([, kind]) =>
    side === "any"
      ? true
      : side === "client"
        ? kind < KIND_TOWARD_CLIENT
        : kind >= KIND_TOWARD_CLIENT || kind === 2 || kind === 3,
  );
}

/** A valid frame of one of `entries`, with a random payload message and header ids. */
export function validFrameArb(
  entries: ReadonlyArray<readonly [number, number, DescMessage]> = catalogEntries(),
  ids: { requestId?: fc.Arbitrary<number>; connectionId?: fc.Arbitrary<number> } = {},
): fc.Arbitrary<ValidFrame> {
  return fc
    .constantFrom(...entries)
    .chain(([family, kind, schema]) =>
      fc.record({
        family: fc.constant(family),
        kind: fc.constant(kind),
        schema: fc.constant(schema),
        flags: fc.constantFrom(0, 0, 0, 1),
        requestId: ids.requestId ?? u32,
        connectionId: ids.connectionId ?? fc.oneof(fc.constantFrom(0, 1, 2, 7), u32),
        message: messageArb(schema),
      }),
    )
    .map((f) => ({
      ...f,
      bytes: encodeRaw(
        {
          family: f.family,
          kind: f.kind,
          flags: f.flags,
          requestId: f.requestId,
          connectionId: f.connectionId,
        },
        toBinary(f.schema, f.message),
      ),
    }));
}

const unknownFamily = fc.oneof(fc.constant(0), fc.integer({ min: MAX_FAMILY + 1, max: 255 }));
const byte = fc.integer({ min: 0, max: 255 });

/** One way to break a valid frame; `name` goes into the input's `mutation`. */
const mutations: ReadonlyArray<{ name: string; arb: (f: Buffer) => fc.Arbitrary<Buffer> }> = [
  { name: "none", arb: (f) => fc.constant(f) },
  {
    name: "bit-flip",
    arb: (f) =>
      fc.array(fc.nat({ max: f.length * 8 - 1 }), { minLength: 1, maxLength: 4 }).map((bits) => {
        const b = Buffer.from(f);
        for (const bit of bits) b[bit >> 3]! ^= 1 << (bit & 7);
        return b;
      }),
  },
  { name: "truncate", arb: (f) => fc.nat({ max: f.length - 1 }).map((n) => Buffer.from(f.subarray(0, n))) },
  {
    name: "pad",
    arb: (f) => fc.uint8Array({ minLength: 1, maxLength: 32 }).map((p) => Buffer.concat([f, p])),
  },
  {
    name: "length-field",
    arb: (f) =>
      fc.oneof(u32, fc.integer({ min: 0, max: f.length })).map((len) => {
        const b = Buffer.from(f);
        b.writeUInt32BE(len, 12);
        return b;
      }),
  },
  {
    name: "unknown-family",
    arb: (f) =>
      unknownFamily.map((family) => {
        const b = Buffer.from(f);
        b[0] = family;
        return b;
      }),
  },
  {
    name: "unknown-kind",
    arb: (f) =>
      byte
        .filter((k) => !isKnownKind(f[0]!, k))
        .map((kind) => {
          const b = Buffer.from(f);
          b[1] = kind;
          return b;
        }),
  },
  {
    name: "reserved-bits",
    arb: (f) =>
      fc
        .tuple(
          fc.integer({ min: 1, max: 127 }).map((x) => x << 1),
          byte,
        )
        .map(([flags, reserved]) => {
          const b = Buffer.from(f);
          b[2] = flags;
          b[3] = reserved;
          return b;
        }),
  },
  {
    name: "garbage-payload",
    arb: (f) =>
      fc.uint8Array({ minLength: 1, maxLength: 64 }).map((p) => {
        const b = Buffer.concat([f.subarray(0, HEADER_BYTES), p]);
        b.writeUInt32BE(p.length, 12);
        return b;
      }),
  },
  {
    name: "stream-id",
    arb: (f) =>
      u32.map((id) => {
        const b = Buffer.from(f);
        b.writeUInt32BE(id, 8);
        return b;
      }),
  },
  {
    name: "wrong-direction",
    arb: (f) => {
      // A kind of the same family that travels the other way, else the kind with its direction bit flipped.
      const opposite = catalogEntries()
        .filter(([fam, k]) => fam === f[0] && (k & KIND_TOWARD_CLIENT) !== (f[1]! & KIND_TOWARD_CLIENT))
        .map(([, k]) => k);
      return (
        opposite.length > 0 ? fc.constantFrom(...opposite) : fc.constant(f[1]! ^ KIND_TOWARD_CLIENT)
      ).map((kind) => {
        const b = Buffer.from(f);
        b[1] = kind;
        return b;
      });
    },
  },
];

/** A valid frame of `entries` broken (or not: "none") by one mutation. */
export function mutatedFrameArb(
  entries?: ReadonlyArray<readonly [number, number, DescMessage]>,
  ids?: Parameters<typeof validFrameArb>[1],
): fc.Arbitrary<FuzzInput> {
  return fc
    .tuple(validFrameArb(entries, ids), fc.constantFrom(...mutations))
    .chain(([f, m]) => m.arb(f.bytes).map((bytes): FuzzInput => ({ text: false, bytes, mutation: m.name })));
}

/** Any WebSocket message: random bytes, a text message, or a (mutated) frame. */
export function fuzzInputArb(
  entries?: ReadonlyArray<readonly [number, number, DescMessage]>,
  ids?: Parameters<typeof validFrameArb>[1],
): fc.Arbitrary<FuzzInput> {
  return fc.oneof(
    {
      weight: 1,
      arbitrary: fc
        .oneof(fc.uint8Array({ maxLength: 15 }), fc.uint8Array({ minLength: 16, maxLength: 64 }))
        .map((b): FuzzInput => ({ text: false, bytes: Buffer.from(b), mutation: "random-bytes" })),
    },
    {
      weight: 1,
      arbitrary: fc
        .string({ maxLength: 40 })
        .map((s): FuzzInput => ({ text: true, string: s, mutation: "text" })),
    },
    { weight: 8, arbitrary: mutatedFrameArb(entries, ids) },
  );
}

/** A short, printable description of an input for failure messages. */
export function describeInput(i: FuzzInput): string {
  if (i.text) return `text ${JSON.stringify(i.string.slice(0, 40))}`;
  return `${i.mutation} ${i.bytes.subarray(0, 24).toString("hex")}${i.bytes.length > 24 ? "…" : ""} (${i.bytes.length} bytes)`;
}

/**
 * What the message of each rejection must name, so that a peer knows which field to fix:
 * the frame's bytes or header fields, the payload, the connection, or the handshake.
 */
export const MESSAGE_NAMES: Readonly<Record<string, RegExp>> = {
  SWITCHYARD_FRAME_TRUNCATED: /header|bytes/,
  SWITCHYARD_FRAME_BAD_LENGTH: /bytes 12-15/,
  SWITCHYARD_FRAME_OVERSIZED: /payload of \d+ bytes exceeds/,
  SWITCHYARD_FRAME_RESERVED_BITS: /flags .* reserved byte/,
  SWITCHYARD_FRAME_UNKNOWN_FAMILY: /family \d+/,
  SWITCHYARD_FRAME_UNKNOWN_KIND: /kind \d+ .*family \d+/,
  SWITCHYARD_FRAME_BAD_PAYLOAD: /payload/,
  SWITCHYARD_FRAME_NOT_BINARY: /binary/,
  SWITCHYARD_FRAME_WRONG_DIRECTION: /kind \d+/,
  SWITCHYARD_FRAME_WRONG_UPSTREAM: /family \d+/,
  SWITCHYARD_HELLO_REQUIRED: /[Hh]ello/,
  SWITCHYARD_HELLO_REPEATED: /[Hh]ello/,
  SWITCHYARD_PROTOCOL_VERSION_UNSUPPORTED: /versions? .*upgrade/,
  SWITCHYARD_UNKNOWN_CONNECTION: /connection \d+/,
  SWITCHYARD_CONNECTION_ID_IN_USE: /connection \d+/,
  SWITCHYARD_UNEXPECTED_REPLY: /broadcast \d+/,
};
