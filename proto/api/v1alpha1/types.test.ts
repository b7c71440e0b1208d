// Type-level checks (enforced by `tsc`, trivially true at run time): the static types
// derived from the TypeBox schemas keep their precision — enums stay literal unions,
// optional fields stay optional, maps stay string-keyed records.
import { describe, expectTypeOf, it } from "vitest";
import type {
  ChildSessionStatus,
  ClusterSession,
  ConnectParams,
  MultiClusterSession,
  StatusCondition,
  SwitchyardOperator,
} from "./index.js";

describe("derived TypeScript types", () => {
  it("keep enums as literal unions", () => {
    expectTypeOf<MultiClusterSession["spec"]["failurePolicy"]>().toEqualTypeOf<
      "AllOrNothing" | "BestEffort" | undefined
    >();
    expectTypeOf<NonNullable<MultiClusterSession["status"]>["phase"]>().toEqualTypeOf<
      "Initializing" | "Pending" | "Ready" | "Failed" | "Terminating" | undefined
    >();
    expectTypeOf<StatusCondition["status"]>().toEqualTypeOf<"True" | "False" | "Unknown">();
    expectTypeOf<NonNullable<SwitchyardOperator["spec"]["clusters"]>[number]["authType"]>().toEqualTypeOf<
      "bearerToken" | "eks" | "mtls"
    >();
  });

  it("keep required and optional fields apart", () => {
    expectTypeOf<ClusterSession["spec"]["target"]>().toEqualTypeOf<string>();
    expectTypeOf<ClusterSession["spec"]["ttlSeconds"]>().toEqualTypeOf<number | undefined>();
    expectTypeOf<ChildSessionStatus["ready"]>().toEqualTypeOf<boolean>();
  });

  it("keep maps as string-keyed records", () => {
    expectTypeOf<NonNullable<MultiClusterSession["status"]>["children"]>().toEqualTypeOf<
      Record<string, ChildSessionStatus> | undefined
    >();
    expectTypeOf<NonNullable<ConnectParams["featureFlags"]>>().toEqualTypeOf<Record<string, boolean>>();
  });
});
