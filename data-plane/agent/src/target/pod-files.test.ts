import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ErrorCode } from "../../../../proto/error-codes.js";
import { testScratchDir } from "../../../../test/support/scratch-dir.js";
import { PodFiles } from "./pod-files.js";
import type { FileAccessError } from "./volume-files.js";

const STAMP = "..2026_01_02_03_04_05.123456789";

/**
 * A target root as the kubelet lays it out below --target-root: a ConfigMap volume (files
 * behind `..data` symlinks), an emptyDir with symlinks of every kind, a subPath file, and a
 * secret next to the root that nothing may reach.
 */
function layout(): { root: string; files: PodFiles; outside: string } {
  const dir = testScratchDir("sy-pod-files-");
  const root = join(dir, "root");
  const outside = join(dir, "outside.txt");
  writeFileSync(outside, "not the app's");
  const cm = join(root, "etc/config");
  mkdirSync(join(cm, STAMP, "nested"), { recursive: true });
  writeFileSync(join(cm, STAMP, "app.yaml"), "port: 8080\n");
  writeFileSync(join(cm, STAMP, "nested/x"), "x");
  chmodSync(join(cm, STAMP, "app.yaml"), 0o644);
  symlinkSync(STAMP, join(cm, "..data"));
  symlinkSync("..data/app.yaml", join(cm, "app.yaml"));
  symlinkSync("..data/nested", join(cm, "nested"));
  const data = join(root, "data");
  mkdirSync(join(data, "sub"), { recursive: true });
  writeFileSync(join(data, "file.txt"), "hello");
  chmodSync(join(data, "file.txt"), 0o600);
  symlinkSync("../../outside.txt", join(data, "escape"));
  symlinkSync("sub/../../../outside.txt", join(data, "escape-deep"));
  symlinkSync(outside, join(data, "absolute-out"));
  symlinkSync("/etc/passwd", join(data, "image-file"));
  symlinkSync("/data/file.txt", join(data, "absolute-in"));
  symlinkSync("/etc/config/app.yaml", join(data, "other-volume"));
  symlinkSync("loop", join(data, "loop"));
  symlinkSync("..", join(data, "parent"));
  mkdirSync(join(root, "app"), { recursive: true });
  writeFileSync(join(root, "app/settings.yaml"), "debug: true\n");
  return { root, files: new PodFiles(root, ["/etc/config", "/data/", "/app/settings.yaml"]), outside };
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as FileAccessError).code;
  }
  return "ok";
}

describe("PodFiles", () => {
  it("serves a ConfigMap volume through its ..data symlinks, with real modes", async () => {
    const { files } = layout();
    expect((await files.readFile("/etc/config/app.yaml")).toString()).toBe("port: 8080\n");
    expect((await files.readFile("/etc/config/nested/x")).toString()).toBe("x");
    expect(await files.stat("/etc/config/app.yaml")).toEqual({ type: "file", size: 11, mode: 0o644 });
    expect(await files.readDir("/etc/config")).toEqual([
      { name: STAMP, type: "directory" },
      { name: "..data", type: "directory" },
      { name: "app.yaml", type: "file" },
      { name: "nested", type: "directory" },
    ]);
    expect((await files.stat("/etc/config")).type).toBe("directory");
  });

  it("serves shared volumes and subPath files as they are", async () => {
    const { files } = layout();
    expect(await files.stat("/data/file.txt")).toEqual({ type: "file", size: 5, mode: 0o600 });
    expect((await files.readFile("/data/file.txt")).toString()).toBe("hello");
    expect((await files.readFile("app/settings.yaml")).toString()).toBe("debug: true\n");
    expect((await files.readFile("/data/./sub/../file.txt")).toString()).toBe("hello");
  });

  it("follows absolute symlinks in the app's view, into the same or another volume", async () => {
    const { files } = layout();
    expect((await files.readFile("/data/absolute-in")).toString()).toBe("hello");
    expect((await files.readFile("/data/other-volume")).toString()).toBe("port: 8080\n");
  });

  it("answers FILE_NOT_FOUND for a missing file under a mount", async () => {
    const { files } = layout();
    expect(await code(files.readFile("/data/nope"))).toBe(ErrorCode.FILE_NOT_FOUND);
    expect(await code(files.stat("/etc/config/missing.yaml"))).toBe(ErrorCode.FILE_NOT_FOUND);
    expect(await code(files.readDir("/data/none"))).toBe(ErrorCode.FILE_NOT_FOUND);
    expect(await code(files.readFile("/data/file.txt/x"))).toBe(ErrorCode.FILE_NOT_DIRECTORY);
    expect(await code(files.readFile("/data/sub"))).toBe(ErrorCode.FILE_IS_DIRECTORY);
  });

  it("answers FILE_NOT_AVAILABLE with the reason for the image's files", async () => {
    const { files } = layout();
    await expect(files.readFile("/etc/passwd")).rejects.toMatchObject({
      code: ErrorCode.FILE_NOT_AVAILABLE,
      message: expect.stringContaining(
        "not in a volume the agent shares: files of the container's image are not served",
      ),
    });
    for (const p of ["/etc", "/", "/app", "/data2/x", "/etc/config/../../etc/passwd", "../../outside.txt"])
      expect(await code(files.stat(p)), p).toBe(ErrorCode.FILE_NOT_AVAILABLE);
  });

  it("never lets a symlink escape the volumes", async () => {
    const { files, outside } = layout();
    for (const p of [
      "/data/escape",
      "/data/escape-deep",
      "/data/absolute-out",
      "/data/image-file",
      "/data/parent/etc/passwd",
    ]) {
      expect(await code(files.readFile(p)), p).toBe(ErrorCode.FILE_NOT_AVAILABLE);
      expect(await code(files.stat(p)), p).toBe(ErrorCode.FILE_NOT_AVAILABLE);
    }
    expect(await code(files.readDir("/data/parent"))).toBe(ErrorCode.FILE_NOT_AVAILABLE);
    expect(await code(files.readFile(outside))).toBe(ErrorCode.FILE_NOT_AVAILABLE);
    expect(await code(files.readFile("/data/loop"))).toBe(ErrorCode.FILE_NOT_AVAILABLE);
    // A listing shows the links themselves, as ls does.
    expect((await files.readDir("/data")).map((e) => e.name)).toContain("escape");
  });

  it("does not open FIFOs or files over the size limit", async () => {
    const { root } = layout();
    execFileSync("mkfifo", [join(root, "data/pipe")]);
    writeFileSync(join(root, "data/big"), Buffer.alloc(10));
    const files = new PodFiles(root, ["/data"], { maxFileBytes: 9 });
    expect(await code(files.readFile("/data/pipe"))).toBe(ErrorCode.FILE_NOT_AVAILABLE);
    await expect(files.readFile("/data/big")).rejects.toMatchObject({
      code: ErrorCode.FILE_NOT_AVAILABLE,
      message: expect.stringContaining("10 bytes"),
    });
    expect((await files.stat("/data/big")).size).toBe(10);
  });

  it("lists the target's mount paths, normalized, once each, longest first", async () => {
    const { files } = layout();
    const paths = await files.mounts();
    expect(paths).toEqual(["/app/settings.yaml", "/etc/config", "/data"]);
    paths.pop(); // a copy: the caller cannot change what is served
    expect(await files.mounts()).toEqual(["/app/settings.yaml", "/etc/config", "/data"]);
    expect(await new PodFiles("/r", ["/a//b/", "/a/b", "/", "/a/./b/c/.."]).mounts()).toEqual(["/a/b", "/"]);
    expect(await new PodFiles("/r", []).mounts()).toEqual([]);
  });

  it("refuses relative roots and mount paths, naming the flag", () => {
    expect(() => new PodFiles("root", [])).toThrow(/--target-root/);
    expect(() => new PodFiles("/root", ["etc"])).toThrow(/--target-mount/);
  });
});
