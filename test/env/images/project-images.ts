// The images built from this project for real nodes, without Docker:
// - the product image (control plane, router, agent): the production Dockerfile's final stage —
//   its `COPY --from=build` lines over the build stage's output (product-build.ts), its
//   WORKDIR, ENV, USER, EXPOSE, ENTRYPOINT and CMD — on a Node runtime layer (the pinned Node
//   of the Dockerfile's major and its libraries, where the Dockerfile has node:*-bookworm-slim);
// - the redirect image for the sidecar's iptables init container, from Dockerfile.redirect's own
//   instructions applied with this Debian host's packages (redirect-image.ts);
// - the demo app image: a small HTTP app (fixtures/demo-app.mjs) as the e2e suites' target, and
//   the queue consumer it runs when its environment names a queue (fixtures/queue-consumer.mjs).
import { dirname, join, posix } from "node:path";
import { fileURLToPath } from "node:url";
import { statSync } from "node:fs";
import { hostTree, nodeRuntimeImage, PATH_ENV, type ImageFile, type ImageSpec } from "./oci-image.js";
import type { DockerStage } from "./dockerfile.js";
import { buildProduct, ProductBuildError, type ProductBuild } from "./product-build.js";

export const PRODUCT_IMAGE = "switchyard.test/switchyard:dev";
export const REDIRECT_IMAGE = "switchyard.test/iptables:1";
export const DEMO_APP_IMAGE = "switchyard.test/demo-app:1";
/** The demo app's port (as the embedded stack's demo workload). */
export const DEMO_APP_PORT = 8080;

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "fixtures");

/** The final stage's files: each `COPY --from=build /src/x dest` as the build output's x at dest. */
export function finalStageFiles(final: DockerStage, build: ProductBuild): ImageFile[] {
  const files: ImageFile[] = [{ path: final.workdir, directory: true }];
  for (const copy of final.copies) {
    if (copy.from !== "build")
      throw new ProductBuildError(
        `the final stage copies only from the build stage, not ${copy.from ?? "the context"}`,
      );
    for (const source of copy.sources) {
      const host = join(build.dir, posix.relative(build.workdir, source));
      const into = copy.sources.length > 1 || copy.dest.endsWith("/");
      const dest = into ? posix.join(copy.dest, posix.basename(source)) : copy.dest;
      if (statSync(host).isDirectory()) files.push(...hostTree(host, dest));
      else files.push({ path: dest, source: host, mode: statSync(host).mode & 0o7777 });
    }
  }
  return files;
}

/** The product image spec from a finished build (its stages read from the same Dockerfile). */
export async function productImageFrom(build: ProductBuild, name = PRODUCT_IMAGE): Promise<ImageSpec> {
  const final = build.stages.at(-1)!;
  const runtime = await nodeRuntimeImage(name);
  return {
    name,
    files: runtime.files,
    layers: [finalStageFiles(final, build)],
    ...(final.entrypoint ? { entrypoint: final.entrypoint } : {}),
    ...(final.cmd ? { cmd: final.cmd } : {}),
    env: [PATH_ENV, ...final.env],
    workingDir: final.workdir,
    ...(final.user ? { user: final.user } : {}),
    ...(final.expose.length ? { exposedPorts: final.expose } : {}),
  };
}

/** Builds the project (cached) and describes the product image. */
export async function productImage(name = PRODUCT_IMAGE): Promise<ImageSpec> {
  return productImageFrom(buildProduct(), name);
}

/** The demo app: `node /app/demo-app.mjs` (and the queue consumer it may start) as uid 10001, port DEMO_APP_PORT. */
export async function demoAppImage(name = DEMO_APP_IMAGE): Promise<ImageSpec> {
  const runtime = await nodeRuntimeImage(name);
  return {
    name,
    files: runtime.files,
    layers: [
      ["demo-app.mjs", "queue-consumer.mjs"].map((f) => ({
        path: `/app/${f}`,
        source: join(FIXTURES, f),
        mode: 0o644,
      })),
    ],
    entrypoint: ["node", "/app/demo-app.mjs"],
    env: [PATH_ENV, `PORT=${DEMO_APP_PORT}`],
    workingDir: "/app",
    user: "10001:10001",
    exposedPorts: [`${DEMO_APP_PORT}/tcp`],
  };
}
