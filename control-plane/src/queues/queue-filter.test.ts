import { describe, expect, it } from "vitest";
import { compileSplitFilter, parseBodyPath, ParsedMessage, valueAt } from "./queue-filter.js";

const msg = (attributes: Record<string, string>, body = "") => new ParsedMessage(attributes, body);

describe("compileSplitFilter", () => {
  it("matches when every attribute regex matches, and not when one is absent", () => {
    const f = compileSplitFilter({ messageFilter: { tenant: "^dev$", kind: "order|refund" } });
    expect(f.matches(msg({ tenant: "dev", kind: "refund" }))).toBe(true);
    expect(f.matches(msg({ tenant: "dev2", kind: "refund" }))).toBe(false);
    expect(f.matches(msg({ tenant: "dev" }))).toBe(false);
    expect(f.description).toBe("tenant=~^dev$, kind=~order|refund");
  });

  it("tests body paths in JSON bodies; a non-JSON body or a missing value does not match", () => {
    const f = compileSplitFilter({
      bodyFilter: [
        { path: "$.order.tier", matches: "^gold$" },
        { path: "$['items'][1].qty", matches: "^[0-9]+$" },
      ],
    });
    const body = JSON.stringify({ order: { tier: "gold" }, items: [{ qty: "x" }, { qty: 12 }] });
    expect(f.matches(msg({}, body))).toBe(true);
    expect(f.matches(msg({}, body.replace("gold", "silver")))).toBe(false);
    expect(f.matches(msg({}, "not json"))).toBe(false);
    expect(f.matches(msg({}, JSON.stringify({ order: { tier: "gold" }, items: [] })))).toBe(false);
  });

  it("combines attributes and body conditions", () => {
    const f = compileSplitFilter({
      messageFilter: { t: "^a$" },
      bodyFilter: [{ path: "$.x", matches: "^true$" }],
    });
    expect(f.matches(msg({ t: "a" }, '{"x":true}'))).toBe(true);
    expect(f.matches(msg({ t: "a" }, '{"x":false}'))).toBe(false);
    expect(f.matches(msg({ t: "b" }, '{"x":true}'))).toBe(false);
  });

  it("refuses backtracking-only syntax and bad paths, naming the field", () => {
    expect(() => compileSplitFilter({ messageFilter: { t: "(a)\\1" } })).toThrow(/messageFilter\.t: .*RE2/);
    expect(() => compileSplitFilter({ bodyFilter: [{ path: "$..x", matches: "a" }] })).toThrow(
      /bodyFilter\[0\]\.path: .*character 2/,
    );
    expect(() => compileSplitFilter({ bodyFilter: [{ path: "$.x", matches: "(?=a)" }] })).toThrow(
      /bodyFilter\[0\]\.matches/,
    );
    expect(() => compileSplitFilter({})).toThrow(/messageFilter, bodyFilter or both/);
  });

  it("runs a hostile pattern in linear time", () => {
    const f = compileSplitFilter({ messageFilter: { t: "^(a+)+$" } });
    const started = Date.now();
    expect(f.matches(msg({ t: "a".repeat(50_000) + "!" }))).toBe(false);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe("body paths", () => {
  it("parses steps and reads scalars as filters see them", () => {
    expect(parseBodyPath("$.a['b c'][2]")).toEqual(["a", "b c", 2]);
    expect(parseBodyPath("$")).toEqual([]);
    const doc = { a: { n: 1.5, b: false, z: null, o: {}, s: "x" } };
    expect(valueAt(doc, ["a", "n"])).toBe("1.5");
    expect(valueAt(doc, ["a", "b"])).toBe("false");
    expect(valueAt(doc, ["a", "z"])).toBe("null");
    expect(valueAt(doc, ["a", "s"])).toBe("x");
    expect(valueAt(doc, ["a", "o"])).toBeUndefined();
    expect(valueAt(doc, ["a", "missing"])).toBeUndefined();
    expect(valueAt(doc, ["a", 0])).toBeUndefined();
    expect(valueAt({ toString: 1 }, ["constructor"])).toBeUndefined();
  });
});
