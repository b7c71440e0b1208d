import { describe, expect, it } from "vitest";
import { SessionMetrics } from "./session-metrics.js";

describe("SessionMetrics", () => {
  it("publishes refused sessions by the allow-list's reasons, from 0, others as Other", async () => {
    const m = new SessionMetrics();
    expect(await m.registry.metrics()).toContain('switchyard_sessions_invalid{reason="TargetNotAllowed"} 0');
    m.setRefusalSource(() => [
      "NamespaceNotAllowed",
      "NamespaceNotAllowed",
      "InvalidTarget",
      "Written by hand",
    ]);
    const text = await m.registry.metrics();
    expect(text).toContain('switchyard_sessions_invalid{reason="NamespaceNotAllowed"} 2');
    expect(text).toContain('switchyard_sessions_invalid{reason="InvalidTarget"} 1');
    expect(text).toContain('switchyard_sessions_invalid{reason="TargetKindNotAllowed"} 0');
    expect(text).toContain('switchyard_sessions_invalid{reason="Other"} 1');
    expect(text).not.toContain("Written by hand");
  });
});
