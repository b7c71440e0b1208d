// Proves that a cluster set leaves no process, port or directory behind — when its
// test fails, when its test hangs until a timeout and the file never calls stop(),
// and when its owner is SIGKILLed (then the next sweep, as the global teardown runs it,
// cleans up).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { isPortListening, sweepOrphans } from "../../env/index.js";
import { envRoot, isSameProcessAlive, processStartTime } from "../../env/processes.js";
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

/** Command lines of the processes listening on 127.0.0.1:port (from /proc). */
function listenerCommands(port: number): string[] {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[1]?.endsWith(`:${hex}`) && f[3] === "0A") inodes.add(f[9]!);
    }
  }
  const out: string[] = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const fds = readdirSync(`/proc/${pid}/fd`);
      if (
        fds.some((fd) => inodes.has(/socket:\[(\d+)\]/.exec(safeLink(`/proc/${pid}/fd/${fd}`))?.[1] ?? ""))
      ) {
        out.push(readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim());
      }
    } catch {
      /* gone or not ours to read */
    }
  }
  return out;
}

function safeLink(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return "";
  }
}

async function expectNothingLeft(r: FixtureReport): Promise<void> {
  expect(r.processes.length).toBeGreaterThanOrEqual(2); // etcd + kube-apiserver at least
  for (const p of r.processes)
    expect(isSameProcessAlive(p.pid, p.start), `${p.name} (${p.pid}) still alive`).toBe(false);
  // A freed ephemeral port may be taken at once by another test running in parallel; what
  // must not hold it is one of our servers.
  for (const port of r.ports) {
    if (!(await isPortListening(port))) continue;
    const holders = listenerCommands(port);
    expect(
      holders.filter((c) => /kube-apiserver|etcd|kube-controller-manager/.test(c)),
      `port ${port} held by ${holders.join("; ")}`,
    ).toEqual([]);
  }
  expect(
    existsSync(r.dir),
    `${r.dir} still exists: ${existsSync(r.dir) ? JSON.stringify(readdirSync(r.dir, { recursive: true })) : ""}`,
  ).toBe(false);
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
    // Test files starting clusters or servers in parallel sweep too and may take some of these
    // orphans first (and still be killing them when this sweep returns): what counts is that
    // they are all gone, soon after.
    await sweepOrphans();
    await vi.waitFor(() => expectNothingLeft(r), { timeout: 15_000, interval: 200 });
  });

  it("sweeps processes a component started on its own that name a set directory already removed", async () => {
    // Like a process agent a control plane spawned detached: no record of ours names it.
    const setDir = join(envRoot(), `set-999999-${process.pid}`);
    mkdirSync(setDir, { recursive: true });
    const stray = spawn(
      process.execPath,
      ["-e", "setInterval(() => {}, 1000)", "--", `--kubeconfig=${setDir}/east/admin.kubeconfig`],
      { detached: true, stdio: "ignore" },
    );
    stray.unref();
    const start = processStartTime(stray.pid!)!;
    // Until its exec, the child's command line is still its parent's.
    await vi.waitFor(() => expect(readFileSync(`/proc/${stray.pid}/cmdline`, "utf8")).toContain(setDir));
    await sweepOrphans();
    expect(isSameProcessAlive(stray.pid!, start)).toBe(true); // its set still exists: left alone
    rmSync(setDir, { recursive: true, force: true });
    expect(await sweepOrphans()).toBeGreaterThanOrEqual(1);
    expect(isSameProcessAlive(stray.pid!, start)).toBe(false);
  });
});
