import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launch, LaunchError, type LaunchedProcess } from "./launch.js";

let root: string;
const saved = process.env.SWITCHYARD_ENV_TMPDIR;

// One root for the file: the launch group is created once per process, at the first launch.
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "switchyard-launch-test-"));
  process.env.SWITCHYARD_ENV_TMPDIR = root;
});
afterAll(() => {
  process.env.SWITCHYARD_ENV_TMPDIR = saved;
  if (saved === undefined) delete process.env.SWITCHYARD_ENV_TMPDIR;
  rmSync(root, { recursive: true, force: true });
});

const node = (script: string) => ({ command: process.execPath, args: ["-e", script] });

describe("launch", () => {
  it("waits for the ready line, keeps output and log lines, records the process and stops it", async () => {
    const p = await launch({
      name: "talker",
      ...node(
        `console.log("plain"); console.error("to stderr"); console.log(JSON.stringify({ msg: "up", port: 7 }));` +
          `setInterval(() => {}, 1000)`,
      ),
      ready: (q) => q.logs.find((l) => l.msg === "up"),
    });
    expect(p.ready).toEqual({ msg: "up", port: 7 });
    await p.waitForLog((l) => l.msg === "up");
    expect(p.output()).toContain("to stderr");
    expect(p.stdout()).toContain("plain");
    expect(p.stdout()).not.toContain("to stderr");
    const groupDir = join(root, "switchyard-env", readdirOne(join(root, "switchyard-env")));
    const owner = JSON.parse(readFileSync(join(groupDir, "owner.json"), "utf8")) as {
      processes: Array<{ pid: number; name: string }>;
    };
    expect(owner.processes).toContainEqual(expect.objectContaining({ pid: p.pid, name: "talker" }));
    await p.stop();
    expect(await p.exited).toBe("SIGTERM");
    expect(readFileSync(p.logFile, "utf8")).toContain("plain");
  });

  it("fails with the end of the output when the process exits before it is ready", async () => {
    const err = await launch({
      name: "crasher",
      ...node(`console.error("boom"); process.exit(3)`),
      ready: () => false,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LaunchError);
    expect((err as Error).message).toMatch(/^crasher exited \(3\) before it was ready; log .*\n[\s\S]*boom/);
  });

  it("kills a process that is not ready in time", async () => {
    let started: LaunchedProcess<unknown> | undefined;
    const err = await launch({
      name: "sleeper",
      ...node("setInterval(() => {}, 1000)"),
      ready: () => false,
      readyTimeoutMs: 200,
      onStart: (p) => (started = p),
    }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/^sleeper was not ready within 200 ms/);
    expect(started?.hasExited()).toBe(true);
  });

  it("escalates to SIGKILL after the grace when the signal is ignored", async () => {
    const p = await launch({
      name: "stubborn",
      ...node(`process.on("SIGTERM", () => {}); console.log("{}"); setInterval(() => {}, 1000)`),
      ready: (q) => q.logs.length > 0,
    });
    await p.stop(200);
    expect(await p.exited).toBe("SIGKILL");
  });
});

function readdirOne(dir: string): string {
  expect(existsSync(dir)).toBe(true);
  const entries = readdirSync(dir).filter((e) => e.startsWith("launch-"));
  expect(entries).toHaveLength(1);
  return entries[0]!;
}
