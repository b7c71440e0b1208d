// Proves that a cluster set leaves no process, port or directory behind — when its
// test fails, when its test hangs until a timeout and the file never calls stop(),
// and when its owner is SIGKILLed (then the next sweep, as the global teardown runs it,
// cleans up).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { isPortListening, sweepOrphans } from "../../env/index.js";
import { isSameProcessAlive } from "../../env/processes.js";
import type { FixtureReport } from "../../env/fixtures/report.js";

const root = new URL("../../..", import.meta.url).pathname;
let scratch: string;

afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

function run(
  cmd: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (out += b.toString()));
    child.on("exit", (code) => resolve({ code, out }));
  });
}

async function expectNothingLeft(r: FixtureReport): Promise<void> {
  expect(r.processes.length).toBeGreaterThanOrEqual(2); // etcd + kube-apiserver at least
  for (const p of r.processes)
    expect(isSameProcessAlive(p.pid, p.start), `${p.name} (${p.pid}) still alive`).toBe(false);
  for (const port of r.ports) expect(await isPortListening(port), `port ${port} still bound`).toBe(false);
  expect(existsSync(r.dir), `${r.dir} still exists`).toBe(false);
}

async function runFixture(name: string): Promise<FixtureReport> {
  scratch = mkdtempSync(join(tmpdir(), "switchyard-cleanup-"));
  const reportFile = join(scratch, "report.json");
  const { code, out } = await run(
    process.execPath,
    [join(root, "node_modules/vitest/vitest.mjs"), "run", "--config", "test/env/fixtures/vitest.config.ts"],
    { SWITCHYARD_FIXTURE: name, SWITCHYARD_FIXTURE_REPORT: reportFile },
  );
  expect(code, out).not.toBe(0); // the fixture fails by design
  expect(existsSync(reportFile), `fixture never started its cluster set:\n${out}`).toBe(true);
  return JSON.parse(readFileSync(reportFile, "utf8")) as FixtureReport;
}

describe("cleanup", () => {
  it("leaves nothing behind when a test fails", async () => {
    await expectNothingLeft(await runFixture("fails"));
  });

  it("leaves nothing behind when a test times out and stop() is never called", async () => {
    await expectNothingLeft(await runFixture("times-out"));
  });

  it("sweeps what a SIGKILLed owner left behind", async () => {
    scratch = mkdtempSync(join(tmpdir(), "switchyard-cleanup-"));
    const reportFile = join(scratch, "report.json");
    const child = spawn(
      process.execPath,
      // One process (no tsx wrapper): SIGKILL must hit the set's owner itself.
      ["--import", "tsx", "test/env/fixtures/killed.fixture-main.ts"],
      {
        cwd: root,
        env: { ...process.env, SWITCHYARD_FIXTURE_REPORT: reportFile },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (b: Buffer) => b.toString().includes("ready") && resolve());
      child.on("exit", (code) => reject(new Error(`fixture exited early (${code})`)));
    });
    const r = JSON.parse(readFileSync(reportFile, "utf8")) as FixtureReport;
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    // No hook ran: the servers are orphans now.
    expect(r.processes.some((p) => isSameProcessAlive(p.pid, p.start))).toBe(true);
    expect(await sweepOrphans()).toBeGreaterThanOrEqual(2);
    await expectNothingLeft(r);
  });
});
