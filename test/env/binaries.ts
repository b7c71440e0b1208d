// Builds (once) and locates the third-party binaries of the test environment:
// kube-apiserver, kube-controller-manager, kubectl and etcd (and, for the real nodes, kubelet,
// kube-proxy and kube-scheduler) from their Go modules through the wrapper module in test/env/go,
// and k6, helm, CoreDNS and kube-score with `go install`; the checkers polaris and dashboard-linter
// from their own module source (buildFromModuleSource). Binaries are cached
// by version outside the repository, so a second run — or a second clone — does not
// rebuild. Go is a build tool only; nothing here is product code.
import { execFile, spawn } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { moduleSums, versions } from "./versions.js";

const execFileAsync = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
/** The wrapper Go module, in the source tree whether this runs from test/env or dist/test/env. */
const goModuleDir = [resolve(here, "go"), resolve(here, "../../../test/env/go")].find((d) =>
  existsSync(join(d, "go.mod")),
);

export type BinaryName =
  | "kube-apiserver"
  | "kube-controller-manager"
  | "kubectl"
  | "etcd"
  | "k6"
  | "helm"
  // The real nodes (test/env/nodes): built like kube-apiserver, and CoreDNS with `go install`.
  | "kubelet"
  | "kube-proxy"
  | "kube-scheduler"
  | "coredns"
  // Third-party checkers of the chart and the dashboard (test/integration/checkers).
  | "kube-score"
  | "polaris"
  | "dashboard-linter"
  // The CLI's transparent network (cli/src/sdk/transparent).
  | "tun2socks";

export class BinaryBuildError extends Error {
  readonly code = "SWITCHYARD_TEST_BINARY_BUILD_FAILED";
}

/** Where built binaries live: $SWITCHYARD_BIN_CACHE, else $XDG_CACHE_HOME/switchyard/bin, else ~/.cache/switchyard/bin. */
export function binaryCacheDir(): string {
  if (process.env.SWITCHYARD_BIN_CACHE) return resolve(process.env.SWITCHYARD_BIN_CACHE);
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "switchyard", "bin");
}

function versionOf(name: BinaryName): string {
  switch (name) {
    case "kube-apiserver":
    case "kube-controller-manager":
    case "kubectl":
    case "kubelet":
    case "kube-proxy":
    case "kube-scheduler":
      return versions.kubernetes;
    case "coredns":
      return versions.coredns;
    case "etcd":
      return versions.etcd;
    case "k6":
      return versions.k6;
    case "helm":
      return versions.helm;
    case "kube-score":
      return versions.kubeScore;
    case "polaris":
      return versions.polaris;
    case "dashboard-linter":
      return versions.dashboardLinter;
    case "tun2socks":
      return versions.tun2socks;
  }
}

export function binaryPath(name: BinaryName): string {
  return join(binaryCacheDir(), `${name}-v${versionOf(name)}`);
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map((n) => parseInt(n, 10) || 0);
  const pb = b.split(".").map((n) => parseInt(n, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

async function checkGo(): Promise<string> {
  let out: string;
  try {
    out = (await execFileAsync("go", ["env", "GOVERSION"])).stdout.trim();
  } catch {
    throw new BinaryBuildError(
      `The test environment builds kube-apiserver, kube-controller-manager, etcd, k6 and helm from their Go ` +
        `modules, and no Go toolchain was found on PATH. Install Go >= ${versions.minimumGo} ` +
        `(https://go.dev/doc/install) or put prebuilt binaries named like ${binaryPath("kube-apiserver")} in ` +
        `${binaryCacheDir()} (or set SWITCHYARD_BIN_CACHE).`,
    );
  }
  const v = out.replace(/^go/, "");
  // With GOTOOLCHAIN=auto (Go's default) an older go fetches the toolchain the module asks for.
  if (compareVersions(v, versions.minimumGo) < 0 && process.env.GOTOOLCHAIN === "local") {
    throw new BinaryBuildError(
      `Go ${v} is too old to build Kubernetes v${versions.kubernetes}: Go >= ${versions.minimumGo} is needed. ` +
        `Upgrade Go, or unset GOTOOLCHAIN=local so Go can fetch the toolchain itself.`,
    );
  }
  return v;
}

function k8sLdflags(): string {
  const [major, minor] = versions.kubernetes.split(".");
  const pkg = "k8s.io/component-base/version";
  return [
    "-s -w",
    `-X ${pkg}.gitVersion=v${versions.kubernetes}`,
    `-X ${pkg}.gitMajor=${major}`,
    `-X ${pkg}.gitMinor=${minor}`,
    `-X ${pkg}.gitTreeState=clean`,
    `-X ${pkg}.buildDate=1970-01-01T00:00:00Z`,
  ].join(" ");
}

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv }, what: string) {
  return new Promise<void>((resolvePromise, reject) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    const keep = (b: Buffer) => {
      output = (output + b.toString()).slice(-8000);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("error", (err) => reject(new BinaryBuildError(`${what}: could not run ${cmd}: ${err.message}`)));
    child.on("exit", (code) =>
      code === 0
        ? resolvePromise()
        : reject(new BinaryBuildError(`${what} failed (exit ${code}). Last output:\n${output}`)),
    );
  });
}

async function buildOne(name: BinaryName, log: (line: string) => void): Promise<void> {
  const target = binaryPath(name);
  const tmp = `${target}.tmp-${process.pid}`;
  const started = Date.now();
  log(`building ${name} v${versionOf(name)} (first run only; cached in ${binaryCacheDir()})`);
  const env = { ...process.env, GOFLAGS: "-buildvcs=false" };
  if (name === "polaris" || name === "dashboard-linter" || name === "tun2socks") {
    await buildFromModuleSource(moduleSources[name], tmp, env);
  } else if (name === "k6" || name === "helm" || name === "coredns" || name === "kube-score") {
    const gobin = `${tmp}.d`;
    mkdirSync(gobin, { recursive: true });
    const pkg = {
      k6: `go.k6.io/k6@v${versions.k6}`,
      helm: `helm.sh/helm/v4/cmd/helm@v${versions.helm}`,
      coredns: `github.com/coredns/coredns@v${versions.coredns}`,
      "kube-score": `github.com/zegl/kube-score/cmd/kube-score@v${versions.kubeScore}`,
    }[name];
    await run(
      "go",
      ["install", "-trimpath", "-ldflags", "-s -w", pkg],
      { env: { ...env, GOBIN: gobin } },
      `go install ${pkg}`,
    );
    renameSync(join(gobin, name), tmp);
    rmSync(gobin, { recursive: true, force: true });
  } else {
    if (!goModuleDir)
      throw new BinaryBuildError("test/env/go/go.mod is missing: the wrapper module cannot be found");
    const pkg = name === "etcd" ? "go.etcd.io/etcd/server/v3" : `k8s.io/kubernetes/cmd/${name}`;
    const ldflags = name === "etcd" ? "-s -w" : k8sLdflags();
    await run(
      "go",
      ["build", "-trimpath", "-ldflags", ldflags, "-o", tmp, pkg],
      { cwd: goModuleDir, env },
      `go build ${pkg}`,
    );
  }
  renameSync(tmp, target);
  log(`built ${name} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

/** Modules built from their own source tree (see buildFromModuleSource), with the go.sum hash pinned. */
const moduleSources = {
  polaris: { module: "github.com/fairwindsops/polaris", version: versions.polaris, sum: moduleSums.polaris },
  "dashboard-linter": {
    module: "github.com/grafana/dashboard-linter",
    version: versions.dashboardLinter,
    sum: moduleSums.dashboardLinter,
  },
  tun2socks: {
    module: "github.com/xjasonlyu/tun2socks/v2",
    version: versions.tun2socks,
    sum: moduleSums.tun2socks,
  },
} as const;

/**
 * Builds the main package at the root of `module@version` inside a copy of the module itself, so
 * its own go.mod (replace directives included, which `go install` refuses) and go.sum decide the
 * dependencies. The module's own zip is checked against the pinned `sum` here instead of the
 * checksum database (GONOSUMDB), whose lookups of these versions the module proxy does not answer.
 */
async function buildFromModuleSource(
  src: { module: string; version: string; sum: string },
  output: string,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  const ref = `${src.module}@v${src.version}`;
  let info: { Dir?: string; Sum?: string; Error?: string };
  try {
    const out = await execFileAsync("go", ["mod", "download", "-json", ref], {
      env: { ...env, GONOSUMDB: src.module },
      maxBuffer: 16 * 1024 * 1024,
    });
    info = JSON.parse(out.stdout) as typeof info;
  } catch (err) {
    const e = err as { stdout?: string; message: string };
    throw new BinaryBuildError(`go mod download ${ref} failed: ${e.stdout || e.message}`);
  }
  if (!info.Dir || info.Sum !== src.sum)
    throw new BinaryBuildError(
      `go mod download ${ref}: ${info.Error ?? `its hash ${info.Sum} is not the pinned ${src.sum}`}`,
    );
  const tree = `${output}.src`;
  cpSync(info.Dir, tree, { recursive: true });
  // The module cache is read-only; the copy must be removable.
  for (const f of ["", ...readdirSync(tree, { recursive: true, encoding: "utf8" })])
    chmodSync(join(tree, f), statSync(join(tree, f)).mode | 0o200);
  try {
    await run(
      "go",
      ["build", "-trimpath", "-ldflags", "-s -w", "-o", output, "."],
      { cwd: tree, env },
      `go build ${ref}`,
    );
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}

/** Tools taken from the system's packages rather than built: Debian's `prometheus` package ships both. */
export type SystemToolName = "prometheus" | "promtool";

/** The path of a packaged tool, or an error saying how to install it. */
export function systemTool(name: SystemToolName): string {
  for (const dir of [...(process.env.PATH ?? "").split(":").filter(Boolean), "/usr/bin"]) {
    const candidate = join(dir, name);
    if (existsSync(candidate)) return candidate;
  }
  throw new BinaryBuildError(
    `${name} is not installed. The checker tests need Prometheus's prometheus and promtool: ` +
      `on Debian/Ubuntu \`apt-get install --no-install-recommends prometheus\` (.ci/run does it), ` +
      `elsewhere put both from a Prometheus release on PATH.`,
  );
}

/**
 * Makes sure every binary exists in the cache, building missing ones. Concurrent callers
 * (several processes) serialize on a lock file so nothing is built twice.
 */
export async function ensureBinaries(
  names: BinaryName[] = ["etcd", "kube-apiserver", "kube-controller-manager"],
  log: (line: string) => void = (l) => process.stderr.write(`[test/env] ${l}\n`),
): Promise<Record<BinaryName, string>> {
  const missing = names.filter((n) => !existsSync(binaryPath(n)));
  if (missing.length > 0) {
    mkdirSync(binaryCacheDir(), { recursive: true });
    await checkGo();
    const release = await lock(join(binaryCacheDir(), ".build.lock"));
    try {
      for (const n of missing) if (!existsSync(binaryPath(n))) await buildOne(n, log);
    } finally {
      release();
    }
  }
  return Object.fromEntries(names.map((n) => [n, binaryPath(n)])) as Record<BinaryName, string>;
}

/**
 * Serializes builders of the cache across processes: the lock file holds its holder's pid, and
 * a dead holder's lock is taken over. Resolves with the release.
 */
export async function lock(path: string): Promise<() => void> {
  for (;;) {
    const release = tryLock(path);
    if (release) return release;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** `lock` for synchronous callers (the product build): waits blocking the thread. */
export function lockSync(path: string): () => void {
  const wait = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    const release = tryLock(path);
    if (release) return release;
    Atomics.wait(wait, 0, 0, 1000);
  }
}

/** Takes the lock at `path` (a dead holder's too), or undefined while a live process holds it. */
function tryLock(path: string): (() => void) | undefined {
  for (;;) {
    try {
      writeFileSync(path, String(process.pid), { flag: "wx" });
      return () => rmSync(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      let holder: number;
      try {
        holder = parseInt(readFileSync(path, "utf8"), 10);
      } catch {
        continue; // released between the two calls
      }
      if (holder && isAlive(holder)) return undefined;
      rmSync(path, { force: true });
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
