// The product image's build stage without Docker: the files the Dockerfile's build stage
// copies (its COPY lines, less .dockerignore) go to a scratch directory in the cache, where
// `npm run build` compiles them to dist/ and `npm ci --omit=dev` installs the production
// node_modules, as the Dockerfile's RUN lines do, on the image's Node (node-binary.ts: the
// pinned Node of the Dockerfile's major, first on PATH; npm is the host's, run by that Node).
// The working tree is only read. The result is cached under a digest of every input file and
// that Node's version, so an unchanged tree reuses it.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, posix, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { binaryCacheDir } from "../binaries.js";
import { versions } from "../versions.js";
import { readDockerfile, type DockerStage } from "./dockerfile.js";
import { imageNodeBinary } from "./node-binary.js";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

export class ProductBuildError extends Error {
  readonly code = "SWITCHYARD_TEST_PRODUCT_BUILD_FAILED";
}

/** `.dockerignore` patterns as one matcher of context-relative paths (`*`, `**`, plain names). */
export function dockerignore(text: string): (path: string) => boolean {
  const patterns = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((p) => {
      const body = p
        .replace(/^\/+|\/+$/g, "")
        .split("/")
        .map((seg) =>
          seg === "**" ? "(?:.*/)?" : seg.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*") + "/",
        )
        .join("")
        .replace(/\/$/, "");
      return new RegExp(`^${body}(?:/.*)?$`);
    });
  return (path) => patterns.some((re) => re.test(path));
}

/** A context-relative source and where the build stage puts it, relative to its WORKDIR. */
export interface ContextFile {
  source: string;
  target: string;
}

/** Every file the build stage copies from the context, .dockerignore applied, sorted. */
export function buildContextFiles(
  build: DockerStage,
  root: string,
  ignored: (p: string) => boolean,
): ContextFile[] {
  const out: ContextFile[] = [];
  const walk = (source: string, target: string) => {
    if (ignored(source)) return;
    const st = lstatSync(join(root, source));
    if (st.isDirectory()) {
      for (const name of readdirSync(join(root, source)).sort())
        walk(posix.join(source, name), posix.join(target, name));
    } else if (st.isFile()) out.push({ source, target });
  };
  for (const copy of build.copies.filter((c) => !c.from)) {
    for (const source of copy.sources) {
      const many = copy.sources.length > 1 || copy.dest.endsWith("/");
      const dest = many ? posix.join(copy.dest, posix.basename(source)) : copy.dest;
      walk(source, posix.relative(build.workdir, dest));
    }
  }
  return out.sort((a, b) => (a.target < b.target ? -1 : 1));
}

function run(cwd: string, cmd: string, args: string[], env: NodeJS.ProcessEnv): void {
  const r = spawnSync(cmd, args, { cwd, env, encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0)
    throw new ProductBuildError(`${cmd} ${args.join(" ")} failed in ${cwd}:\n${r.stdout}\n${r.stderr}`);
}

/** The build's `node` (what npm and its scripts find on PATH) must be the pinned one. */
function checkBuildNode(env: NodeJS.ProcessEnv): void {
  const r = spawnSync("node", ["--version"], { env, encoding: "utf8" });
  if (r.stdout?.trim() !== `v${versions.node}`)
    throw new ProductBuildError(
      `the build's node is ${r.stdout?.trim() || r.error?.message}, not the pinned v${versions.node}`,
    );
}

export interface ProductBuild {
  /** Directory with what the build stage leaves at its WORKDIR (package.json, node_modules, dist). */
  dir: string;
  /** The build stage's WORKDIR (`/src`): `COPY --from=build /src/x` is `<dir>/x`. */
  workdir: string;
  stages: DockerStage[];
}

/** Builds (or reuses) the build stage's output for the tree at `root`. */
export function buildProduct(root = REPO_ROOT): ProductBuild {
  const stages = readDockerfile(join(root, "Dockerfile"));
  const build = stages.find((s) => s.name === "build");
  if (!build) throw new ProductBuildError("the Dockerfile has no stage named build");
  const ignorePath = join(root, ".dockerignore");
  const ignored = dockerignore(existsSync(ignorePath) ? readFileSync(ignorePath, "utf8") : "");
  const files = buildContextFiles(build, root, ignored);
  const hash = createHash("sha256").update(readFileSync(join(root, "Dockerfile")));
  for (const f of files)
    hash
      .update(`${f.target}\0`)
      .update(readFileSync(join(root, f.source)))
      .update("\0");
  // The Node the build runs on (a build by another Node is not this one).
  hash.update(`node v${versions.node}\0`);
  const dir = join(dirname(binaryCacheDir()), "images", `product-${hash.digest("hex").slice(0, 20)}`);
  if (existsSync(join(dir, ".complete"))) return { dir, workdir: build.workdir, stages };

  const scratch = `${dir}.building-${process.pid}`;
  rmSync(scratch, { recursive: true, force: true });
  try {
    for (const f of files) {
      mkdirSync(dirname(join(scratch, f.target)), { recursive: true });
      copyFileSync(join(root, f.source), join(scratch, f.target));
    }
    // Compile with the working tree's dev dependencies (read only), then install the
    // production dependencies from the lock file in their place.
    const node = imageNodeBinary(join(root, "Dockerfile"));
    // npm on Node 22+ turns on Node's compile cache, by default in $TMPDIR/node-compile-cache:
    // keep it out of the machine's temporary directory (nothing of a build outlives it).
    const env = {
      ...process.env,
      PATH: `${dirname(node)}:${process.env.PATH ?? ""}`,
      NODE_DISABLE_COMPILE_CACHE: "1",
    };
    checkBuildNode(env);
    symlinkSync(join(root, "node_modules"), join(scratch, "node_modules"));
    run(scratch, "npm", ["run", "build", "--silent"], env);
    unlinkSync(join(scratch, "node_modules"));
    run(scratch, "npm", ["ci", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline"], env);
    writeFileSync(join(scratch, ".complete"), "");
    rmSync(dir, { recursive: true, force: true });
    renameSync(scratch, dir);
    // Keep one finished build: older trees' builds are 150 MB each and never used again.
    for (const old of readdirSync(dirname(dir)))
      if (/^product-[0-9a-f]+$/.test(old) && join(dirname(dir), old) !== dir)
        rmSync(join(dirname(dir), old), { recursive: true, force: true });
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return { dir, workdir: build.workdir, stages };
}

/**
 * The `switchyard` command as a user installs it: the package's bin from the product build
 * (dist/bin/switchyard.mjs, which loads the bundled CLI), not the sources under tsx, whose start-up compiles
 * TypeScript.
 */
export function installedCli(root = REPO_ROOT): string {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { bin: { switchyard: string } };
  return join(buildProduct(root).dir, pkg.bin.switchyard);
}
