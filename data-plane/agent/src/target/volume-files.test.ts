// VolumeFiles' mount list: the container's mounts of the volume kinds it serves (from the API,
// or shared with the agent), never those it would answer FILE_NOT_AVAILABLE for.
import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { VolumeFiles, type VolumeSources } from "./volume-files.js";

const sources: VolumeSources = {
  configMap: () => Promise.resolve({ "app.yaml": Buffer.from("port: 8080\n") }),
  secret: () => Promise.resolve({ password: Buffer.from("hunter2") }),
};

const pod: V1Pod = {
  metadata: { name: "shop-0", namespace: "shop" },
  spec: {
    containers: [
      {
        name: "app",
        volumeMounts: [
          { name: "config", mountPath: "/etc/shop/" },
          { name: "creds", mountPath: "/var/run/creds" },
          { name: "cache", mountPath: "/data/cache" },
          { name: "info", mountPath: "/etc/podinfo" },
          { name: "token", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount" },
          { name: "config", mountPath: "/etc/shop/app.yaml", subPath: "app.yaml" },
          { name: "host", mountPath: "/host" },
        ],
      },
      { name: "worker", volumeMounts: [{ name: "creds", mountPath: "/creds" }] },
    ],
    volumes: [
      { name: "config", configMap: { name: "shop-config" } },
      { name: "creds", secret: { secretName: "shop-creds" } },
      { name: "cache", emptyDir: {} },
      { name: "info", downwardAPI: { items: [{ path: "name", fieldRef: { fieldPath: "metadata.name" } }] } },
      {
        name: "token",
        projected: { sources: [{ serviceAccountToken: { path: "token" } }, { configMap: { name: "ca" } }] },
      },
      { name: "host", hostPath: { path: "/var/log" } },
    ],
  },
};

describe("VolumeFiles.mounts", () => {
  it("lists the mounts of API-backed volumes, normalized, longest first", async () => {
    const files = new VolumeFiles(pod, sources);
    expect(await files.mounts()).toEqual([
      "/var/run/secrets/kubernetes.io/serviceaccount",
      "/etc/shop/app.yaml",
      "/var/run/creds",
      "/etc/podinfo",
      "/etc/shop",
    ]);
    // The emptyDir and hostPath mounts are left out: their files are not served.
    await expect(files.stat("/data/cache/x")).rejects.toMatchObject({ code: ErrorCode.FILE_NOT_AVAILABLE });
    expect((await files.readFile("/etc/shop/app.yaml")).toString()).toBe("port: 8080\n");
  });

  it("adds the volumes the agent shares, and follows the chosen container", async () => {
    const shared = new VolumeFiles(pod, sources, { sharedVolumes: new Map([["cache", "/mnt/cache"]]) });
    expect(await shared.mounts()).toContain("/data/cache");
    expect(await shared.mounts()).not.toContain("/host");
    expect(await new VolumeFiles(pod, sources, { container: "worker" }).mounts()).toEqual(["/creds"]);
    const bare: V1Pod = { metadata: { name: "p" }, spec: { containers: [{ name: "app" }] } };
    expect(await new VolumeFiles(bare, sources).mounts()).toEqual([]);
  });
});
