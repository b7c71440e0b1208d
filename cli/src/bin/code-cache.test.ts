// The code cache on a real bundle file: the first load compiles and saves what V8 compiled,
// the next one is handed that cache and V8 takes it; another build of the bundle gets a new
// cache (the old one is removed), and a cache directory that cannot be written costs nothing.
import { chmodSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runWithCodeCache } from "./code-cache.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function bundle(body: string): { file: string; cache: string } {
  const root = mkdtempSync(join(tmpdir(), "code-cache-"));
  dirs.push(root);
  const file = join(root, "bundle.cjs");
  writeFileSync(file, body);
  return { file, cache: join(root, "cache") };
}

// Enough code for V8 to have something to cache, and a side effect to see that it ran.
const BODY = `
const path = require("node:path");
function work(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i); return s; }
globalThis.__codeCacheRuns = (globalThis.__codeCacheRuns ?? 0) + 1;
globalThis.__codeCacheSeen = { file: __filename, dir: path.basename(__dirname), total: work(1000) > 0 };
module.exports = { ran: true };
`;

describe("runWithCodeCache", () => {
  it("saves the compiled code on the first run and hands it to V8 on the next", () => {
    const { file, cache } = bundle(BODY);
    const g = globalThis as { __codeCacheRuns?: number; __codeCacheSeen?: unknown };
    const before = g.__codeCacheRuns ?? 0;
    const first = runWithCodeCache(file, cache);
    expect(first.cached).toBe(false);
    expect(g.__codeCacheSeen).toEqual({ file, dir: file.split("/").at(-2), total: true });
    first.save();
    const saved = readdirSync(cache);
    expect(saved).toHaveLength(1);
    expect(saved[0]).toMatch(/^bundle-v\d+\.\d+\.\d+-\w+-\d+-\d+\.v8$/);
    const second = runWithCodeCache(file, cache);
    expect(second.cached).toBe(true);
    second.save(); // nothing to do: the cache was taken
    expect(readdirSync(cache)).toEqual(saved);
    expect(g.__codeCacheRuns).toBe(before + 2);
  });

  it("gives a new build a new cache and removes the old one", () => {
    const { file, cache } = bundle(BODY);
    runWithCodeCache(file, cache).save();
    const old = readdirSync(cache);
    writeFileSync(file, `${BODY}\nmodule.exports.build = 2;\n`);
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    const rebuilt = runWithCodeCache(file, cache);
    expect(rebuilt.cached).toBe(false);
    rebuilt.save();
    const now = readdirSync(cache);
    expect(now).toHaveLength(1);
    expect(now).not.toEqual(old);
    expect(runWithCodeCache(file, cache).cached).toBe(true);
  });

  it("runs the bundle all the same when the cache directory cannot be written", () => {
    const { file, cache } = bundle(BODY);
    writeFileSync(cache, "a file where the directory should be");
    chmodSync(cache, 0o400);
    const load = runWithCodeCache(file, cache);
    expect(load.cached).toBe(false);
    expect(() => load.save()).not.toThrow();
    expect(runWithCodeCache(file, cache).cached).toBe(false);
  });
});
