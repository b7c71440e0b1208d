import { describe, expect, it } from "vitest";
import { decideGoal, printGoals } from "./goal.js";

describe("decideGoal", () => {
  it("decides on the measured value, not the figure the line shows", () => {
    const v = decideGoal({ name: "transparent-bulk", value: 0.796, op: ">=", target: 0.8, unit: "x" });
    expect(v.line).toBe("GOAL transparent-bulk 0.80x >=0.8x missed");
    expect(v.met).toBe(false);
    expect(decideGoal({ name: "p50", value: 1.004, op: "<=", target: 1, unit: "s" }).line).toBe(
      "GOAL p50 1.00s <=1s missed",
    );
    expect(decideGoal({ name: "p50", value: 1, op: "<=", target: 1, unit: "s" }).met).toBe(true);
  });

  it("takes each comparison at its edge", () => {
    expect(decideGoal({ name: "a", value: 0.5, op: ">=", target: 0.5 }).met).toBe(true);
    expect(decideGoal({ name: "a", value: 0.49, op: ">=", target: 0.5 }).met).toBe(false);
    expect(decideGoal({ name: "r", value: 2, op: "==", target: 2, digits: 0 }).line).toBe("GOAL r 2 ==2 met");
    expect(decideGoal({ name: "r", value: 3, op: "==", target: 2, digits: 0 }).met).toBe(false);
    expect(decideGoal({ name: "d", value: 3.34, op: ">=", target: 1, unit: "x", targetDigits: 1 }).line).toBe(
      "GOAL d 3.34x >=1.0x met",
    );
  });

  it("misses a goal that was not measured", () => {
    for (const value of [undefined, Number.NaN, Number.POSITIVE_INFINITY]) {
      const v = decideGoal({ name: "capacity-two-replicas", value, op: ">=", target: 2, unit: "x" });
      expect(v.met).toBe(false);
      expect(v.line).toBe("GOAL capacity-two-replicas n/a >=2x missed");
    }
  });

  it("misses a goal whose measurement's own conditions failed, saying which", () => {
    const v = decideGoal({
      name: "fanout-2v1-p50",
      value: 1.1,
      op: "<=",
      target: 1.3,
      unit: "x",
      requires: { "k6 thresholds": false, "every request answered": true },
    });
    expect(v.met).toBe(false);
    expect(v.failed).toEqual(["k6 thresholds"]);
    expect(v.line).toBe("GOAL fanout-2v1-p50 1.10x <=1.3x missed (k6 thresholds failed)");
    expect(decideGoal({ name: "g", value: 1, op: "<=", target: 2, requires: { run: true } }).met).toBe(true);
  });

  it("prints one line per goal, in order", () => {
    const lines: string[] = [];
    const verdicts = printGoals(
      [
        { name: "a", value: 1, op: "<=", target: 2, unit: "ms", digits: 0 },
        { name: "b", value: 12.34, op: "<=", target: 10, unit: "%", digits: 1 },
      ],
      (l) => lines.push(l),
    );
    expect(lines).toEqual(["GOAL a 1ms <=2ms met", "GOAL b 12.3% <=10% missed"]);
    expect(verdicts.map((v) => v.met)).toEqual([true, false]);
  });
});
