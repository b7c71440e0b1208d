#!/usr/bin/env node
// The `switchyard` bin (dist/bin/switchyard.mjs): loads the bundled CLI beside it
// (switchyard.cjs, cli/bundle.ts) with V8's code cache (code-cache.ts) in
// $XDG_CACHE_HOME/switchyard/compile-cache (~/.cache/… by default; SWITCHYARD_COMPILE_CACHE_DIR
// overrides, SWITCHYARD_COMPILE_CACHE=0 turns it off).
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadBundle } from "./code-cache.js";

const env = process.env;
const dir =
  env.SWITCHYARD_COMPILE_CACHE === "0"
    ? undefined
    : (env.SWITCHYARD_COMPILE_CACHE_DIR ??
      join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "switchyard", "compile-cache"));
loadBundle(join(dirname(fileURLToPath(import.meta.url)), "switchyard.cjs"), dir);
