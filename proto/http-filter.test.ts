// The HTTP filter rules both sides apply: header names are tokens in any case, methods
// are letters, regexes compile as JavaScript without flags or throw the engine's error.
import { describe, expect, it } from "vitest";
import { compileFilterRegex, isHttpHeaderName, isHttpMethod } from "./http-filter.js";

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

  it("compiles regexes without flags and throws the engine's SyntaxError", () => {
    const re = compileFilterRegex("^/api");
    expect(re.flags).toBe("");
    expect(re.test("/api/x")).toBe(true);
    expect(() => compileFilterRegex("[")).toThrow(SyntaxError);
  });
});
