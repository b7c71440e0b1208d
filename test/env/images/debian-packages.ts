// What this Debian host's package database says, as data for images built without Docker or
// apt: the installed packages and their dependencies (dpkg-query), the files each installed
// (/var/lib/dpkg/info/<package>.list), and the alternatives their maintainer scripts registered
// (/var/lib/dpkg/alternatives/<name>). An image assembled from these holds the files `apt-get
// install` put on this host, at the versions this host has.
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join, posix } from "node:path";
import type { ImageFile } from "./oci-image.js";

export class DebianPackageError extends Error {
  readonly code = "SWITCHYARD_TEST_DEBIAN_PACKAGE";
}

export interface InstalledPackage {
  name: string;
  essential: boolean;
  /** Pre-Depends then Depends, each an alternatives group (`a | b`) of bare package names. */
  depends: string[][];
}

const DPKG_DIR = "/var/lib/dpkg";

/** `libc6 (>= 2.34), a | b:any` as `[["libc6"], ["a", "b"]]`. */
export function parseDependsField(field: string): string[][] {
  return field
    .split(",")
    .map((group) =>
      group
        .split("|")
        .map((alt) => alt.trim().split(/[\s(:]/, 1)[0]!)
        .filter(Boolean),
    )
    .filter((g) => g.length > 0);
}

/** Every package dpkg lists as installed on this host. */
export function installedPackages(): Map<string, InstalledPackage> {
  const r = spawnSync(
    "dpkg-query",
    ["-W", "-f", "${Package}\\t${db:Status-Status}\\t${Essential}\\t${Pre-Depends}\\t${Depends}\\n"],
    { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
  );
  if (r.status !== 0)
    throw new DebianPackageError(
      `dpkg-query failed (${r.error?.message ?? r.stderr.trim()}): the images built from Debian packages need a Debian host`,
    );
  const out = new Map<string, InstalledPackage>();
  for (const line of r.stdout.split("\n")) {
    const [name, status, essential, pre, deps] = line.split("\t");
    if (!name || status !== "installed") continue;
    out.set(name, {
      name,
      essential: essential === "yes",
      depends: [...parseDependsField(pre ?? ""), ...parseDependsField(deps ?? "")],
    });
  }
  return out;
}

/**
 * `names` and everything they depend on (Pre-Depends and Depends; of an alternatives group, the
 * first member installed here), as apt resolves an install on this host. `why` names what asked
 * for them in errors.
 */
export function packageClosure(
  names: readonly string[],
  installed: Map<string, InstalledPackage>,
  why: string,
): string[] {
  const seen = new Set<string>();
  const visit = (name: string, from: string) => {
    if (seen.has(name)) return;
    const pkg = installed.get(name);
    if (!pkg)
      throw new DebianPackageError(
        `${from} needs the Debian package ${name}, which this host does not have: apt-get install ${name}`,
      );
    seen.add(name);
    for (const group of pkg.depends) {
      const pick = group.find((alt) => installed.has(alt)) ?? group[0]!;
      visit(pick, `${name} (a dependency of ${why})`);
    }
  };
  for (const n of names) visit(n, why);
  return [...seen].sort();
}

/** What the slim Debian images leave out of every package (their dpkg path-exclude rules). */
const SLIM_EXCLUDED = /^\/usr\/share\/(doc|man|info|locale|lintian|linda|groff)\//;

/** The top-level directories this host has merged into /usr (`/bin -> usr/bin`, …). */
export function mergedUsrDirectories(): string[] {
  return ["bin", "sbin", "lib", "lib32", "lib64", "libx32"].filter((d) =>
    lstatSync(`/${d}`, { throwIfNoEntry: false })?.isSymbolicLink(),
  );
}

/** The image path of a package's path on a merged-/usr host (`/bin/dash` is `/usr/bin/dash`). */
function canonicalPath(path: string, merged: readonly string[]): string {
  const [, top, ...rest] = path.split("/");
  return top && merged.includes(top) ? posix.join("/usr", top, ...rest) : path;
}

/**
 * The files and symlinks `name` installed, at their image paths (directories come from their
 * contents). Documentation the slim images drop is left out; anything else the list names but the
 * host lacks is an error.
 */
export function packageFiles(name: string, merged = mergedUsrDirectories()): ImageFile[] {
  const list = [join(DPKG_DIR, "info", `${name}.list`), join(DPKG_DIR, "info", `${name}:amd64.list`)].find(
    existsSync,
  );
  if (!list)
    throw new DebianPackageError(`dpkg has no file list for ${name} (${DPKG_DIR}/info/${name}.list)`);
  const files: ImageFile[] = [];
  for (const path of readFileSync(list, "utf8").split("\n")) {
    if (!path || path === "/." || SLIM_EXCLUDED.test(path)) continue;
    if (merged.includes(path.slice(1))) continue; // `/lib` itself: the image's own merged link
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st)
      throw new DebianPackageError(
        `${name} installed ${path}, which this host no longer has: apt-get install --reinstall ${name}`,
      );
    const at = canonicalPath(path, merged);
    if (st.isSymbolicLink()) files.push({ path: at, symlink: readlinkSync(path) });
    else if (st.isFile()) files.push({ path: at, source: path, mode: st.mode & 0o7777 });
  }
  return files;
}

/** One alternative dpkg knows (`update-alternatives --query`), read from its registry file. */
export interface Alternative {
  name: string;
  mode: "auto" | "manual";
  link: string;
  slaves: { name: string; link: string }[];
  choices: { path: string; priority: number; slavePaths: string[] }[];
}

/** Parses /var/lib/dpkg/alternatives/<name>. */
export function parseAlternative(name: string, text: string): Alternative {
  const lines = text.split("\n");
  let i = 0;
  const next = () => lines[i++] ?? "";
  const mode = next();
  if (mode !== "auto" && mode !== "manual")
    throw new DebianPackageError(`alternative ${name}: unknown mode ${JSON.stringify(mode)}`);
  const link = next();
  const slaves: Alternative["slaves"] = [];
  for (let s = next(); s !== ""; s = next()) slaves.push({ name: s, link: next() });
  const choices: Alternative["choices"] = [];
  for (let path = next(); path !== ""; path = next()) {
    const priority = Number(next());
    if (!Number.isFinite(priority))
      throw new DebianPackageError(`alternative ${name}: choice ${path} has no numeric priority`);
    choices.push({ path, priority, slavePaths: slaves.map(() => next()) });
  }
  return { name, mode, link, slaves, choices };
}

/** Every alternative registered on this host. */
export function hostAlternatives(): Alternative[] {
  const dir = join(DPKG_DIR, "alternatives");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .sort()
    .map((n) => parseAlternative(n, readFileSync(join(dir, n), "utf8")));
}

/**
 * The symlinks of the alternatives whose choices are among `present` (image paths), as the
 * packages' maintainer scripts and `update-alternatives --set` leave them: `chosen` names the
 * path set by hand, else the highest priority choice present wins (auto mode). Paths are host
 * paths; `merged` maps them to image paths.
 */
export function alternativeLinks(
  alternatives: readonly Alternative[],
  present: ReadonlySet<string>,
  chosen: ReadonlyMap<string, string>,
  merged = mergedUsrDirectories(),
): ImageFile[] {
  const out: ImageFile[] = [];
  for (const [name, path] of chosen) {
    const alt = alternatives.find((a) => a.name === name);
    if (!alt)
      throw new DebianPackageError(`update-alternatives --set ${name}: no alternative ${name} is registered`);
    if (!alt.choices.some((c) => c.path === path))
      throw new DebianPackageError(
        `update-alternatives --set ${name} ${path}: not a choice of ${name} (${alt.choices.map((c) => c.path).join(", ")})`,
      );
  }
  for (const alt of alternatives) {
    const available = alt.choices.filter((c) => present.has(canonicalPath(c.path, merged)));
    if (!available.length) continue;
    const set = chosen.get(alt.name);
    const pick = set
      ? available.find((c) => c.path === set)
      : available.reduce((a, b) => (b.priority > a.priority ? b : a));
    if (!pick)
      throw new DebianPackageError(
        `update-alternatives --set ${alt.name} ${set}: that file is not in the image`,
      );
    const entries: [string, string, string][] = [[alt.name, alt.link, pick.path]];
    // As update-alternatives does, a slave whose file is not there gets no link (man pages).
    for (const [k, s] of alt.slaves.entries()) {
      const target = pick.slavePaths[k];
      if (target && present.has(canonicalPath(target, merged))) entries.push([s.name, s.link, target]);
    }
    for (const [n, link, target] of entries) {
      out.push({ path: canonicalPath(link, merged), symlink: `/etc/alternatives/${n}` });
      out.push({ path: `/etc/alternatives/${n}`, symlink: target });
    }
  }
  return out;
}
