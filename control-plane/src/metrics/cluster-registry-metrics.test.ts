import { describe, expect, it } from "vitest";
import { ClusterRegistryMetrics } from "./cluster-registry-metrics.js";

describe("ClusterRegistryMetrics", () => {
  it("publishes connectivity, renewals, expiry, leadership and check latency", async () => {
    const m = new ClusterRegistryMetrics();
    m.setStateProvider(() => ({
      leader: true,
      clusters: [
        { cluster: "east", authType: "bearerToken", connected: true, credentialExpiresAt: 1_800_000_000_000 },
        { cluster: "onprem", authType: "mtls", connected: false },
      ],
    }));
    m.recordRenewal("bearerToken", "success");
    m.recordRenewal("bearerToken", "success");
    m.recordRenewal("eks", "failure");
    m.observeCheck("east", 0.02);
    const text = await m.registry.metrics();
    expect(text).toContain('switchyard_remote_cluster_connected{cluster="east",auth_type="bearerToken"} 1');
    expect(text).toContain('switchyard_remote_cluster_connected{cluster="onprem",auth_type="mtls"} 0');
    expect(text).toContain(
      'switchyard_remote_credential_renewals_total{auth_type="bearerToken",outcome="success"} 2',
    );
    expect(text).toContain(
      'switchyard_remote_credential_renewals_total{auth_type="eks",outcome="failure"} 1',
    );
    expect(text).toContain(
      'switchyard_remote_credential_expiry_timestamp_seconds{cluster="east",auth_type="bearerToken"} 1800000000',
    );
    expect(text).toContain("switchyard_control_plane_leader 1");
    expect(text).toContain('switchyard_remote_cluster_check_duration_seconds_count{cluster="east"} 1');
  });

  it("publishes renewals from 0 for every configured auth type that renews, not for mtls", async () => {
    const m = new ClusterRegistryMetrics();
    m.setStateProvider(() => ({
      leader: false,
      clusters: [
        { cluster: "east", authType: "bearerToken", connected: true },
        { cluster: "onprem", authType: "mtls", connected: true },
      ],
    }));
    const text = await m.registry.metrics();
    for (const outcome of ["success", "failure"])
      expect(text).toContain(
        `switchyard_remote_credential_renewals_total{auth_type="bearerToken",outcome="${outcome}"} 0`,
      );
    expect(text).not.toMatch(/renewals_total\{auth_type="(mtls|eks)"/);
  });

  it("counts rejected ConfigMaps and Secrets by source, from 0", async () => {
    const m = new ClusterRegistryMetrics();
    expect(await m.registry.metrics()).toContain(
      'switchyard_cluster_config_rejections_total{source="secret"} 0',
    );
    m.recordRejection("secret");
    m.recordRejection("secret");
    m.recordRejection("configmap");
    const text = await m.registry.metrics();
    expect(text).toContain('switchyard_cluster_config_rejections_total{source="secret"} 2');
    expect(text).toContain('switchyard_cluster_config_rejections_total{source="configmap"} 1');
    expect(m.rejectionCount()).toEqual({ configmap: 1, secret: 2 });
  });
});
