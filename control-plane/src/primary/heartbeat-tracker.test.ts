import { describe, expect, it } from "vitest";
import { HeartbeatTracker } from "./heartbeat-tracker.js";
import { OptionError } from "../../../lib/option-error.js";

const shop = (name: string) => ({ namespace: "shop", name });

describe("HeartbeatTracker", () => {
  it("unions routers' latest reports, each replacing that router's previous one", () => {
    let now = 0;
    const t = new HeartbeatTracker({ staleAfterMs: 1_000, now: () => now });
    t.observe({ routerId: "r0", sessionIds: ["shop:a", "shop:b"] });
    t.observe({ routerId: "r1", sessionIds: ["shop:b", "shop:c"] });
    expect([...t.liveSessions()].sort()).toEqual(["shop:a", "shop:b", "shop:c"]);
    t.observe({ routerId: "r0", sessionIds: [] });
    expect([...t.liveSessions()].sort()).toEqual(["shop:b", "shop:c"]);
    expect(t.isLive(shop("a"))).toBe(false);
    now = 500;
    expect(t.isLive(shop("c"))).toBe(true);
  });

  it("keeps alive only the session of the namespace the live client belongs to", () => {
    const t = new HeartbeatTracker();
    t.observe({ routerId: "r0", sessionIds: ["tenant-b:mc-0123456789abcdef", "mc-0123456789abcdef"] });
    expect(t.isLive({ namespace: "tenant-b", name: "mc-0123456789abcdef" })).toBe(true);
    // Neither a same-named session of another namespace nor a bare name counts for shop's.
    expect(t.isLive(shop("mc-0123456789abcdef"))).toBe(false);
  });

  it("forgets a router that stopped reporting", () => {
    let now = 0;
    const t = new HeartbeatTracker({ staleAfterMs: 1_000, now: () => now });
    t.observe({ routerId: "r0", sessionIds: ["shop:a"] });
    now = 1_001;
    expect(t.isLive(shop("a"))).toBe(false);
  });

  it("validates its options", () => {
    expect(() => new HeartbeatTracker({ staleAfterMs: 0 })).toThrow(OptionError);
  });
});
