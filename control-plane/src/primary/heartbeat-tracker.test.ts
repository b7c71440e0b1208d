import { describe, expect, it } from "vitest";
import { HeartbeatTracker } from "./heartbeat-tracker.js";
import { OptionError } from "../../../lib/option-error.js";

describe("HeartbeatTracker", () => {
  it("unions routers' latest reports, each replacing that router's previous one", () => {
    let now = 0;
    const t = new HeartbeatTracker({ staleAfterMs: 1_000, now: () => now });
    t.observe({ routerId: "r0", sessionIds: ["a", "b"] });
    t.observe({ routerId: "r1", sessionIds: ["b", "c"] });
    expect([...t.liveSessions()].sort()).toEqual(["a", "b", "c"]);
    t.observe({ routerId: "r0", sessionIds: [] });
    expect([...t.liveSessions()].sort()).toEqual(["b", "c"]);
    expect(t.isLive("a")).toBe(false);
    now = 500;
    expect(t.isLive("c")).toBe(true);
  });

  it("forgets a router that stopped reporting", () => {
    let now = 0;
    const t = new HeartbeatTracker({ staleAfterMs: 1_000, now: () => now });
    t.observe({ routerId: "r0", sessionIds: ["a"] });
    now = 1_001;
    expect(t.isLive("a")).toBe(false);
  });

  it("validates its options", () => {
    expect(() => new HeartbeatTracker({ staleAfterMs: 0 })).toThrow(OptionError);
  });
});
