import { describe, expect, it } from "vitest";
import { OptionError } from "../../../lib/option-error.js";
import { placeBranchControllers, type PlacementInput } from "./controller-placement.js";

const multi = (clusterName: string, defaultCluster: string, enabled = true) => ({
  enabled,
  clusterName,
  defaultCluster,
});

describe("placeBranchControllers", () => {
  const rows: [string, PlacementInput, { branching: boolean; sync: boolean }][] = [
    [
      "single-cluster install, no clusters config (both)",
      { mode: "both", clusters: undefined, memberIsDefault: false },
      { branching: true, sync: false },
    ],
    [
      "single-cluster install, no clusters config (primary)",
      { mode: "primary", clusters: undefined, memberIsDefault: false },
      { branching: true, sync: false },
    ],
    [
      "single-cluster install, enabled: false",
      { mode: "primary", clusters: multi("", "", false), memberIsDefault: false },
      { branching: true, sync: false },
    ],
    [
      "Primary that is the Default",
      { mode: "primary", clusters: multi("hub", "hub"), memberIsDefault: false },
      { branching: true, sync: false },
    ],
    [
      "both-mode Primary that is the Default",
      { mode: "both", clusters: multi("hub", "hub"), memberIsDefault: false },
      { branching: true, sync: false },
    ],
    [
      "Primary that is the Default, flag agreeing",
      { mode: "primary", clusters: multi("hub", "hub"), memberIsDefault: true },
      { branching: true, sync: false },
    ],
    [
      "Primary that is not the Default",
      { mode: "primary", clusters: multi("hub", "east"), memberIsDefault: false },
      { branching: false, sync: true },
    ],
    [
      "both-mode Primary that is not the Default",
      { mode: "both", clusters: multi("hub", "east"), memberIsDefault: false },
      { branching: false, sync: true },
    ],
    [
      "member that is the Default",
      { mode: "member", clusters: undefined, memberIsDefault: true },
      { branching: true, sync: false },
    ],
    [
      "member that is not the Default",
      { mode: "member", clusters: undefined, memberIsDefault: false },
      { branching: false, sync: false },
    ],
  ];

  it.each(rows)("%s", (_, input, expected) => {
    const placement = placeBranchControllers(input);
    expect(placement).toMatchObject(expected);
    expect(placement.branching && placement.sync).toBe(false);
    expect(placement.why).not.toContain("\n");
    expect(placement.why.length).toBeGreaterThan(10);
  });

  it("says why in terms of the clusters involved", () => {
    const sync = placeBranchControllers({
      mode: "primary",
      clusters: multi("hub", "east"),
      memberIsDefault: false,
    });
    expect(sync.why).toContain("east");
    expect(sync.why).toContain("hub");
    expect(
      placeBranchControllers({ mode: "member", clusters: undefined, memberIsDefault: false }).why,
    ).toMatch(/not the Default/);
  });

  it("refuses --default-cluster on a Primary whose config names another Default", () => {
    const place = () =>
      placeBranchControllers({ mode: "both", clusters: multi("hub", "east"), memberIsDefault: true });
    expect(place).toThrow(OptionError);
    expect(place).toThrow(/--default-cluster: .*names east.*defaultCluster: hub/);
  });
});
