// Writing custom resources by hand in tests: a status condition as a controller would write
// it, and the API server's answer to a write it must refuse.
import { ApiException } from "@kubernetes/client-node";
import { expect } from "vitest";
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

/** Awaits a write expected to be refused and returns the API server's 422 causes. */
export async function refused(write: Promise<unknown>): Promise<{ message: string; fields: string[] }> {
  const err = await write.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "the API server accepted an invalid object").toBeInstanceOf(ApiException);
  const e = err as ApiException<string>;
  expect(e.code).toBe(422);
  const body = JSON.parse(e.body) as { message: string; details?: { causes?: { field?: string }[] } };
  return { message: body.message, fields: (body.details?.causes ?? []).map((c) => c.field ?? "") };
}
