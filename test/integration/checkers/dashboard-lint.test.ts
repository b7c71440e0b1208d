// The Grafana dashboard the chart ships (charts/switchyard/dashboards/switchyard.json) through
// grafana/dashboard-linter at a pinned version (test/env builds it), in strict mode: every rule,
// errors and warnings alike, with no exclusions. A canary proves the linter reads the file: the
// same dashboard with one panel's description removed must fail.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { binaryPath, ensureBinaries } from "../../env/binaries.js";
import { chartDir } from "../../env/stack/helm.js";
import { runTool } from "./run-tool.js";

const dashboard = join(chartDir, "dashboards/switchyard.json");
let dir: string;

beforeAll(async () => {
  await ensureBinaries(["dashboard-linter"]);
  dir = mkdtempSync(join(tmpdir(), "switchyard-dashboard-lint-"));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Lints one dashboard file; the linter reads a `.lint` exclusions file beside it, if any. */
const lint = (file: string) => runTool(binaryPath("dashboard-linter"), ["lint", "--strict", file]);
/** The linter's findings: it marks each with ❌ (error) or ⚠ (warning). */
const findings = (output: string) => output.split("\n").filter((l) => /❌|⚠/.test(l));

it("finds nothing in the chart's dashboard", async () => {
  const r = await lint(dashboard);
  expect(findings(r.stdout + r.stderr)).toEqual([]);
  expect(r.code, r.stdout + r.stderr).toBe(0);
});

it("fails a panel without a description (it reads the dashboard)", async () => {
  const copy = join(dir, "switchyard.json");
  copyFileSync(dashboard, copy);
  const json = JSON.parse(readFileSync(copy, "utf8")) as { panels: { type: string; description?: string }[] };
  const panel = json.panels.find((p) => p.type !== "row")!;
  panel.description = "";
  writeFileSync(copy, JSON.stringify(json));
  const r = await lint(copy);
  expect(r.code).not.toBe(0);
  expect(findings(r.stdout + r.stderr).join("\n")).toMatch(/has missing title or description/);
});
