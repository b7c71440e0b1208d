import { describe, expect, it } from "vitest";
import { medianOfHolds, type Step } from "./capacity-hold.js";

function hold(pass: boolean, p99: number, why: string[] = pass ? [] : ["p99 2.1x the baseline"]): Step {
  return {
    perReplica: 500,
    sessions: 500,
    load: {
      sessions: 500,
      offeredPerSec: 1000,
      sentPerSec: 1000,
      answeredPerSec: 1000,
      timeouts: 0,
      errors: 0,
      rttMs: { p50: 1, p90: 2, p99, max: p99 },
      latenessMs: { p99: 0, max: 0 },
      cpu: 0.5,
    },
    routerCpu: [0.5],
    routerRssMiB: [60],
    agentsCpu: 0.2,
    harnessCpu: 0.1,
    cpuBusy: { routers: 0.5, loadSide: 0.5 },
    softirqCpu: 0,
    otherCpu: 0,
    pass,
    why,
    holds: 1,
  };
}

describe("medianOfHolds", () => {
  it("waits while the holds disagree or only one was held", () => {
    expect(medianOfHolds([hold(false, 9)])).toBeUndefined();
    expect(medianOfHolds([hold(true, 3)])).toBeUndefined();
    expect(medianOfHolds([hold(false, 9), hold(true, 3)])).toBeUndefined();
  });

  it("fails a step that one lucky hold of three passed (the median fails)", () => {
    const s = medianOfHolds([hold(false, 9, ["answered 90 %"]), hold(true, 3), hold(false, 8)])!;
    expect(s.pass).toBe(false);
    expect(s.holds).toBe(3);
    expect(s.load.rttMs.p99).toBe(9);
    expect(s.why).toEqual(["answered 90 %", "p99 2.1x the baseline"]);
  });

  it("passes a step two holds passed, reporting the worse of them", () => {
    const s = medianOfHolds([hold(true, 3), hold(false, 9), hold(true, 4)])!;
    expect(s.pass).toBe(true);
    expect(s.load.rttMs.p99).toBe(4);
    expect(s.why).toEqual([]);
    expect(medianOfHolds([hold(true, 3), hold(true, 2)])).toMatchObject({ pass: true, holds: 2 });
  });
});
