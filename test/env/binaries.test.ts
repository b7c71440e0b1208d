import { afterEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { binaryCacheDir, binaryPath, ensureBinaries } from "./binaries.js";
import { versions } from "./versions.js";

const saved = { PATH: process.env.PATH, cache: process.env.SWITCHYARD_BIN_CACHE };
let dir: string | undefined;

afterEach(() => {
  process.env.PATH = saved.PATH;
  if (saved.cache === undefined) delete process.env.SWITCHYARD_BIN_CACHE;
  else process.env.SWITCHYARD_BIN_CACHE = saved.cache;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("binaries", () => {
  it("names binaries by version in the cache directory", () => {
    process.env.SWITCHYARD_BIN_CACHE = "/x/cache";
    expect(binaryCacheDir()).toBe("/x/cache");
    expect(binaryPath("kube-apiserver")).toBe(`/x/cache/kube-apiserver-v${versions.kubernetes}`);
    expect(binaryPath("etcd")).toBe(`/x/cache/etcd-v${versions.etcd}`);
  });

  it("stops with a message saying what is needed when Go is missing", async () => {
    dir = mkdtempSync(join(tmpdir(), "switchyard-bin-test-"));
    process.env.SWITCHYARD_BIN_CACHE = dir;
    process.env.PATH = "/nonexistent";
    await expect(ensureBinaries(["etcd"], () => {})).rejects.toThrow(
      /no Go toolchain was found on PATH\. Install Go >= /,
    );
  });
});
