import { describe, expect, it } from "vitest";
import {
  INVALID_OPTION,
  OptionError,
  atLeast,
  fraction,
  integerIn,
  nonNegative,
  oneOf,
  positive,
  required,
} from "./option-error.js";

describe("option validators", () => {
  it("return the value or the default", () => {
    expect(positive("a", undefined, 5)).toBe(5);
    expect(positive("a", 2, 5)).toBe(2);
    expect(nonNegative("a", 0, 5)).toBe(0);
    expect(integerIn("a", 3, 1, 0, 10)).toBe(3);
    expect(fraction("a", undefined, 0.5)).toBe(0.5);
    expect(oneOf("mode", undefined, ["a", "b"] as const, "b")).toBe("b");
    expect(required("name", "x")).toBe("x");
    expect(atLeast("max", 10, "min", 5)).toBe(10);
  });

  it("refuse bad values with the option's name and one code", () => {
    const cases: Array<() => unknown> = [
      () => positive("--timeout-ms", 0, 1),
      () => positive("--timeout-ms", Number.NaN, 1),
      () => nonNegative("offset", -1, 0),
      () => integerIn("replicas", 1.5, 1, 0, 10),
      () => fraction("jitter", 1.5, 0),
      () => oneOf("mode", "c", ["a", "b"] as const),
      () => required("name", " "),
      () => atLeast("max", 1, "min", 5),
    ];
    for (const c of cases) {
      let err: unknown;
      try {
        c();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(OptionError);
      expect((err as OptionError).code).toBe(INVALID_OPTION);
      expect((err as OptionError).message.startsWith(`${(err as OptionError).option}: `)).toBe(true);
    }
  });
});
