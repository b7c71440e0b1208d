import { describe, expect, it } from "vitest";
import { RouteDiscoveryMetrics } from "./route-discovery-metrics.js";

describe("RouteDiscoveryMetrics", () => {
  it("publishes protocol errors from 0 for the codes a stream is ended with, and counts others too", async () => {
    const m = new RouteDiscoveryMetrics({
      connectedRouters: () => 1,
      version: () => "v1",
      sessions: () => 0,
    });
    m.protocolError("INVALID_ARGUMENT");
    m.protocolError("UNKNOWN");
    const text = await m.registry.metrics();
    expect(text).toContain('switchyard_route_discovery_protocol_errors_total{code="INVALID_ARGUMENT"} 1');
    expect(text).toContain('switchyard_route_discovery_protocol_errors_total{code="DEADLINE_EXCEEDED"} 0');
    expect(text).toContain('switchyard_route_discovery_protocol_errors_total{code="RESOURCE_EXHAUSTED"} 0');
    expect(text).toContain('switchyard_route_discovery_protocol_errors_total{code="UNKNOWN"} 1');
    expect(m.counts.protocolErrors.size).toBe(2); // only what happened
  });
});
