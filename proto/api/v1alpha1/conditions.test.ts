import { describe, expect, it } from "vitest";
import { CONDITION_MESSAGE_MAX_LENGTH } from "./schema-primitives.js";
import { conditionTimestamp, setConditions, type StatusCondition } from "./conditions.js";

const t0 = new Date("2026-01-01T00:00:00.250Z");
const t1 = new Date("2026-01-01T00:01:00.999Z");
const ready = (status: "True" | "False", reason = "R", message = "m") =>
  ({ type: "Ready", status, reason, message }) as const;

describe("setConditions", () => {
  it("adds a new condition with now as lastTransitionTime, whole seconds", () => {
    const { conditions, changed } = setConditions(undefined, [ready("False", "A", "a")], t0, 1);
    expect(conditions).toEqual([
      {
        type: "Ready",
        status: "False",
        reason: "A",
        message: "a",
        lastTransitionTime: "2026-01-01T00:00:00Z",
        observedGeneration: 1,
      },
    ]);
    expect(changed).toBe(true);
  });

  it("keeps lastTransitionTime while the status is unchanged, even when reason and message change", () => {
    const a = setConditions(undefined, [ready("False", "A", "a")], t0, 1).conditions;
    const b = setConditions(a, [ready("False", "B", "b")], t1, 1);
    expect(b.conditions[0]).toMatchObject({
      reason: "B",
      message: "b",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    });
    expect(b.changed).toBe(true);
  });

  it("moves lastTransitionTime to now when the status changes", () => {
    const a = setConditions(undefined, [ready("False")], t0, 1).conditions;
    const b = setConditions(a, [ready("True")], t1, 1);
    expect(b.conditions[0]!.lastTransitionTime).toBe("2026-01-01T00:01:00Z");
    expect(b.changed).toBe(true);
  });

  it("keeps a transition time written with a fraction by someone else while the status holds", () => {
    const foreign: StatusCondition[] = [
      { ...ready("True"), lastTransitionTime: "2025-12-31T23:59:59.123456Z" },
    ];
    const { conditions, changed } = setConditions(foreign, [ready("True")], t1);
    expect(conditions[0]!.lastTransitionTime).toBe("2025-12-31T23:59:59.123456Z");
    expect(changed).toBe(false);
  });

  it("sets observedGeneration, and removes it when the generation is unknown", () => {
    const a = setConditions(undefined, [ready("True")], t0, 1).conditions;
    const b = setConditions(a, [ready("True")], t1, 2);
    expect(b.conditions[0]!.observedGeneration).toBe(2);
    expect(b.changed).toBe(true);
    const c = setConditions(b.conditions, [ready("True")], t1);
    expect(c.conditions[0]).not.toHaveProperty("observedGeneration");
    expect(c.changed).toBe(true);
  });

  it("reports no change when every update matches what is there (a resync writes nothing)", () => {
    const a = setConditions(
      undefined,
      [ready("True"), { type: "Valid", status: "True", reason: "Ok", message: "" }],
      t0,
      3,
    );
    const b = setConditions(a.conditions, [ready("True")], t1, 3);
    expect(b.changed).toBe(false);
    expect(b.conditions).toEqual(a.conditions);
    expect(setConditions(a.conditions, [], t1, 3).changed).toBe(false);
    expect(setConditions(undefined, [], t1).changed).toBe(false);
  });

  it("keeps the order: updated conditions stay in place, new types are appended in update order", () => {
    const existing = setConditions(
      undefined,
      [
        { type: "Foreign", status: "True", reason: "Other", message: "written by someone else" },
        ready("False"),
        { type: "Valid", status: "True", reason: "Ok", message: "" },
      ],
      t0,
      1,
    ).conditions;
    const { conditions } = setConditions(
      existing,
      [
        { type: "Degraded", status: "False", reason: "No", message: "" },
        { type: "Valid", status: "False", reason: "Denied", message: "" },
        { type: "Zeta", status: "Unknown", reason: "New", message: "" },
        ready("True"),
      ],
      t1,
      2,
    );
    expect(conditions.map((c) => c.type)).toEqual(["Foreign", "Ready", "Valid", "Degraded", "Zeta"]);
    expect(conditions[0]).toBe(existing[0]);
  });

  it("does not modify the list it was given", () => {
    const existing = setConditions(undefined, [ready("False")], t0, 1).conditions;
    const copy = structuredClone(existing);
    setConditions(
      existing,
      [ready("True"), { type: "Valid", status: "True", reason: "Ok", message: "" }],
      t1,
      2,
    );
    expect(existing).toEqual(copy);
  });

  it("cuts a message to the schema's limit", () => {
    const long = "x".repeat(CONDITION_MESSAGE_MAX_LENGTH + 10);
    const { conditions } = setConditions(undefined, [ready("False", "R", long)], t0);
    expect(conditions[0]!.message).toHaveLength(CONDITION_MESSAGE_MAX_LENGTH);
  });
});

describe("conditionTimestamp", () => {
  it("is RFC 3339 UTC without a fraction, truncating (never rounding up)", () => {
    expect(conditionTimestamp(new Date("2026-05-06T07:08:09.999Z"))).toBe("2026-05-06T07:08:09Z");
    expect(conditionTimestamp(new Date("2026-05-06T07:08:09Z"))).toBe("2026-05-06T07:08:09Z");
  });
});
