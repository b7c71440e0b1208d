import { describe, expect, it } from "vitest";
import { RouterMetrics } from "./router-metrics.js";

describe("RouterMetrics", () => {
  it("publishes upstream reconnects of every known cluster, from 0", async () => {
    const m = new RouterMetrics({
      activeSessions: () => 0,
      upstreamLinks: () => [],
      bufferedBytes: () => ({ client: 0, upstream: 0 }),
      table: () => ({ sessions: 0, updatedAtSeconds: 0 }),
      mux: () => ({ dialled: { connections: 1, channels: 5 }, accepted: { connections: 0, channels: 0 } }),
    });
    m.clusterCounters("east");
    m.clusterCounters("west").reconnects = 3;
    const text = await m.registry.metrics();
    expect(text).toContain('switchyard_router_upstream_reconnects_total{cluster="east"} 0');
    expect(text).toContain('switchyard_router_upstream_reconnects_total{cluster="west"} 3');
    expect(text).toContain('switchyard_router_mux_channels{side="dialled"} 5');
  });
});
