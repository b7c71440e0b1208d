import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { StopDeadline } from "../../../lib/stop-deadline.js";
import { featureRuns, runFeatures, type RunningFeature } from "./feature.js";
import { LeadershipTerms } from "./leadership-terms.js";

describe("featureRuns", () => {
  const memberOptIn = { runsIn: ["member"] as const, enabled: (o: { on: boolean }) => o.on };
  it("runs a feature in the roles it names, when its options turn it on", () => {
    expect(featureRuns(memberOptIn, "member", { on: true })).toBe(true);
    expect(featureRuns(memberOptIn, "both", { on: true })).toBe(true);
    expect(featureRuns(memberOptIn, "primary", { on: true })).toBe(false);
    expect(featureRuns(memberOptIn, "member", { on: false })).toBe(false);
    expect(featureRuns({ runsIn: ["primary", "member"] }, "primary", {})).toBe(true);
  });
});

describe("runFeatures", () => {
  it("registers every leader work before any serving part starts, and waits on stop for a term that must finish", async () => {
    const terms = new LeadershipTerms(pino({ level: "silent" }));
    const stopping = new StopDeadline();
    const stop = new AbortController();
    const events: string[] = [];
    let forwarded = false;
    const leader: RunningFeature = {
      // Holds the Lease: it starts a term at once, as an elector that wins at once would.
      serve: async (signal) => {
        events.push("serve");
        const term = new AbortController();
        terms.startTerm(term.signal);
        await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
        term.abort();
      },
    };
    const splitter: RunningFeature = {
      lead: async (leading) => {
        events.push("lead");
        await new Promise<void>((r) => leading.addEventListener("abort", () => r(), { once: true }));
        await new Promise((r) => setTimeout(r, 20));
        forwarded = true;
      },
      finishTermOnStop: true,
    };
    const parts = runFeatures(
      [
        ["lease", leader],
        ["splitter", splitter],
      ],
      { signal: stop.signal, terms, stopping },
    );
    await new Promise((r) => setTimeout(r, 5));
    expect(events).toEqual(["serve", "lead"]);
    expect(stopping.pending().sort()).toEqual(["lease", "splitter (last term)"]);
    stop.abort();
    await Promise.all(parts);
    expect(forwarded).toBe(true);
    expect(stopping.pending()).toEqual([]);
  });
});
