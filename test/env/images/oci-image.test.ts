import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeImageArchive } from "./oci-image.js";
import { TarWriter } from "./tar-archive.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "oci-image-test-"));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

function extract(archive: string, to: string): void {
  mkdirSync(to, { recursive: true });
  execFileSync("tar", ["-xf", archive, "-C", to]);
}

describe("TarWriter", () => {
  it("writes an archive tar reads back, with long paths, symlinks and modes, and hashes what it wrote", () => {
    const host = join(dir, "host-file");
    writeFileSync(host, Buffer.alloc(3 << 20, 7));
    const longDir = `${"d".repeat(90)}/${"e".repeat(60)}`;
    const tar = new TarWriter(join(dir, "a.tar"));
    tar.directory("usr");
    tar.file("usr/hello", Buffer.from("hi\n"), 0o755);
    tar.copy(`${longDir}/big`, host, 0o600);
    tar.symlink("usr/link", "hello");
    const written = tar.close();
    const bytes = readFileSync(join(dir, "a.tar"));
    expect(written).toEqual({ sha256: sha256(bytes), size: bytes.length });
    const listing = execFileSync("tar", ["-tvf", join(dir, "a.tar")], { encoding: "utf8" });
    expect(listing).toMatch(/^-rwxr-xr-x root\/root +3 .* usr\/hello$/m);
    expect(listing).toMatch(/usr\/link -> hello$/m);
    extract(join(dir, "a.tar"), join(dir, "out"));
    expect(readFileSync(join(dir, "out", longDir, "big")).equals(readFileSync(host))).toBe(true);
  });

  it("refuses a path twice", () => {
    const tar = new TarWriter(join(dir, "b.tar"));
    tar.file("x", Buffer.from("1"));
    expect(() => tar.file("x", Buffer.from("2"))).toThrow(/twice/);
    tar.close();
  });
});

describe("writeImageArchive", () => {
  it("writes an OCI image layout whose digests, config and name agree", () => {
    const image = writeImageArchive(
      {
        name: "switchyard.test/demo:1",
        files: [
          { path: "/app/main.js", content: "console.log(1)\n" },
          { path: "/tmp", directory: true, mode: 0o1777 },
          { path: "/bin/app", symlink: "/app/main.js" },
        ],
        entrypoint: ["/usr/local/bin/node"],
        cmd: ["/app/main.js"],
      },
      join(dir, "images", "demo.tar"),
    );
    const out = join(dir, "layout");
    extract(image.file, out);
    const blob = (digest: string) =>
      readFileSync(join(out, "blobs", "sha256", digest.replace("sha256:", "")));
    expect(JSON.parse(readFileSync(join(out, "oci-layout"), "utf8"))).toEqual({
      imageLayoutVersion: "1.0.0",
    });
    const index = JSON.parse(readFileSync(join(out, "index.json"), "utf8"));
    const entry = index.manifests[0];
    expect(entry.annotations["io.containerd.image.name"]).toBe("switchyard.test/demo:1");
    expect(entry.digest).toBe(image.manifestDigest);
    expect(`sha256:${sha256(blob(entry.digest))}`).toBe(entry.digest);
    const manifest = JSON.parse(blob(entry.digest).toString());
    const config = JSON.parse(blob(manifest.config.digest).toString());
    expect(config.config.Entrypoint).toEqual(["/usr/local/bin/node"]);
    expect(config.config.Cmd).toEqual(["/app/main.js"]);
    const layer = blob(manifest.layers[0].digest);
    expect(`sha256:${sha256(layer)}`).toBe(manifest.layers[0].digest);
    expect(config.rootfs.diff_ids).toEqual([manifest.layers[0].digest]);
    writeFileSync(join(dir, "layer.tar"), layer);
    const listing = execFileSync("tar", ["-tvf", join(dir, "layer.tar")], { encoding: "utf8" });
    expect(listing).toMatch(/^drwxr-xr-x .* app\/$/m);
    expect(listing).toMatch(/^drwxrwxrwt .* tmp\/$/m);
    expect(listing).toMatch(/bin\/app -> \/app\/main.js$/m);
  });

  it("gives the same bytes for the same input", () => {
    const spec = { name: "switchyard.test/same:1", files: [{ path: "/a", content: "a" }] };
    const a = writeImageArchive(spec, join(dir, "a.tar"));
    const b = writeImageArchive(spec, join(dir, "b.tar"));
    expect(a.manifestDigest).toBe(b.manifestDigest);
    expect(readFileSync(a.file).equals(readFileSync(b.file))).toBe(true);
  });
});
