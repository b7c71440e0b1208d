import { describe, expect, it } from "vitest";
import { compileSplitFilter, ParsedMessage } from "./queue-filter.js";
import {
  admissionOrder,
  decide,
  filtersMayOverlap,
  literalSet,
  overlapMessage,
  overlapsWithEarlier,
  type SplitSession,
} from "./split-routing.js";

const session = (
  key: string,
  admittedAt: number,
  filter: Record<string, string>,
  mode: "steal" | "mirror" = "steal",
): SplitSession => ({
  key,
  admittedAt,
  mode,
  filter: compileSplitFilter({ messageFilter: filter }),
  output: `out-${key}`,
});

const m = (attributes: Record<string, string>) => new ParsedMessage(attributes, "");

describe("decide", () => {
  const alice = session("ns:alice", 1, { tenant: "^(a|shared)$" });
  const bob = session("ns:bob", 2, { tenant: "^(b|shared)$" });
  const carol = session("ns:carol", 3, { tenant: "." }, "mirror");
  const ordered = admissionOrder([carol, bob, alice]);

  it("gives a contested message to the earliest steal session and copies it to mirrors", () => {
    expect(ordered.map((s) => s.key)).toEqual(["ns:alice", "ns:bob", "ns:carol"]);
    expect(decide(ordered, m({ tenant: "shared" }))).toEqual({
      outputs: ["out-ns:alice", "out-ns:carol"],
      toTarget: false,
    });
    expect(decide(ordered, m({ tenant: "b" }))).toEqual({
      outputs: ["out-ns:bob", "out-ns:carol"],
      toTarget: false,
    });
  });

  it("leaves unmatched messages to the deployed consumers, and mirrored ones too", () => {
    expect(decide([alice], m({ tenant: "z" }))).toEqual({ outputs: [], toTarget: true });
    expect(decide([carol], m({ tenant: "z" }))).toEqual({ outputs: ["out-ns:carol"], toTarget: true });
  });

  it("orders same-time admissions by key", () => {
    const x = session("ns:x", 5, { t: "." });
    const y = session("ns:y", 5, { t: "." });
    expect(admissionOrder([y, x]).map((s) => s.key)).toEqual(["ns:x", "ns:y"]);
  });
});

describe("overlap at admission", () => {
  it("knows literal sets, and nothing else", () => {
    expect(literalSet("^dev$")).toEqual(["dev"]);
    expect(literalSet("^(a|b\\.c)$")).toEqual(["a", "b.c"]);
    expect(literalSet("^(?:a|)$")).toEqual(["a", ""]);
    expect(literalSet("^a|b$")).toBeUndefined();
    expect(literalSet("^a.$")).toBeUndefined();
    expect(literalSet("dev")).toBeUndefined();
    expect(literalSet("^\\d$")).toBeUndefined();
  });

  it("proves disjoint filters and reports the rest, naming both", () => {
    const f = (x: Record<string, string>) => compileSplitFilter({ messageFilter: x });
    expect(filtersMayOverlap(f({ tenant: "^a$" }), f({ tenant: "^b$" }))).toBe(false);
    expect(filtersMayOverlap(f({ tenant: "^(a|b)$" }), f({ tenant: "^b" }))).toBe(true);
    expect(filtersMayOverlap(f({ tenant: "^a$" }), f({ tenant: "^b.*" }))).toBe(false);
    expect(filtersMayOverlap(f({ tenant: "a" }), f({ tenant: "b" }))).toBe(true); // "ab" matches both
    expect(filtersMayOverlap(f({ tenant: "^a$" }), f({ kind: "^b$" }))).toBe(true); // both attributes may be set
    const body = (p: string, r: string) => compileSplitFilter({ bodyFilter: [{ path: p, matches: r }] });
    expect(filtersMayOverlap(body("$.t", "^1$"), body("$.t", "^2$"))).toBe(false);
    expect(filtersMayOverlap(body("$.t", "^1$"), body("$.u", "^2$"))).toBe(true);

    const alice = session("ns:alice", 1, { tenant: "^(a|shared)$" });
    const bob = session("ns:bob", 2, { tenant: "^(b|shared)$" });
    const dan = session("ns:dan", 3, { tenant: "^d$" });
    expect(overlapsWithEarlier(alice, [bob, dan])).toEqual([]);
    expect(overlapsWithEarlier(dan, [alice, bob])).toEqual([]);
    const o = overlapsWithEarlier(bob, [alice, dan]);
    expect(o).toEqual([{ earlier: "ns:alice", earlierFilter: "tenant=~^(a|shared)$", earlierMode: "steal" }]);
    expect(overlapMessage("orders", { filter: bob.filter.description, mode: "steal" }, o)).toBe(
      "queue orders: this session's filter (tenant=~^(b|shared)$) may match the same messages as session " +
        "ns:alice's (tenant=~^(a|shared)$, steal), admitted earlier; a message both match goes to the earlier session, not here",
    );
  });
});
