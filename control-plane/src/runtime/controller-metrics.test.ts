import { describe, expect, it } from "vitest";
import { ControllerMetrics } from "./controller-metrics.js";

describe("ControllerMetrics", () => {
  it("publishes a running controller's errors of every kind from 0", async () => {
    const m = new ControllerMetrics();
    m.registerQueue("sessions", () => 2);
    m.error("sessions", "transient");
    const text = await m.registry.metrics();
    expect(text).toContain('switchyard_reconcile_errors_total{controller="sessions",kind="transient"} 1');
    expect(text).toContain('switchyard_reconcile_errors_total{controller="sessions",kind="terminal"} 0');
    expect(text).toContain('switchyard_reconcile_errors_total{controller="sessions",kind="conflict"} 0');
    expect(text).toContain('switchyard_reconcile_queue_depth{controller="sessions"} 2');
  });
});
