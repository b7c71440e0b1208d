import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { injectSidecar, AGENT_CONTAINER } from "../../../control-plane/src/member/sidecar-pod-template.js";
import {
  COMPONENT_MAIN,
  PRODUCT_IMAGE_COMMAND,
  PRODUCT_IMAGE_WORKDIR,
} from "../../../proto/product-image.js";
import { writeImageArchive, type ImageFile } from "./oci-image.js";
import { baseImage, parseDockerfile, parseDockerfileWithArgs, readDockerfile } from "./dockerfile.js";
import { checkDockerfileNode, nodeBinaryPath } from "./node-binary.js";
import { versions } from "../versions.js";
import { buildContextFiles, dockerignore, REPO_ROOT } from "./product-build.js";
import { finalStageFiles, productImageFrom } from "./project-images.js";
import { testScratchDir } from "../../support/scratch-dir.js";

const stages = readDockerfile(join(REPO_ROOT, "Dockerfile"));
const build = stages.find((s) => s.name === "build")!;
const final = stages.at(-1)!;
const ignored = dockerignore(readFileSync(join(REPO_ROOT, ".dockerignore"), "utf8"));

/** A stand-in for the build stage's output: what `npm run build` and `npm ci --omit=dev` leave. */
function fakeBuild(dir: string): string {
  const out = join(dir, "build");
  for (const main of Object.values(COMPONENT_MAIN)) {
    mkdirSync(join(out, main, ".."), { recursive: true });
    writeFileSync(join(out, main), "// main\n");
  }
  mkdirSync(join(out, "node_modules", "ws"), { recursive: true });
  writeFileSync(join(out, "node_modules", "ws", "index.js"), "module.exports = {};\n");
  writeFileSync(join(out, "package.json"), "{}\n");
  return out;
}

const paths = (files: ImageFile[]) => files.filter((f) => !("directory" in f)).map((f) => f.path);

describe("the product image: Dockerfile, builder, chart and sidecar agree", () => {
  it("the Dockerfile's final stage is the image contract of proto/product-image.ts", () => {
    expect(final.entrypoint).toEqual(PRODUCT_IMAGE_COMMAND);
    expect(final.workdir).toBe(PRODUCT_IMAGE_WORKDIR);
    expect(final.cmd?.[0]).toBe(COMPONENT_MAIN.controlPlane);
    expect(final.user).toMatch(/^\d+:\d+$/);
    // The build stage compiles and prunes as product-build.ts does.
    expect(build.runs.join("\n")).toMatch(/npm run build/);
    expect(build.runs.join("\n")).toMatch(/npm prune --omit=dev/);
  });

  it("the build context holds every source tsconfig.build.json compiles, and no tests", () => {
    const files = buildContextFiles(build, REPO_ROOT, ignored).map((f) => f.target);
    const include = (
      JSON.parse(readFileSync(join(REPO_ROOT, "tsconfig.build.json"), "utf8")) as { include: string[] }
    ).include;
    for (const top of include) expect(files.some((f) => f.startsWith(`${top}/`))).toBe(true);
    for (const main of Object.values(COMPONENT_MAIN))
      expect(files).toContain(main.replace(/^dist\//, "").replace(/\.js$/, ".ts"));
    expect(files).toContain("package-lock.json");
    expect(files.filter((f) => f.endsWith(".test.ts"))).toEqual([]);
  });

  it("the builder's image has the Dockerfile's contents and config", async () => {
    const dir = testScratchDir("product-image-test-");
    const out = fakeBuild(dir);
    const productBuild = { dir: out, workdir: build.workdir, stages };
    const layer = finalStageFiles(final, productBuild);
    expect(paths(layer).sort()).toEqual(
      [
        "/app/package.json",
        "/app/node_modules/ws/index.js",
        ...Object.values(COMPONENT_MAIN).map((m) => `/app/${m}`),
      ].sort(),
    );
    const spec = await productImageFrom(productBuild, "switchyard.test/product:unit");
    expect(spec.layers).toEqual([layer]);
    expect(spec.entrypoint).toEqual(final.entrypoint);
    expect(spec.cmd).toEqual(final.cmd);
    expect(spec.user).toBe(final.user);
    expect(spec.workingDir).toBe(final.workdir);
    expect(spec.env).toEqual(expect.arrayContaining(final.env));
    expect(spec.exposedPorts).toEqual(final.expose);
    // The pinned Node (the Dockerfile's major, below), where node:*-bookworm-slim has it.
    expect(spec.files).toContainEqual({
      path: "/usr/local/bin/node",
      source: realpathSync(nodeBinaryPath()),
      mode: 0o755,
    });

    // The written config says the same (the runtime layer is left out to keep this fast).
    const archive = writeImageArchive({ ...spec, files: [] }, join(dir, "img.tar"));
    const layout = join(dir, "layout");
    mkdirSync(layout);
    execFileSync("tar", ["-xf", archive.file, "-C", layout]);
    const blob = (d: string) =>
      readFileSync(join(layout, "blobs", "sha256", d.replace("sha256:", "")), "utf8");
    const index = JSON.parse(readFileSync(join(layout, "index.json"), "utf8"));
    const manifest = JSON.parse(blob(index.manifests[0].digest));
    const config = JSON.parse(blob(manifest.config.digest)).config;
    expect(config.Entrypoint).toEqual(final.entrypoint);
    expect(config.Cmd).toEqual(final.cmd);
    expect(config.User).toBe(final.user);
    expect(config.WorkingDir).toBe(final.workdir);
    expect(config.Env).toContain("NODE_ENV=production");
    expect(manifest.layers).toHaveLength(2);
  });

  it("the Dockerfile's Node major is the pinned Node of the test images; a mismatch names the line and the fix", () => {
    const text = readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8");
    const file = parseDockerfileWithArgs(text);
    const major = Number(versions.node.split(".")[0]);
    expect(checkDockerfileNode(file)).toBe(major);
    for (const stage of file.stages)
      expect(baseImage(file, stage).image).toMatch(new RegExp(`^node:${major}-`));

    // Someone bumps the Dockerfile to another Node and not versions.ts.
    const argLine = text.split("\n").findIndex((l) => l.startsWith("ARG NODE_IMAGE=")) + 1;
    expect(argLine).toBeGreaterThan(0);
    const bumped = parseDockerfileWithArgs(
      text.replace(/^ARG NODE_IMAGE=node:\d+-/m, "ARG NODE_IMAGE=node:26-"),
    );
    expect(() => checkDockerfileNode(bumped)).toThrow(
      new RegExp(
        `^Dockerfile:${argLine}: the image is node:26-bookworm-slim, Node 26, but the test images' Node is the ` +
          `pinned ${versions.node.replace(/\./g, "\\.")} \\(test/env/versions\\.ts, versions\\.node\\)\\. Pin a Node 26 release there`,
      ),
    );
    // A stage on another base, and a FROM with its own image, are named by their line too.
    expect(() =>
      checkDockerfileNode(parseDockerfileWithArgs("FROM node:24-slim AS b\nFROM debian:12\n")),
    ).toThrow(/^Dockerfile:2: the stage at line 2 is based on debian:12/);
    expect(() =>
      checkDockerfileNode(parseDockerfileWithArgs("FROM node:22.1-alpine\n"), "D", "24.0.0"),
    ).toThrow(/^D:1: the image is node:22\.1-alpine, Node 22, but .* or set D back to node:24-…\.$/);
  });

  it("the chart starts the control plane and the router with node and their main modules", () => {
    const helpers = readFileSync(join(REPO_ROOT, "charts/switchyard/templates/_helpers.tpl"), "utf8");
    const firstArg = (define: string) =>
      new RegExp(`define "${define}" -}}\\n(?:\\{\\{[^\\n]*\\n)*- (\\S+)`).exec(helpers)?.[1];
    expect(firstArg("switchyard.controlPlane.args")).toBe(COMPONENT_MAIN.controlPlane);
    expect(firstArg("switchyard.router.args")).toBe(COMPONENT_MAIN.router);
    for (const d of ["control-plane-deployment.yaml", "router-deployment.yaml"]) {
      const yaml = readFileSync(join(REPO_ROOT, "charts/switchyard/templates", d), "utf8");
      expect(yaml).toContain(`command: ${JSON.stringify(PRODUCT_IMAGE_COMMAND)}`);
    }
  });

  it("the sidecar template starts the agent with node and its main module", () => {
    const template = {
      spec: { containers: [{ name: "app", image: "app:1", ports: [{ containerPort: 8080 }] }] },
    };
    const patched = injectSidecar(template, "app", "h", { agentImage: "p:1", redirectImage: "r:1" });
    const agent = patched.spec!.initContainers!.find((c) => c.name === AGENT_CONTAINER)!;
    expect(agent.command).toEqual(PRODUCT_IMAGE_COMMAND);
    expect(agent.args?.[0]).toBe(COMPONENT_MAIN.agent);
    expect(patched.spec!.initContainers![0]!.image).toBe("r:1");
  });
});

describe("parseDockerfile", () => {
  it("reads stages, continuations, relative WORKDIR and COPY destinations; refuses the shell form", () => {
    const [a, b] = parseDockerfile(
      'FROM x AS b\nWORKDIR /src\nCOPY a \\\n  c ./\nRUN make\nFROM y\nWORKDIR /app\nWORKDIR sub\nCOPY --from=b /src/out ./o\nENTRYPOINT ["n"]\n',
    );
    expect(a).toMatchObject({
      name: "b",
      workdir: "/src",
      runs: ["make"],
      copies: [{ sources: ["a", "c"], dest: "/src/" }],
    });
    expect(b).toMatchObject({
      workdir: "/app/sub",
      entrypoint: ["n"],
      copies: [{ from: "b", sources: ["/src/out"], dest: "/app/sub/o" }],
    });
    expect(() => parseDockerfile("FROM x\nCMD node main.js\n")).toThrow(/exec form/);
    // Global ARGs (with their lines, continuations counted) fill FROM's ${NAME} and $NAME.
    const withArgs = parseDockerfileWithArgs(
      "# c\nARG A=img:1\nARG B\nFROM ${A} AS one\nRUN a \\\n  b\nARG C=x\nFROM $A\n",
    );
    expect(withArgs.args).toEqual([
      { name: "A", value: "img:1", line: 2 },
      { name: "B", line: 3 },
    ]);
    expect(withArgs.stages.map((s) => [s.from, s.fromLine])).toEqual([
      ["${A}", 4],
      ["$A", 8],
    ]);
    expect(withArgs.stages.map((s) => baseImage(withArgs, s))).toEqual([
      { image: "img:1", line: 2 },
      { image: "img:1", line: 2 },
    ]);
    expect(() => baseImage(withArgs, { ...withArgs.stages[0]!, from: "${B}" })).toThrow(
      /B, which no ARG sets/,
    );
    expect(() => parseDockerfile("FROM x\nADD a b\n")).toThrow(/unsupported/);
  });

  it(".dockerignore patterns match as Docker's do for the forms the file uses", () => {
    const ig = dockerignore("node_modules\n**/*.test.ts\n# c\ndist\n");
    expect(ig("node_modules")).toBe(true);
    expect(ig("node_modules/x/y.js")).toBe(true);
    expect(ig("lib/a.test.ts")).toBe(true);
    expect(ig("a.test.ts")).toBe(true);
    expect(ig("lib/a.ts")).toBe(false);
    expect(ig("distx")).toBe(false);
  });
});
