import { describe, expect, it } from "vitest";
import { BranchSyncMetrics } from "./branch-sync-metrics.js";

describe("BranchSyncMetrics", () => {
  it("publishes sync steps by kind and result, and the Ready latency by kind", async () => {
    const m = new BranchSyncMetrics();
    m.count("PgBranchDatabase", "created");
    m.count("PgBranchDatabase", "created");
    m.count("MysqlBranchDatabase", "conflict");
    m.observeReady("PgBranchDatabase", 0.2);
    expect(m.value("PgBranchDatabase", "created")).toBe(2);
    expect(m.value("PgBranchDatabase", "conflict")).toBe(0);
    const text = await m.registry.metrics();
    expect(text).toContain('switchyard_branch_syncs_total{kind="PgBranchDatabase",result="created"} 2');
    expect(text).toContain('switchyard_branch_syncs_total{kind="MysqlBranchDatabase",result="conflict"} 1');
    expect(text).toContain('switchyard_branch_ready_seconds_bucket{le="0.25",kind="PgBranchDatabase"} 1');
    expect(text).toContain('switchyard_branch_ready_seconds_bucket{le="0.1",kind="PgBranchDatabase"} 0');
  });
});
