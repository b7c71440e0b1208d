// `npm run build`'s last step: the `switchyard` command as one ES module per entry point,
// dist/bin/switchyard.mjs (the package's bin) and dist/bin/namespace-helper.mjs (exec's
// helper inside its namespaces, found next to the CLI), with their dependencies inlined.
// Node loads one file far faster than the few hundred modules of dist/cli and node_modules
// it replaces (`--version`: ~0.3 s instead of ~0.85 s on 2 cores), and a session's start is
// the developer's wait. The compiled dist/cli stays for the SDK's users.
import { build } from "esbuild";

// Bundled CommonJS dependencies call `require` for Node's built-ins; an ES module has none.
const requireShim =
  "import { createRequire as __switchyardCreateRequire } from 'node:module';\n" +
  "const require = __switchyardCreateRequire(import.meta.url);";

await build({
  entryPoints: {
    switchyard: "cli/src/main.ts",
    "namespace-helper": "cli/src/sdk/transparent/namespace-helper.ts",
  },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20.19",
  outdir: "dist/bin",
  outExtension: { ".js": ".mjs" },
  banner: { js: requireShim },
  logLevel: "warning",
});
