// Lint rules for the whole repository. Dependency direction (proto <- data-plane,
// control-plane <- cli) is enforced here so a wrong import fails CI, not review.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

const noImport = (...groups) => ({
  "no-restricted-imports": ["error", { patterns: groups.map((g) => ({ group: g.from, message: g.why })) }],
});

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
  {
    files: ["data-plane/**/*.ts"],
    rules: noImport(
      { from: ["**/control-plane/**"], why: "the data plane never imports control-plane code" },
      { from: ["**/cli/**"], why: "the data plane never imports the CLI" },
    ),
  },
  {
    files: ["control-plane/**/*.ts"],
    rules: noImport(
      { from: ["**/data-plane/**"], why: "the control plane never imports data-plane internals" },
      { from: ["**/cli/**"], why: "the control plane never imports the CLI" },
    ),
  },
  {
    files: ["proto/**/*.ts"],
    rules: noImport({
      from: ["**/control-plane/**", "**/data-plane/**", "**/cli/**"],
      why: "proto is the bottom layer",
    }),
  },
);
