// Lint rules for the whole repository. The dependency fences (lib <- proto <- components;
// router, agent, control plane and CLI never import each other; product code never
// imports tests) are enforced here so a wrong import fails `npm run lint`, not review.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

const noImport = (...groups) => ({
  "no-restricted-imports": ["error", { patterns: groups.map((g) => ({ group: g.from, message: g.why })) }],
});

const noTests = {
  from: ["**/test/**", "**/bench/**"],
  why: "product code never imports tests, test support or benchmarks",
};

// A part's fences: its product files get `groups` plus the ban on tests; its unit tests
// (*.test.ts beside the code) get `groups` only, so they may use test/support and test/peers.
const fence = (files, ...groups) => [
  { files, ignores: ["**/*.test.ts"], rules: noImport(...groups, noTests) },
  { files: files.map((f) => f.replace(/\*\.ts$/, "*.test.ts")), rules: noImport(...groups) },
];

const controlPlane = [
  {
    from: ["**/data-plane/**"],
    why: "the control plane never imports the data plane (it pushes tables over RouteDiscovery)",
  },
  { from: ["**/cli/**"], why: "the control plane never imports the CLI" },
];

const processLayer = {
  from: ["**/control-plane-options.js", "**/control-plane.js", "**/main.js"],
  why: "a control-plane feature never imports the process's options or wiring: it declares its flags and needs (runtime/feature.ts)",
};

export default tseslint.config(
  { ignores: ["node_modules/**", "dist/**", "coverage/**", "**/gen/**", "bench/results/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
  // Fences: what each part may import (each folder's README says the same).
  ...fence(["lib/**/*.ts"], {
    from: ["**/proto/**", "**/control-plane/**", "**/data-plane/**", "**/cli/**"],
    why: "lib/ is the bottom layer: shared mechanisms import nothing of the project",
  }),
  ...fence(["proto/**/*.ts"], {
    from: ["**/control-plane/**", "**/data-plane/**", "**/cli/**"],
    why: "proto/ holds the contracts: it imports nothing of the components (lib/ only)",
  }),
  ...fence(
    ["data-plane/router/**/*.ts"],
    {
      from: ["**/control-plane/**"],
      why: "the router never imports control-plane code (they talk over RouteDiscovery)",
    },
    { from: ["**/agent/src/**"], why: "router and agent never import each other (they share proto/)" },
    { from: ["**/cli/**"], why: "the data plane never imports the CLI" },
  ),
  ...fence(
    ["data-plane/agent/**/*.ts"],
    { from: ["**/control-plane/**"], why: "the agent never imports control-plane code" },
    { from: ["**/router/src/**"], why: "router and agent never import each other (they share proto/)" },
    { from: ["**/cli/**"], why: "the data plane never imports the CLI" },
  ),
  ...fence(["control-plane/**/*.ts"], ...controlPlane),
  // Inside the control plane: a feature (every folder of src/) never reads the process's
  // options or wiring; it declares its flags and needs through runtime/feature.ts.
  ...fence(["control-plane/src/*/**/*.ts"], ...controlPlane, processLayer),
  ...fence(["control-plane/src/credentials/**/*.ts"], ...controlPlane, processLayer, {
    from: ["**/config/**"],
    why: "credentials/ never imports config/: the configuration uses credentials, not the other way round",
  }),
  ...fence(
    ["cli/**/*.ts"],
    {
      from: ["**/control-plane/**"],
      why: "the CLI depends on contracts only (proto/, proto/api/), never the control plane",
    },
    { from: ["**/data-plane/**"], why: "the CLI depends on contracts only (proto/), never the data plane" },
  ),
);
