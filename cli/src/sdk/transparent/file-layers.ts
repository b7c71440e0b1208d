// The target's files at their in-pod paths, in the command's mount namespace (run by the
// helper, root of its user namespace). Each file is written to the helper's tmpfs, and the
// deepest directory of this machine that holds it (its anchor, e.g. /etc for
// /etc/app/config.yaml) is covered by a read-only overlay: the file's layer over the
// machine's own directory, so everything else there stays the laptop's. Without overlays
// (kernels before 5.11), files that exist on this machine are covered one by one by a bind
// mount and the others are reported.
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, posix } from "node:path";
import type { LayerFile } from "./bridge-protocol.js";

export interface LayerResult {
  /** Anchors covered by an overlay. */
  overlays: string[];
  /** Files bound one by one. */
  bound: string[];
  /** Files that could not be shown, each with why. */
  skipped: Array<{ path: string; reason: string }>;
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The deepest existing directory above `path` (path's own parent when path exists). */
export function anchorOf(path: string, dirExists: (p: string) => boolean = isDir): string {
  let dir = posix.dirname(posix.normalize(path));
  while (dir !== "/" && !dirExists(dir)) dir = posix.dirname(dir);
  return dir;
}

/** Groups files by anchor, an anchor inside another one merged into the outer one. */
export function groupByAnchor(
  files: readonly LayerFile[],
  dirExists: (p: string) => boolean = isDir,
): Map<string, LayerFile[]> {
  const anchors = [...new Set(files.map((f) => anchorOf(f.path, dirExists)))].sort(
    (a, b) => a.length - b.length,
  );
  const outer = (a: string) => anchors.find((b) => b === a || (b !== "/" && a.startsWith(`${b}/`))) ?? a;
  const groups = new Map<string, LayerFile[]>();
  for (const f of files) {
    const a = outer(anchorOf(f.path, dirExists));
    groups.set(a, [...(groups.get(a) ?? []), f]);
  }
  return groups;
}

function mount(args: string[]): string | undefined {
  const r = spawnSync("mount", args, { encoding: "utf8" });
  if (r.error) return r.error.message;
  return r.status === 0 ? undefined : (r.stderr || `mount exited ${r.status}`).trim();
}

/** Lays `files` out; `scratch` is a directory on the helper's tmpfs. */
export function layFiles(files: readonly LayerFile[], scratch: string): LayerResult {
  const result: LayerResult = { overlays: [], bound: [], skipped: [] };
  let n = 0;
  for (const [anchor, group] of groupByAnchor(files)) {
    const layer = join(scratch, `layer-${n++}`);
    for (const f of group) {
      const rel = posix.relative(anchor, posix.normalize(f.path));
      const dest = join(layer, rel);
      mkdirSync(dirname(dest), { recursive: true });
      writeFileSync(dest, Buffer.from(f.data, "base64"));
      chmodSync(dest, f.mode & 0o7777);
    }
    if (anchor === "/") {
      for (const f of group)
        result.skipped.push({
          path: f.path,
          reason: `its top directory /${posix.normalize(f.path).split("/")[1]} does not exist on this machine, and / cannot be layered`,
        });
      continue;
    }
    if (/[,:\\]/.test(anchor)) {
      for (const f of group)
        result.skipped.push({
          path: f.path,
          reason: `${anchor} has a character overlay options cannot carry`,
        });
      continue;
    }
    const err = mount(["-t", "overlay", "overlay", "-o", `lowerdir=${layer}:${anchor}`, anchor]);
    if (!err) {
      result.overlays.push(anchor);
      continue;
    }
    for (const f of group) {
      const dest = join(layer, posix.relative(anchor, posix.normalize(f.path)));
      if (!existsSync(f.path)) {
        result.skipped.push({
          path: f.path,
          reason: `no overlay here (${err}) and no such file to bind over`,
        });
        continue;
      }
      const bindErr = mount(["--bind", dest, f.path]) ?? mount(["-o", "remount,bind,ro", f.path]);
      if (bindErr) result.skipped.push({ path: f.path, reason: bindErr });
      else result.bound.push(f.path);
    }
  }
  return result;
}
