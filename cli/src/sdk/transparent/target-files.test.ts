import { describe, expect, it } from "vitest";
import { collectTargetFiles, type TargetFileSource } from "./target-files.js";

/** A ConfigMap volume as the kubelet writes it: key → ..data/key → ..2026_…/key. */
const TREE: Record<string, string | string[]> = {
  "/etc/demo": ["..2026_11_24", "..data", "settings.yaml"],
  "/etc/demo/..2026_11_24": ["settings.yaml"],
  "/etc/demo/..data": ["settings.yaml"],
  "/etc/demo/settings.yaml": "cluster: east\n",
  "/var/run/secrets/token": "secret-token",
};

function source(overrides: Partial<TargetFileSource> = {}): TargetFileSource {
  return {
    mounts: async () => ({
      paths: ["/var/run/secrets/token", "/etc/demo"],
      resolvConf: "nameserver 10.96.0.10\n",
    }),
    stat: async (p) => {
      const v = TREE[p];
      if (v === undefined) throw new Error(`ENOENT: ${p}`);
      return {
        size: Array.isArray(v) ? 0 : v.length,
        mode: Array.isArray(v) ? 0o40755 : 0o100640,
        isDir: Array.isArray(v),
      };
    },
    readDir: async (p) =>
      (TREE[p] as string[]).map((name) => ({ name, isDir: Array.isArray(TREE[`${p}/${name}`]) })),
    readWholeFile: async (p) => Buffer.from(TREE[p] as string),
    ...overrides,
  };
}

describe("target files", () => {
  it("reads every file under the mounts, without the kubelet's bookkeeping, with its mode", async () => {
    const t = await collectTargetFiles(source());
    expect(t.files.map((f) => [f.path, f.mode, Buffer.from(f.data, "base64").toString()])).toEqual([
      ["/etc/demo/settings.yaml", 0o640, "cluster: east\n"],
      ["/var/run/secrets/token", 0o640, "secret-token"],
    ]);
    expect(t.resolvConf).toBe("nameserver 10.96.0.10\n");
    expect(t.skipped).toEqual([]);
  });

  it("reports --files paths the agent cannot read, and stops at its limits", async () => {
    const t = await collectTargetFiles(source(), { extraPaths: ["/app/config.yaml"], maxFiles: 1 });
    expect(t.files).toHaveLength(1);
    expect(t.skipped.map((s) => s.path)).toEqual(["/var/run/secrets/token", "/app/config.yaml"]);
    expect(t.skipped[0]!.reason).toMatch(/over the limit of 1 files/);
  });

  it("goes on without files when the agent cannot list the mounts", async () => {
    const t = await collectTargetFiles(source({ mounts: () => Promise.reject(new Error("ENOSYS")) }));
    expect(t).toEqual({
      files: [],
      mounts: [],
      resolvConf: "",
      skipped: [{ path: "the target's mounts", reason: "ENOSYS" }],
    });
  });
});
