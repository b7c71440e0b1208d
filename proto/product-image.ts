// The layout of the one product image (the repository's Dockerfile) as a contract between the
// image, the chart and the control plane's sidecar template: the image's entrypoint is `node`,
// its working directory /app, and each component starts from its compiled main module, given
// as the first argument. Containers set `command: ["node"]` explicitly with the script first
// in `args`, so a pod starts the same component whatever the image's CMD says.

/** The image's working directory (Dockerfile WORKDIR). */
export const PRODUCT_IMAGE_WORKDIR = "/app";

/** The container command of every component (Dockerfile ENTRYPOINT). */
export const PRODUCT_IMAGE_COMMAND: readonly string[] = ["node"];

/** Each component's main module, relative to the working directory (first of `args`). */
export const COMPONENT_MAIN = {
  controlPlane: "dist/control-plane/src/main.js",
  router: "dist/data-plane/router/src/main.js",
  agent: "dist/data-plane/agent/src/main.js",
} as const;

export type Component = keyof typeof COMPONENT_MAIN;
