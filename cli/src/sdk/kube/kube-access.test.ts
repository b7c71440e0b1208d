import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { defaultKubeconfigSource } from "./kube-access.js";

let home: string | undefined;
afterEach(() => {
  if (home) rmSync(home, { recursive: true, force: true });
  home = undefined;
});

describe("defaultKubeconfigSource", () => {
  it("is undefined with no KUBECONFIG, no ~/.kube/config and no pod", () => {
    home = mkdtempSync(join(tmpdir(), "sy-kube-home-"));
    expect(defaultKubeconfigSource({}, home)).toBeUndefined();
  });

  it("names KUBECONFIG, then ~/.kube/config, then the pod's service account", () => {
    home = mkdtempSync(join(tmpdir(), "sy-kube-home-"));
    expect(defaultKubeconfigSource({ KUBERNETES_SERVICE_HOST: "10.0.0.1" }, home)).toBe(
      "the pod's service account",
    );
    mkdirSync(join(home, ".kube"));
    writeFileSync(join(home, ".kube", "config"), "apiVersion: v1\n");
    expect(defaultKubeconfigSource({}, home)).toBe(join(home, ".kube", "config"));
    expect(defaultKubeconfigSource({ KUBECONFIG: "/etc/kc" }, home)).toBe("$KUBECONFIG (/etc/kc)");
  });
});
