// `npm run gen:crds`: writes the CRD YAML under charts/switchyard/crds from the TypeBox
// definitions, removing files of kinds that no longer exist.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CRD_YAML_DIR, renderCrdFiles } from "./crd-yaml.js";

const root = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../..");
const dir = join(root, CRD_YAML_DIR);
mkdirSync(dir, { recursive: true });
const files = await renderCrdFiles();
for (const existing of readdirSync(dir)) {
  if (existing.endsWith(".yaml") && !files.has(existing)) rmSync(join(dir, existing));
}
for (const [name, text] of files) {
  writeFileSync(join(dir, name), text);
  process.stdout.write(`wrote ${join(CRD_YAML_DIR, name)}\n`);
}
