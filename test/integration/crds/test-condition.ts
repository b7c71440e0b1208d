// A status condition as a controller would write it, for tests that write status by hand.
import type { StatusCondition } from "../../../proto/api/v1alpha1/index.js";

export function condition(type: string, status: "True" | "False" | "Unknown"): StatusCondition {
  return {
    type,
    status,
    reason: "Test",
    message: "set by the test",
    lastTransitionTime: new Date().toISOString(),
  };
}
