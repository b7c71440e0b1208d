// Option validation of installCrds happens before any request (the API paths are
// covered by test/integration/crds against a real API server).
import { KubeConfig } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { INVALID_OPTION } from "../../../lib/option-error.js";
import { installCrds } from "./crd-installer.js";

// Points nowhere: a test that reached the network would fail with ECONNREFUSED instead.
const kc = new KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: "none", server: "https://127.0.0.1:1", skipTLSVerify: false }],
  users: [{ name: "none" }],
  contexts: [{ name: "none", cluster: "none", user: "none" }],
  currentContext: "none",
});

describe("installCrds options", () => {
  it("refuses an unknown kind with a stable code before applying anything", async () => {
    await expect(installCrds(kc, ["Nope" as never])).rejects.toMatchObject({
      code: "SWITCHYARD_CRD_UNKNOWN_KIND",
      message: expect.stringContaining("SwitchyardOperator"),
    });
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])("refuses timeoutMs=%s", async (timeoutMs) => {
    await expect(installCrds(kc, undefined, { timeoutMs })).rejects.toMatchObject({
      code: INVALID_OPTION,
      option: "timeoutMs",
    });
  });

  it("wraps an unreachable API server in a CrdInstallError", async () => {
    await expect(installCrds(kc, ["ClusterSession"], { timeoutMs: 5_000 })).rejects.toMatchObject({
      code: "SWITCHYARD_CRD_INSTALL_FAILED",
    });
  });
});
