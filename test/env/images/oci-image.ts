// Container images without Docker and without a registry: an image is described as lists of
// files (host files, host trees, host binaries with their shared-library closure, or literal
// content), one list per layer, plus its config (entrypoint, cmd, user, env, working
// directory), and written as a reproducible OCI image-layout archive (uncompressed layers) that
// `ctr -n k8s.io images import` takes as it is. Pods run them with `imagePullPolicy: Never`.
// The images the real nodes need are here too: the pod sandbox (`pause`, coreutils `sleep`),
// and a Node.js runtime (the pinned Node of node-binary.ts).
import { createHash } from "node:crypto";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
} from "node:fs";
import { dirname, join, posix } from "node:path";
import { hostOutput } from "../nodes/host-command.js";
import { imageNodeBinary } from "./node-binary.js";
import { TarWriter } from "./tar-archive.js";

/** One entry of an image's filesystem, at an absolute path inside the image. */
export type ImageFile =
  | { path: string; source: string; mode?: number }
  | { path: string; content: string | Buffer; mode?: number }
  | { path: string; symlink: string }
  | { path: string; directory: true; mode?: number };

export interface ImageSpec {
  /** Full reference, e.g. `switchyard.test/node:1` (what a pod's `image:` names). */
  name: string;
  /** The first (bottom) layer. */
  files: ImageFile[];
  /** Further layers, bottom to top; a path in a higher layer replaces the one below. */
  layers?: ImageFile[][];
  entrypoint?: string[];
  cmd?: string[];
  /** `KEY=value` entries; default a PATH only. */
  env?: string[];
  workingDir?: string;
  /** `uid[:gid]` (numeric, so runAsNonRoot can verify it). */
  user?: string;
  /** Ports as `8443/tcp`. */
  exposedPorts?: string[];
}

export interface ImageArchive {
  name: string;
  /** The OCI image-layout tar to import. */
  file: string;
  /** `sha256:…` of the image manifest. */
  manifestDigest: string;
  /** Size of the archive in bytes. */
  bytes: number;
}

export class OciImageError extends Error {
  readonly code = "SWITCHYARD_TEST_IMAGE_FAILED";
}

/** The PATH of an image that sets no other (Debian's default). */
export const PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * A host binary and every shared library `ldd` says it loads, at the same paths in the image
 * (symlinks resolved to their content), so a dynamically linked program runs in an image with
 * nothing else in it. `as` places the binary elsewhere in the image.
 */
export async function hostBinary(path: string, as = path): Promise<ImageFile[]> {
  if (!existsSync(path)) throw new OciImageError(`${path} does not exist on this host`);
  const files: ImageFile[] = [{ path: as, source: realpathSync(path), mode: 0o755 }];
  for (const lib of await sharedLibraries(path)) files.push({ path: lib, source: realpathSync(lib) });
  return files;
}

/** The shared libraries (and the ELF interpreter) a binary or library loads, per `ldd`. */
export async function sharedLibraries(path: string): Promise<string[]> {
  const out = await hostOutput("ldd", [path], { allowFailure: true, timeoutMs: 10_000 });
  if (/not a dynamic executable/.test(out)) return [];
  const libs: string[] = [];
  for (const line of out.split("\n")) {
    const m = /=>\s+(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m) libs.push(m[1]!);
    else if (/=>\s+not found/.test(line)) throw new OciImageError(`${path}: ${line.trim()}`);
  }
  return libs;
}

/** Every parent directory of the image's paths, so the layer lists them before their content. */
function parentDirectories(paths: string[]): string[] {
  const dirs = new Set<string>();
  for (const p of paths) {
    for (let d = posix.dirname(p); d !== "/" && d !== "."; d = posix.dirname(d)) dirs.add(d);
  }
  return [...dirs].sort();
}

const rel = (p: string) => p.replace(/^\/+/, "");

function sha256(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** Writes one layer: parent directories first, then every path once, sorted (same input, same bytes). */
function writeLayer(files: ImageFile[], layerFile: string): { sha256: string; size: number; file: string } {
  // Later entries replace earlier ones with the same path (a closure lists libc many times).
  const byPath = new Map<string, ImageFile>();
  for (const f of files) {
    if (!f.path.startsWith("/")) throw new OciImageError(`image path must be absolute: ${f.path}`);
    byPath.set(posix.normalize(f.path), f);
  }
  const layer = new TarWriter(layerFile);
  const explicitDirs = new Set([...byPath.entries()].filter(([, f]) => "directory" in f).map(([p]) => p));
  for (const d of parentDirectories([...byPath.keys()])) if (!explicitDirs.has(d)) layer.directory(rel(d));
  for (const [path, f] of [...byPath.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if ("directory" in f) layer.directory(rel(path), f.mode ?? 0o755);
    else if ("symlink" in f) layer.symlink(rel(path), f.symlink);
    else if ("source" in f) layer.copy(rel(path), f.source, f.mode);
    else layer.file(rel(path), Buffer.from(f.content), f.mode ?? 0o644);
  }
  return { ...layer.close(), file: layerFile };
}

/**
 * Every entry under host directory `dir`, placed under `as` in the image: directories,
 * regular files (mode kept, owner root as Docker's COPY does) and symlinks as they are.
 */
export function hostTree(dir: string, as: string): ImageFile[] {
  const files: ImageFile[] = [{ path: as, directory: true, mode: statSync(dir).mode & 0o7777 }];
  for (const name of readdirSync(dir).sort()) {
    const host = join(dir, name);
    const path = posix.join(as, name);
    const st = lstatSync(host);
    if (st.isSymbolicLink()) files.push({ path, symlink: readlinkSync(host) });
    else if (st.isDirectory()) files.push(...hostTree(host, path));
    else if (st.isFile()) files.push({ path, source: host, mode: st.mode & 0o7777 });
  }
  return files;
}

/** Writes `spec` as an OCI image-layout archive at `file` (its directory is used for scratch). */
export function writeImageArchive(spec: ImageSpec, file: string): ImageArchive {
  const scratch = `${file}.d`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  try {
    const layers = [spec.files, ...(spec.layers ?? [])].map((files, i) =>
      writeLayer(files, join(scratch, `layer-${i}.tar`)),
    );
    const config = JSON.stringify({
      architecture: "amd64",
      os: "linux",
      config: {
        Env: spec.env ?? [PATH_ENV],
        ...(spec.entrypoint ? { Entrypoint: spec.entrypoint } : {}),
        ...(spec.cmd ? { Cmd: spec.cmd } : {}),
        ...(spec.workingDir ? { WorkingDir: spec.workingDir } : {}),
        ...(spec.user ? { User: spec.user } : {}),
        ...(spec.exposedPorts
          ? { ExposedPorts: Object.fromEntries(spec.exposedPorts.map((p) => [p, {}])) }
          : {}),
      },
      rootfs: { type: "layers", diff_ids: layers.map((l) => `sha256:${l.sha256}`) },
    });
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {
        mediaType: "application/vnd.oci.image.config.v1+json",
        digest: `sha256:${sha256(config)}`,
        size: Buffer.byteLength(config),
      },
      layers: layers.map((l) => ({
        mediaType: "application/vnd.oci.image.layer.v1.tar",
        digest: `sha256:${l.sha256}`,
        size: l.size,
      })),
    });
    const manifestDigest = `sha256:${sha256(manifest)}`;
    const tag = spec.name.slice(spec.name.lastIndexOf(":") + 1);
    const index = JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [
        {
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          digest: manifestDigest,
          size: Buffer.byteLength(manifest),
          platform: { architecture: "amd64", os: "linux" },
          annotations: { "io.containerd.image.name": spec.name, "org.opencontainers.image.ref.name": tag },
        },
      ],
    });
    mkdirSync(dirname(file), { recursive: true });
    const archive = new TarWriter(file);
    archive.file("oci-layout", Buffer.from(JSON.stringify({ imageLayoutVersion: "1.0.0" })));
    archive.file("index.json", Buffer.from(index));
    archive.directory("blobs");
    archive.directory("blobs/sha256");
    archive.file(`blobs/sha256/${sha256(config)}`, Buffer.from(config));
    archive.file(`blobs/sha256/${manifestDigest.slice(7)}`, Buffer.from(manifest));
    for (const l of layers)
      if (!archive.has(`blobs/sha256/${l.sha256}`)) archive.copy(`blobs/sha256/${l.sha256}`, l.file, 0o644);
    const written = archive.close();
    return { name: spec.name, file, manifestDigest, bytes: written.size };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Directories every image gets, so the runtime can mount /etc/hosts, /tmp, /proc… into it. */
export function baseDirectories(): ImageFile[] {
  return [
    { path: "/etc", directory: true },
    { path: "/tmp", directory: true, mode: 0o1777 },
    { path: "/proc", directory: true },
    { path: "/sys", directory: true },
    { path: "/dev", directory: true },
    {
      path: "/etc/passwd",
      content: "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534::/:/sbin/nologin\n",
    },
    { path: "/etc/group", content: "root:x:0:\nnogroup:x:65534:\n" },
  ];
}

/** The pod sandbox image: coreutils `sleep infinity` (the runtime stops sandboxes with SIGKILL). */
export async function pauseImage(name = "switchyard.test/pause:1"): Promise<ImageSpec> {
  return {
    name,
    files: [...baseDirectories(), ...(await hostBinary("/usr/bin/sleep", "/pause"))],
    entrypoint: ["/pause", "infinity"],
  };
}

/**
 * A Node.js runtime: the pinned Node (node-binary.ts; the Dockerfile's major) at
 * /usr/local/bin/node, where node:*-bookworm-slim has it, with the host's copies of the shared
 * libraries `ldd` lists for it (the host is Debian like that image); entrypoint `node`.
 */
export async function nodeRuntimeImage(name = "switchyard.test/node:1"): Promise<ImageSpec> {
  return {
    name,
    files: [...baseDirectories(), ...(await hostBinary(imageNodeBinary(), "/usr/local/bin/node"))],
    entrypoint: ["/usr/local/bin/node"],
  };
}
