import { spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { eventually } from "../../test/support/poll.js";
import { descendants, nameOf, stillRunning, type HostProcess } from "./process-tree.js";

const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0))
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      /* gone */
    }
});

describe.runIf(process.platform === "linux")("descendants", () => {
  it("finds a child and its grandchild with host pids, and sees each go", async () => {
    const sh = spawn("sh", ["-c", "sleep 300 & wait; sleep 300"], { stdio: "ignore", detached: true });
    started.push(sh.pid!);
    const tree = await eventually("sh and its sleep", () => {
      const t = descendants(process.pid).filter((p) => p.pid === sh.pid || p.ppid === sh.pid);
      return t.length === 2 ? t : undefined;
    });
    const [parent, sleep] = tree as [HostProcess, HostProcess];
    expect(parent).toMatchObject({
      pid: sh.pid,
      ppid: process.pid,
      nsPid: sh.pid,
      argv: ["sh", "-c", "sleep 300 & wait; sleep 300"],
    });
    expect(sleep.argv).toEqual(["sleep", "300"]);
    expect(stillRunning(sleep)).toBe(true);
    // The same pid with another start time is another process.
    expect(stillRunning({ pid: sleep.pid, startTicks: "1" })).toBe(false);
    process.kill(sleep.pid, "SIGKILL");
    await eventually("the sleep to be gone", () => !stillRunning(sleep));
    expect(stillRunning(parent)).toBe(true);
  });
});

describe("nameOf", () => {
  const p = (nsPid: number, argv: string[]): HostProcess => ({
    pid: 4000 + nsPid,
    ppid: 1,
    startTicks: "9",
    nsPid,
    argv,
  });
  const reported = { app: 39, child: 50 };
  it("knows the app and its child by the pids they report in their namespace", () => {
    expect(nameOf(p(39, ["/usr/bin/node", "/repo/test/e2e/fixtures/local-app.mjs"]), reported)).toBe(
      "local app",
    );
    expect(nameOf(p(50, ["/usr/bin/node", "-e", "setInterval(() => {}, 1000)"]), reported)).toBe(
      "local app's child",
    );
    // pid 39 that is not the app's script is not the app.
    expect(nameOf(p(39, ["/usr/bin/unshare", "--user"]), reported)).toBe("unshare --user");
  });
  it("knows the watchdog by its $0, anything else by program and first argument", () => {
    expect(nameOf(p(7, ["sh", "-c", "…", "switchyard-watchdog", "39", "1234"]), reported)).toBe(
      "CLI watchdog",
    );
    expect(nameOf(p(8, ["/usr/bin/setpriv", "--pdeathsig", "SIGTERM"]), reported)).toBe(
      "setpriv --pdeathsig",
    );
  });
});
