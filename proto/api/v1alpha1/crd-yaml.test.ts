import { readFileSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { CRD_YAML_DIR, renderCrdFiles } from "./crd-yaml.js";
import { CRD_KINDS, crdManifests } from "./manifests.js";

const root = resolve(fileURLToPath(new URL(".", import.meta.url)), "../../..");
const dir = join(root, CRD_YAML_DIR);

describe("generated CRD YAML", () => {
  it("is committed exactly as the TypeBox definitions generate it (run `npm run gen:crds` if not)", async () => {
    const files = await renderCrdFiles();
    const committed = readdirSync(dir).filter((f) => f.endsWith(".yaml"));
    expect(committed.sort()).toEqual([...files.keys()].sort());
    for (const [name, text] of files) {
      expect(readFileSync(join(dir, name), "utf8"), `${CRD_YAML_DIR}/${name} is stale`).toBe(text);
    }
  });

  it("parses back to the manifest objects installCrds applies", async () => {
    const files = await renderCrdFiles();
    for (const kind of CRD_KINDS) {
      const manifest = crdManifests[kind];
      expect(parse(files.get(`${manifest.metadata.name}.yaml`)!)).toEqual(manifest);
    }
  });
});
