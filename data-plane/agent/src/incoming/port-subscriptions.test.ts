import { describe, expect, it } from "vitest";
import { compileHttpFilter, HttpFilterError } from "./http-filter.js";
import { PortSubscriptions, SubscriptionConflictError } from "./port-subscriptions.js";

const alice = { header: { name: "X-User", valueRegex: "^alice$" } };
const bob = { header: { name: "X-User", valueRegex: "^bob$" } };

describe("PortSubscriptions", () => {
  it("lets many sessions mirror a port next to a steal", () => {
    const s = new PortSubscriptions();
    s.subscribe("a", 80, "mirror");
    s.subscribe("b", 80, "mirror");
    s.subscribe("c", 80, "steal");
    expect(s.forPort(80).map((x) => `${x.sessionId}:${x.mode}`)).toEqual(["a:mirror", "b:mirror", "c:steal"]);
  });

  it("refuses an unfiltered steal next to any other steal, and any steal next to an unfiltered one", () => {
    const s = new PortSubscriptions();
    s.subscribe("alice", 80, "steal", alice);
    expect(() => s.subscribe("x", 80, "steal")).toThrow(SubscriptionConflictError);
    expect(() => s.subscribe("x", 80, "steal")).toThrow(/add an HTTP filter/);
    const t = new PortSubscriptions();
    t.subscribe("x", 80, "steal");
    expect(() => t.subscribe("alice", 80, "steal", alice)).toThrow(
      /already stolen without a filter by session x/,
    );
    // Another port is unaffected.
    t.subscribe("alice", 81, "steal", alice);
  });

  it("lets disjoint filtered steals coexist and refuses an identical filter", () => {
    const s = new PortSubscriptions();
    s.subscribe("alice", 80, "steal", alice);
    s.subscribe("bob", 80, "steal", bob);
    expect(() => s.subscribe("eve", 80, "steal", alice)).toThrow(/same HTTP filter/);
  });

  it("replaces a session's own subscription and drops all of a session's ports", () => {
    const s = new PortSubscriptions();
    s.subscribe("a", 80, "steal");
    s.subscribe("a", 80, "steal", alice); // own unfiltered steal does not conflict
    expect(s.forPort(80)).toHaveLength(1);
    s.subscribe("a", 81, "mirror");
    expect(s.dropSession("a").sort()).toEqual([80, 81]);
    expect(s.forPort(80)).toHaveLength(0);
  });

  it("holds a lost session's subscriptions in place until it renews them or they are dropped", () => {
    const s = new PortSubscriptions();
    const seen: number[] = [];
    s.onChange((p) => seen.push(p));
    s.subscribe("a", 80, "steal", alice);
    s.subscribe("b", 80, "steal", bob);
    s.subscribe("a", 81, "mirror");
    seen.length = 0;
    expect(s.hold("a").sort()).toEqual([80, 81]);
    expect(seen.sort()).toEqual([80, 81]);
    expect(s.forPort(80).map((x) => `${x.sessionId}:${x.held}`)).toEqual(["a:true", "b:false"]);
    // Held, it keeps the app from its traffic but not a live session from the port: an
    // identical filter from another session takes over...
    s.subscribe("eve", 80, "steal", alice);
    expect(s.forPort(80).map((x) => `${x.sessionId}:${x.held}`)).toEqual(["b:false", "eve:false"]);
    // ...and the held session, back, is refused.
    expect(() => s.subscribe("a", 80, "steal", alice)).toThrow(/same HTTP filter/);
    s.unsubscribe("eve", 80);
    // Dropping what is still held removes only what it did not renew.
    expect(s.dropHeld("a")).toEqual([81]);
    expect(s.forPort(81)).toHaveLength(0);
    expect(s.dropHeld("a")).toEqual([]);
  });

  it("renewing a held subscription keeps the session's place (oldest wins) and makes it live", () => {
    const s = new PortSubscriptions();
    s.subscribe("a", 80, "steal", alice);
    s.subscribe("b", 80, "steal", bob);
    s.hold("a");
    s.subscribe("a", 80, "steal", alice);
    expect(s.forPort(80).map((x) => `${x.sessionId}:${x.held}`)).toEqual(["a:false", "b:false"]);
    expect(s.forPort(80)[0]!.seq).toBeLessThan(s.forPort(80)[1]!.seq);
    // A held unfiltered steal gives way to a new session's steal of any kind.
    const t = new PortSubscriptions();
    t.subscribe("old", 80, "steal");
    t.hold("old");
    t.subscribe("new", 80, "steal", bob);
    expect(t.forPort(80).map((x) => x.sessionId)).toEqual(["new"]);
  });

  it("rejects a filter on a mirror and a bad port", () => {
    const s = new PortSubscriptions();
    expect(() => s.subscribe("a", 80, "mirror", alice)).toThrow(/mirror takes no HTTP filter/);
    expect(() => s.subscribe("a", 70000, "steal")).toThrow(/not a TCP port/);
  });

  it("notifies on change", () => {
    const s = new PortSubscriptions();
    const seen: number[] = [];
    s.onChange((p) => seen.push(p));
    s.subscribe("a", 80, "mirror");
    s.unsubscribe("a", 80);
    s.unsubscribe("a", 80); // nothing to remove: no event
    expect(seen).toEqual([80, 80]);
  });
});

describe("compileHttpFilter", () => {
  const req = (method: string, path: string, headers: Array<[string, string]> = []) => ({
    method,
    path,
    headers,
  });

  it("matches headers case-insensitively by name, paths and methods, all-of and any-of", () => {
    const f = compileHttpFilter({
      anyOf: [
        { allOf: [{ method: "post" }, { pathRegex: "^/api/" }] },
        { header: { name: "x-debug", valueRegex: "1" } },
      ],
    });
    expect(f(req("POST", "/api/x"))).toBe(true);
    expect(f(req("GET", "/api/x"))).toBe(false);
    expect(f(req("GET", "/", [["X-Debug", "1"]]))).toBe(true);
    expect(f(req("GET", "/", [["X-Other", "1"]]))).toBe(false);
  });

  it("refuses bad filters with the field named", () => {
    expect(() => compileHttpFilter({ pathRegex: "([" })).toThrow(HttpFilterError);
    expect(() => compileHttpFilter({ allOf: [{ pathRegex: "ok" }, { pathRegex: "([" }] })).toThrow(
      /http_filter\.all_of\[1\]\.path_regex: invalid regular expression/,
    );
    expect(() => compileHttpFilter({ anyOf: [] })).toThrow(/any_of: give at least one filter/);
    expect(() => compileHttpFilter({ header: { name: "bad name", valueRegex: "x" } })).toThrow(
      /not an HTTP header name/,
    );
    expect(() => compileHttpFilter({ method: "GE T" })).toThrow(/not an HTTP method/);
  });

  it("refuses what RE2 cannot compile, naming the field and the syntax to use", () => {
    for (const valueRegex of ["(a)\\1", "foo(?=bar)", "(?<!x)y"]) {
      const f = () => compileHttpFilter({ anyOf: [{ header: { name: "x-user", valueRegex } }] });
      expect(f).toThrow(HttpFilterError);
      expect(f).toThrow(/^http_filter\.any_of\[0\]\.header\.value_regex: invalid regular expression/);
      expect(f).toThrow("(RE2 syntax: no backreferences or lookaround)");
    }
    expect(() => compileHttpFilter({ pathRegex: "x".repeat(1025) })).toThrow(/longer than the 1024 allowed/);
  });

  // A backtracking engine would not answer these within the test's timeout; how long RE2
  // takes is `npm run bench -- hostile-regex`.
  it("answers a catastrophic pattern against a long header", () => {
    const f = compileHttpFilter({ header: { name: "X-User", valueRegex: "^(a+)+$" } });
    expect(f(req("GET", "/", [["x-user", "a".repeat(50_000) + "!"]]))).toBe(false);
    expect(f(req("GET", "/", [["x-user", "a".repeat(50_000)]]))).toBe(true);
  });
});
