import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TARGET_KINDS } from "./schema-primitives.js";
import { formatTarget, InvalidTargetError, parseTarget } from "./target-ref.js";

const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/);

describe("parseTarget", () => {
  it("splits kind, name and optional container", () => {
    expect(parseTarget("deployment/myapp")).toEqual({ kind: "deployment", name: "myapp" });
    expect(parseTarget("pod/web-0/container/app")).toEqual({ kind: "pod", name: "web-0", container: "app" });
  });

  it("round-trips every valid target", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...TARGET_KINDS),
        label,
        fc.option(label, { nil: undefined }),
        (kind, name, container) => {
          const t = container === undefined ? { kind, name } : { kind, name, container };
          expect(parseTarget(formatTarget(t))).toEqual(t);
        },
      ),
    );
  });

  it.each(["", "deployment", "deployment/", "service/x", "deployment/x/container", "deployment/X"])(
    "refuses %j with a stable code",
    (bad) => {
      expect(() => parseTarget(bad)).toThrow(InvalidTargetError);
    },
  );
});
