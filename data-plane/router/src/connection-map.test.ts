// ConnectionMap on its own: session-unique ids per (upstream, agent id), translation both
// ways, closes from either side, an upstream's connections dropped at once, wrap-around.
import { describe, expect, it } from "vitest";
import { ConnectionMap } from "./connection-map.js";

describe("ConnectionMap", () => {
  it("gives the same agent id on two upstreams two session ids and maps both ways", () => {
    const m = new ConnectionMap<string>();
    const east = m.open("east", 1);
    const west = m.open("west", 1);
    expect(east).not.toBe(west);
    expect(m.owner(east)).toEqual({ upstream: "east", agentId: 1 });
    expect(m.owner(west)).toEqual({ upstream: "west", agentId: 1 });
    expect(m.sessionId("west", 1)).toBe(west);
    expect(m.has("east", 1) && m.has("west", 1) && !m.has("north", 1)).toBe(true);
    expect([m.size, m.countOn("east")]).toEqual([2, 1]);
  });

  it("forgets a closed connection in both directions", () => {
    const m = new ConnectionMap<string>();
    const id = m.open("east", 7);
    m.close(id);
    expect(m.owner(id)).toBeUndefined();
    expect(m.sessionId("east", 7)).toBeUndefined();
    expect(m.countOn("east")).toBe(0);
    m.close(id); // a second close is harmless
    expect(m.size).toBe(0);
  });

  it("drops every connection of one upstream and returns their session ids", () => {
    const m = new ConnectionMap<string>();
    const a = m.open("east", 1);
    const b = m.open("east", 2);
    const keep = m.open("west", 1);
    expect(m.dropUpstream("east")).toEqual([a, b]);
    expect(m.dropUpstream("east")).toEqual([]);
    expect(m.owner(a)).toBeUndefined();
    expect(m.owner(keep)).toEqual({ upstream: "west", agentId: 1 });
    expect(m.size).toBe(1);
  });

  it("never hands out an id that is still open", () => {
    const m = new ConnectionMap<string>();
    const ids = new Set<number>();
    for (let agentId = 1; agentId <= 1000; agentId++) ids.add(m.open("east", agentId));
    for (const id of [...ids].slice(0, 500)) m.close(id);
    for (let agentId = 1001; agentId <= 1500; agentId++) {
      const id = m.open("east", agentId);
      expect(m.owner(id)?.agentId).toBe(agentId);
    }
    expect(m.size).toBe(1000);
    expect(Math.min(...ids)).toBeGreaterThan(0);
  });
});
