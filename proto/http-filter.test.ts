// The HTTP filter rules both sides apply: header names are tokens in any case, methods
// are letters, regexes compile as RE2 without flags — linear time on the patterns that
// stall a backtracking engine — or throw a SyntaxError that says RE2.
import { describe, expect, it } from "vitest";
import {
  compileFilterRegex,
  HTTP_FILTER_MAX_REGEX_LENGTH,
  HTTP_FILTER_REGEX_SYNTAX,
  isHttpHeaderName,
  isHttpMethod,
} from "./http-filter.js";

describe("HTTP filter rules", () => {
  it("accepts token header names in any case and nothing else", () => {
    for (const n of ["X-User", "x-user", "content-type", "X_Custom.1~"])
      expect(isHttpHeaderName(n)).toBe(true);
    for (const n of ["", "Bad Name", "x:y", "ü"]) expect(isHttpHeaderName(n)).toBe(false);
  });

  it("accepts letters-only methods", () => {
    expect(isHttpMethod("GET")).toBe(true);
    expect(isHttpMethod("patch")).toBe(true);
    for (const m of ["", "GET /", "M-SEARCH", "GET1"]) expect(isHttpMethod(m)).toBe(false);
  });

  it("compiles regexes unanchored and case-sensitive unless the pattern asks", () => {
    const re = compileFilterRegex("^/api");
    expect(re.source).toBe("^/api");
    expect(re.test("/api/x")).toBe(true);
    expect(re.test("/API/x")).toBe(false);
    expect(re.test("x/api")).toBe(false);
    expect(compileFilterRegex("alice").test("user=alice;")).toBe(true);
    expect(compileFilterRegex("(?i)^alice$").test("ALICE")).toBe(true);
    expect(compileFilterRegex("^(?:a|b)$").test("ab")).toBe(false);
    expect(compileFilterRegex(String.raw`^/v\d+/(?<id>[a-f0-9-]{36})$`).test(`/v2/${"a".repeat(36)}`)).toBe(
      true,
    );
  });

  // Each of these takes a backtracking engine (JavaScript's RegExp) minutes or more on an
  // input this long; RE2 needs one pass.
  const n = 50_000;
  const as = "a".repeat(n);
  const nineteenAs = ("x".repeat(2_700) + "a").repeat(19);
  it.each([
    ["(a+)+$", "a×50000 + '!'", as + "!", false],
    ["(a+)+$", "a×50000", as, true],
    ["(a|a)*b", "a×50000", as, false],
    ["(a|a)*b", "a×50000 + 'c'", as + "c", false],
    ["(.*a){20}", "19 a among 51300 x", nineteenAs, false],
    ["(.*a){20}", "a×50000", as, true],
    ["^(([a-z])+.)+[A-Z]([a-z])+$", "a×50000 + '!'", as + "!", false],
    ["^(([a-z])+.)+[A-Z]([a-z])+$", "a×50000 + 'Ab'", as + "Ab", true],
  ])(
    "answers %s on %s (a backtracking engine would not, within the test's timeout)",
    (source, _label, input, expected) => {
      // How long each takes is `npm run bench -- hostile-regex`.
      expect(input.length).toBeGreaterThanOrEqual(n);
      expect(compileFilterRegex(source).test(input)).toBe(expected);
    },
  );

  it.each([
    ["(a)\\1", /invalid escape sequence/],
    ["(?<user>a)\\k<user>", /invalid escape sequence/],
    ["foo(?=bar)", /unsupported Perl syntax/],
    ["foo(?!bar)", /unsupported Perl syntax/],
    ["(?<=foo)bar", /invalid named capture/],
    ["(?<!foo)bar", /invalid named capture/],
    ["[", /missing closing \]/],
  ])("refuses %s, which RE2 cannot compile, naming RE2 syntax", (source, why) => {
    expect(() => compileFilterRegex(source)).toThrow(SyntaxError);
    expect(() => compileFilterRegex(source)).toThrow(why);
    expect(() => compileFilterRegex(source)).toThrow("(RE2 syntax: no backreferences or lookaround)");
  });

  it("refuses regexes too long, or too large once compiled, for an agent to match cheaply", () => {
    expect(HTTP_FILTER_REGEX_SYNTAX).toBe("RE2 syntax: no backreferences or lookaround");
    expect(() => compileFilterRegex("a".repeat(HTTP_FILTER_MAX_REGEX_LENGTH + 1))).toThrow(
      /1025 characters, longer than the 1024 allowed/,
    );
    compileFilterRegex(`[${"a".repeat(HTTP_FILTER_MAX_REGEX_LENGTH - 2)}]`); // one instruction
    expect(() => compileFilterRegex(".{0,500}")).toThrow(/instructions, more than the 1000 allowed/);
    expect(() => compileFilterRegex(".{0,500}")).toThrow(/as \+ or \*/);
    compileFilterRegex("[^/]{1,64}");
  });
});
