// Loads a CommonJS bundle with V8's code cache, so that a CLI start does not compile the same
// megabytes of JavaScript again: the first run compiles as usual and, at exit, saves the code
// V8 compiled (the functions that ran, too) under `dir`; later runs hand it back to V8. On
// Node ≥ 22.1 this is the runtime's own `module.enableCompileCache`; Node 20 has none, so
// there the bundle is compiled as a `vm.Script` with `cachedData`, as Node does for its own
// modules. A cache that does not fit (another Node, another bundle) is rejected by V8 and
// replaced; one that cannot be read or written costs nothing but the compile.
import { createRequire, Module } from "node:module";
import * as nodeModule from "node:module";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { constants as vmConstants, Script } from "node:vm";

export interface CodeCacheLoad {
  /** Whether V8 took a saved cache for this run. */
  readonly cached: boolean;
  /** Saves what V8 compiled so far when there was no usable cache (call at exit). */
  save(): void;
}

const PREFIX = "bundle-";

/** The cache file of this bundle for this Node and CPU: a new build or Node gets a new one. */
function cacheFile(bundle: string, dir: string): string {
  const st = statSync(bundle);
  const key = `${process.version}-${process.arch}-${st.size}-${Math.round(st.mtimeMs)}`.replace(
    /[^\w.-]/g,
    "_",
  );
  return join(dir, `${PREFIX}${key}.v8`);
}

/** Runs `bundle` (CommonJS) through `vm.Script` with the code cache kept in `dir`. */
export function runWithCodeCache(bundle: string, dir: string): CodeCacheLoad {
  const file = cacheFile(bundle, dir);
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(file);
  } catch {
    /* first run of this build */
  }
  const wrapped = (Module as unknown as { wrap(source: string): string }).wrap(readFileSync(bundle, "utf8"));
  const script = new Script(wrapped, {
    filename: bundle,
    ...(cachedData ? { cachedData } : {}),
    importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const cached = cachedData !== undefined && !script.cachedDataRejected;
  const m = new Module(bundle);
  m.filename = bundle;
  m.paths = (Module as unknown as { _nodeModulePaths(dir: string): string[] })._nodeModulePaths(
    dirname(bundle),
  );
  const run = script.runInThisContext() as (...args: unknown[]) => void;
  run.call(m.exports, m.exports, createRequire(bundle), m, bundle, dirname(bundle));
  return {
    cached,
    save: () => {
      if (cached) return;
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        // Earlier builds' caches are of no more use.
        for (const f of readdirSync(dir))
          if (f.startsWith(PREFIX) && join(dir, f) !== file) rmSync(join(dir, f), { force: true });
        const tmp = `${file}.${process.pid}.tmp`;
        writeFileSync(tmp, script.createCachedData());
        renameSync(tmp, file);
      } catch {
        /* a read-only or full cache directory: the next run compiles again */
      }
    },
  };
}

/**
 * Loads the bundle with the code cache in `dir` (none when undefined): Node's own compile
 * cache where it has one, else runWithCodeCache, saving at exit.
 */
export function loadBundle(bundle: string, dir: string | undefined): void {
  const enableCompileCache = (nodeModule as { enableCompileCache?: (dir: string) => unknown })
    .enableCompileCache;
  if (!dir) {
    createRequire(bundle)(bundle);
  } else if (enableCompileCache) {
    enableCompileCache(dir);
    createRequire(bundle)(bundle);
  } else {
    const load = runWithCodeCache(bundle, dir);
    process.once("exit", () => load.save());
  }
}
