import { describe, expect, it } from "vitest";
import { selectorMatches } from "./label-selector.js";

describe("selectorMatches", () => {
  it("matches labels and expressions like the API server", () => {
    const sel = {
      matchLabels: { app: "web" },
      matchExpressions: [
        { key: "tier", operator: "In", values: ["a", "b"] },
        { key: "canary", operator: "DoesNotExist" },
        { key: "env", operator: "NotIn", values: ["prod"] },
        { key: "team", operator: "Exists" },
      ],
    };
    expect(selectorMatches(sel, { app: "web", tier: "a", team: "x" })).toBe(true);
    expect(selectorMatches(sel, { app: "web", tier: "c", team: "x" })).toBe(false);
    expect(selectorMatches(sel, { app: "web", tier: "a", team: "x", canary: "1" })).toBe(false);
    expect(selectorMatches(sel, { app: "web", tier: "a", team: "x", env: "prod" })).toBe(false);
    expect(selectorMatches(sel, { app: "web", tier: "a" })).toBe(false);
    expect(selectorMatches(sel, { app: "api", tier: "a", team: "x" })).toBe(false);
  });

  it("never matches with an empty or missing selector", () => {
    expect(selectorMatches(undefined, { app: "web" })).toBe(false);
    expect(selectorMatches({}, { app: "web" })).toBe(false);
  });
});
