import { describe, expect, it } from "vitest";
import { freePorts, portRange } from "./ports.js";

describe("portRange", () => {
  it("gives each vitest worker a slice of its own, and the whole range outside vitest", () => {
    const below = 30_000;
    const slices = [1, 2, 3, 4].map((id) => portRange({ VITEST_POOL_ID: String(id) }, below));
    for (const [i, s] of slices.entries()) {
      expect(s.from).toBeGreaterThanOrEqual(10_000);
      expect(s.to).toBeLessThanOrEqual(below);
      for (const other of slices.slice(i + 1)) expect(s.to <= other.from || other.to <= s.from).toBe(true);
    }
    // A fifth worker shares the first one's slice rather than leaving the range.
    expect(portRange({ VITEST_POOL_ID: "5" }, below)).toEqual(slices[0]);
    expect(portRange({}, below)).toEqual({ from: 10_000, to: below });
    expect(portRange({ VITEST_POOL_ID: "x" }, below)).toEqual({ from: 10_000, to: below });
  });

  it("reserves free ports from this worker's slice", async () => {
    const { from, to } = portRange();
    const ports = await freePorts(5);
    expect(new Set(ports).size).toBe(5);
    for (const p of ports) expect(p >= from && p < to, `${p} in [${from}, ${to})`).toBe(true);
  });
});
