import { describe, expect, it } from "vitest";
import type { BranchDatabaseStatus } from "../../../proto/api/v1alpha1/index.js";
import { failedAttempts } from "./branch-reconciler.js";

const ready = (status: "True" | "False", reason: string, message: string): BranchDatabaseStatus => ({
  phase: "Pending",
  conditions: [{ type: "Ready", status, reason, message, lastTransitionTime: "2026-01-01T00:00:00Z" }],
});

describe("failedAttempts", () => {
  it("reads the attempts in a row from the Ready condition, 0 when it shows none", () => {
    expect(failedAttempts(undefined)).toBe(0);
    expect(failedAttempts({})).toBe(0);
    expect(failedAttempts(ready("False", "Provisioning", "making sy_a_x"))).toBe(0);
    expect(failedAttempts(ready("False", "Unreachable", "attempt 3 failed, retrying: refused"))).toBe(3);
    expect(failedAttempts(ready("True", "Provisioned", "attempt 3 failed, retrying: x"))).toBe(0);
    expect(failedAttempts(ready("False", "Unreachable", "the attempt 3 failed, retrying: x"))).toBe(0);
  });
});
