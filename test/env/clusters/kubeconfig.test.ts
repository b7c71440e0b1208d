import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { kubeconfigYaml, loadKubeConfig } from "./kubeconfig.js";

describe("kubeconfig", () => {
  it("embeds the CA and client certificate so the file stands alone", () => {
    const text = kubeconfigYaml({
      clusterName: "east",
      server: "https://127.0.0.1:6443",
      caPem: "CA",
      user: "alice",
      certPem: "CERT",
      keyPem: "KEY",
    });
    const kc = loadKubeConfig(text);
    expect(kc.getCurrentCluster()?.server).toBe("https://127.0.0.1:6443");
    expect(Buffer.from(kc.getCurrentCluster()!.caData!, "base64").toString()).toBe("CA");
    expect(Buffer.from(kc.getCurrentUser()!.certData!, "base64").toString()).toBe("CERT");
    expect(Buffer.from(kc.getCurrentUser()!.keyData!, "base64").toString()).toBe("KEY");
    expect(parse(text)["current-context"]).toBe("east");
  });

  it("carries a bearer token instead of a certificate", () => {
    const kc = loadKubeConfig(
      kubeconfigYaml({
        clusterName: "w",
        server: "https://127.0.0.1:1",
        caPem: "CA",
        user: "robot",
        token: "t0k",
      }),
    );
    expect(kc.getCurrentUser()?.token).toBe("t0k");
    expect(kc.getCurrentUser()?.certData).toBeUndefined();
  });
});
