// The process provisioner signals a recorded pid only while it still names the agent that
// was recorded (same start time): a record whose pid now belongs to an unrelated process
// is stale — removed, reported gone, and that process is left alone; a correct record's
// process is stopped. Its default state directory is private and per user.
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { testScratchDir } from "../../../test/support/scratch-dir.js";
import { sha256Hex } from "./agent-secret-store.js";
import { ProcessAgentProvisioner } from "./process-agent-provisioner.js";
import { isSameProcess, processStartTime } from "./process-start-time.js";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
  vi.unstubAllEnvs();
});

/** An unrelated process, as one that got a recorded agent's pid after it exited would be. */
function stranger(): { child: ChildProcess; pid: number; startTime: string } {
  const child = spawn("sleep", ["300"], { stdio: "ignore" });
  children.push(child);
  return { child, pid: child.pid!, startTime: processStartTime(child.pid!)! };
}

function provisioner(stateDir: string) {
  return new ProcessAgentProvisioner({ kubeconfigPath: "/nonexistent/kubeconfig", stateDir });
}

/** Writes the record the provisioner would have written for `targetId`. */
function writeRecord(stateDir: string, targetId: string, pid: number, startTime?: string): string {
  const file = join(stateDir, `agent-${sha256Hex(targetId).slice(0, 24)}.json`);
  const record = { targetId, pid, port: 1, host: "127.0.0.1", podName: "web-0", secretHash: "x" };
  writeFileSync(file, JSON.stringify(startTime === undefined ? record : { ...record, startTime }), {
    mode: 0o600,
  });
  return file;
}

const exited = (c: ChildProcess) =>
  c.exitCode !== null || c.signalCode !== null
    ? Promise.resolve(c.signalCode)
    : new Promise<NodeJS.Signals | null>((r) => c.once("exit", (_code, sig) => r(sig)));

describe.runIf(existsSync("/proc/self/stat"))("process agent provisioner: recorded pids", () => {
  it("does not signal a pid reused by an unrelated process, and removes the stale record", async () => {
    const dir = testScratchDir("sy-provisioner-");
    const s = stranger();
    const file = writeRecord(dir, "shop/deployment/web", s.pid, String(Number(s.startTime) - 100));
    const p = provisioner(dir);
    await p.release({ id: "shop/deployment/web" });
    expect(existsSync(file)).toBe(false);
    await new Promise((r) => setTimeout(r, 100));
    expect(isSameProcess(s.pid, s.startTime)).toBe(true);
    expect(s.child.exitCode).toBeNull();
  });

  it("treats a record without a start time (an older format) as stale too", async () => {
    const dir = testScratchDir("sy-provisioner-");
    const s = stranger();
    writeRecord(dir, "shop/deployment/old", s.pid);
    const p = provisioner(dir);
    await p.stopAll();
    expect(p.records()).toEqual([]);
    expect(isSameProcess(s.pid, s.startTime)).toBe(true);
  });

  it("never signals a record whose pid is not a process id (0 and -1 would mean groups)", async () => {
    const dir = testScratchDir("sy-provisioner-");
    for (const [i, pid] of [0, -1].entries()) writeRecord(dir, `shop/deployment/bad-${i}`, pid, "1");
    const p = provisioner(dir);
    await p.stopAll(); // still running afterwards: this test process
    expect(readdirSync(dir)).toEqual([]);
  });

  it("stops the process a correct record names and removes the record", async () => {
    const dir = testScratchDir("sy-provisioner-");
    const s = stranger();
    const file = writeRecord(dir, "shop/deployment/web", s.pid, s.startTime);
    const p = provisioner(dir);
    expect(p.records()).toMatchObject([{ pid: s.pid, startTime: s.startTime }]);
    await p.release({ id: "shop/deployment/web" });
    expect(await exited(s.child)).toBe("SIGTERM");
    expect(existsSync(file)).toBe(false);
  });

  it("reports an agent whose pid now names another process as gone", async () => {
    const dir = testScratchDir("sy-provisioner-");
    const s = stranger();
    writeRecord(dir, "shop/deployment/web", s.pid, String(Number(s.startTime) + 1));
    const p = new ProcessAgentProvisioner({
      kubeconfigPath: "/nonexistent/kubeconfig",
      stateDir: dir,
      livenessIntervalMs: 20,
    });
    const abort = new AbortController();
    const gone = new Promise<string>((r) => p.watch(r, abort.signal));
    try {
      expect(await gone).toBe("shop/deployment/web");
    } finally {
      abort.abort();
    }
    expect(s.child.exitCode).toBeNull();
  });
});

describe("process agent provisioner: state directory", () => {
  it("defaults to a private per-user directory, one sub-directory per cluster", () => {
    const runtime = testScratchDir("sy-xdg-");
    vi.stubEnv("XDG_RUNTIME_DIR", runtime);
    new ProcessAgentProvisioner({ kubeconfigPath: "/k" });
    expect(statSync(join(runtime, "switchyard-agents")).mode & 0o777).toBe(0o700);
    const p = new ProcessAgentProvisioner({ kubeconfigPath: "/k", stateSubdir: "east" });
    expect(p.records()).toEqual([]);
    for (const d of [join(runtime, "switchyard-agents"), join(runtime, "switchyard-agents", "east")])
      expect(statSync(d).mode & 0o777).toBe(0o700);
    expect(() => new ProcessAgentProvisioner({ kubeconfigPath: "/k", stateSubdir: "../x" })).toThrow(
      /stateSubdir: must be one path segment/,
    );
  });

  it("refuses a state directory others may use, naming --agent-state-dir", () => {
    const dir = join(testScratchDir("sy-provisioner-"), "open");
    provisioner(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    chmodSync(dir, 0o755); // group and others may now read the records and the agents' logs

    expect(() => provisioner(dir)).toThrow(/^--agent-state-dir: .* has mode 0755/);
  });
});
