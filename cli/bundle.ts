// `npm run build`'s last step: the `switchyard` command as bundles with their dependencies
// inlined, in dist/bin/:
// - switchyard.mjs, the package's bin (cli/src/bin/switchyard-bin.ts): a few lines that load
// - switchyard.cjs, the whole CLI as one CommonJS file (cli/src/bin/cli-entry.ts), with V8's
//   code cache (cli/src/bin/code-cache.ts): CommonJS because Node 20 can hand a saved cache
//   to a script, not to an ES module;
// - namespace-helper.cjs, exec's helper inside its namespaces, found next to the CLI.
// Node loads one file far faster than the few hundred modules of dist/cli and node_modules
// it replaces, and a cached compile faster still (`--version` on 2 cores: ~0.85 s from
// dist/cli, ~0.3 s bundled, less with the cache, bench/README.md); a session's start is the
// developer's wait. The compiled dist/cli stays for the SDK's users.
import { build } from "esbuild";

const common = {
  bundle: true,
  platform: "node",
  target: "node20.19",
  outdir: "dist/bin",
  logLevel: "warning",
} as const;

await build({
  ...common,
  entryPoints: { switchyard: "cli/src/bin/switchyard-bin.ts" },
  format: "esm",
  outExtension: { ".js": ".mjs" },
});

await build({
  ...common,
  entryPoints: {
    switchyard: "cli/src/bin/cli-entry.ts",
    "namespace-helper": "cli/src/sdk/transparent/namespace-helper.ts",
  },
  format: "cjs",
  outExtension: { ".js": ".cjs" },
  // A CommonJS file has no import.meta: its URL is the file's own.
  define: { "import.meta.url": "__switchyardModuleUrl" },
  banner: { js: 'var __switchyardModuleUrl = require("node:url").pathToFileURL(__filename).href;' },
});
