// Filter flags → the HttpFilter the agents evaluate: header/path/method conditions,
// all-of / any-of, and the protobuf shape.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { HttpFilterSchema } from "../../../../proto/gen/session_pb.js";
import { compileFilterRegex } from "../../../../proto/http-filter.js";
import { describeFilter, filterFromFlags, parseHeaderFlag, toProtoFilter } from "./http-filter.js";

describe("HTTP filter flags", () => {
  it("is undefined without conditions (steal everything)", () => {
    expect(filterFromFlags({})).toBeUndefined();
  });

  it("keeps a single condition bare", () => {
    expect(filterFromFlags({ path: "^/api" })).toEqual({ path: "^/api" });
  });

  it("anchors header value regexes to the whole value", () => {
    const h = parseHeaderFlag("X-User:  alice ");
    expect(h).toEqual({ name: "X-User", valueRegex: "^(?:alice)$" });
    const re = compileFilterRegex(h.valueRegex);
    expect(re.test("alice")).toBe(true);
    expect(re.test("alice2")).toBe(false);
    expect(compileFilterRegex(parseHeaderFlag("X-User: alice|bob").valueRegex).test("bob")).toBe(true);
  });

  it("refuses regexes RE2 cannot compile, naming the flag and the syntax to use", () => {
    for (const f of [
      () => parseHeaderFlag("X-User: (a)\\1"),
      () => filterFromFlags({ path: "^/(?!internal)" }),
      () => filterFromFlags({ path: "(?<=/api)/x" }),
    ]) {
      expect(f).toThrow(/^--http-(header value|path) ".*" is not a valid regular expression: /);
      expect(f).toThrow("(RE2 syntax: no backreferences or lookaround)");
    }
    // A value cannot escape the anchors it is sent in, and the anchored form must fit.
    expect(() => parseHeaderFlag("X-User: a)|(b")).toThrow(/--http-header value "a\)\|\(b"/);
    expect(() => parseHeaderFlag(`X-User: [${"a".repeat(1018)}]`)).toThrow(/longer than the 1024 allowed/);
  });

  it("combines conditions all-of by default and any-of on request", () => {
    const flags = { headers: ["X-User: alice"], method: "get" };
    expect(filterFromFlags(flags)).toEqual({
      allOf: [{ header: { name: "X-User", valueRegex: "^(?:alice)$" } }, { method: "GET" }],
    });
    expect(filterFromFlags({ ...flags, match: "any" })).toEqual({
      anyOf: [{ header: { name: "X-User", valueRegex: "^(?:alice)$" } }, { method: "GET" }],
    });
  });

  it.each([["X-User"], ["X-User:"], [": alice"], ["Bad Name: x"], ["X: ("]])(
    "rejects header flag %j",
    (f) => {
      expect(() => parseHeaderFlag(f)).toThrow(/--http-header/);
    },
  );

  it("rejects a bad method and a bad path regex", () => {
    expect(() => filterFromFlags({ method: "GET /" })).toThrow(/--http-method/);
    expect(() => filterFromFlags({ path: "[" })).toThrow(/--http-path/);
    expect(() => filterFromFlags({ path: "" })).toThrow(/must not be empty/);
  });

  it("maps to the protobuf HttpFilter, which round-trips", () => {
    const spec = filterFromFlags({ headers: ["X-User: alice"], path: "^/api", match: "any" })!;
    const msg = fromBinary(
      HttpFilterSchema,
      toBinary(HttpFilterSchema, create(HttpFilterSchema, toProtoFilter(spec))),
    );
    expect(msg.filter.case).toBe("anyOf");
    const inner = msg.filter.case === "anyOf" ? msg.filter.value.filters : [];
    expect(inner.map((f) => f.filter.case)).toEqual(["header", "pathRegex"]);
    expect(inner[0]!.filter.value).toMatchObject({ name: "X-User", valueRegex: "^(?:alice)$" });
    expect(describeFilter(spec)).toBe("header X-User ~ ^(?:alice)$ or path ~ ^/api");
  });
});
