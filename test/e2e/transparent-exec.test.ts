// `switchyard exec --network=transparent` on the embedded stack, as a developer runs it: the
// command runs in user, network, mount and PID namespaces of its own. It sees the target's
// ConfigMap at its in-pod path, runs as the developer's own user, has no proxy variables
// and the TUN device as its route, still reaches the laptop's loopback services, gets the
// stolen traffic inside its namespace (and the laptop reaches its port as before), exits
// with its own code, shuts down gracefully on Ctrl-C with its network still up, and leaves
// nothing behind. A machine that cannot run it falls back to the proxy in one line.
// (Name resolution and UDP through the cluster need cluster DNS: test/pods/sessions.test.ts.)
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmbeddedStack, type EmbeddedStack } from "../env/stack/embedded-stack.js";
import { freePorts } from "../env/ports.js";
import { launch, repoRoot, tsx, type LaunchedProcess } from "../support/launch.js";
import { eventually } from "../support/poll.js";

let stack: EmbeddedStack;
let laptop: Server;
let laptopUrl = "";
const running: LaunchedProcess[] = [];

beforeAll(async () => {
  stack = await startEmbeddedStack(
    process.env.SWITCHYARD_E2E_LOG_DIR ? { logDir: process.env.SWITCHYARD_E2E_LOG_DIR } : {},
  );
  laptop = createServer((_req, res) => res.end("a service on the laptop"));
  await new Promise<void>((r) => laptop.listen(0, "127.0.0.1", r));
  laptopUrl = `http://127.0.0.1:${(laptop.address() as { port: number }).port}/`;
}, 180_000);

afterAll(async () => {
  for (const p of running) await p.stop(0, "SIGKILL");
  await new Promise((r) => laptop?.close(r));
  await stack?.stop();
});

/** `switchyard exec --steal --port 8080:<localPort> FLAGS -- CMD` (default CMD: the transparent app). */
async function exec(
  flags: string[],
  env: Record<string, string> = {},
  o: { localPort?: number; command?: string[]; target?: string } = {},
) {
  const localPort = o.localPort ?? (await freePorts(1))[0]!;
  const args = [...stack.developerCliArgs];
  if (o.target) args[args.indexOf("-t") + 1] = o.target;
  const proc = await launch({
    name: "switchyard-exec-transparent",
    ...tsx("cli/src/main.ts", [
      "exec",
      ...args,
      "--steal",
      "--port",
      `8080:${localPort}`,
      ...flags,
      "--",
      ...(o.command ?? [process.execPath, join(repoRoot, "test/e2e/fixtures/transparent-app.mjs")]),
    ]),
    env: {
      LOCAL_PORT: String(localPort),
      LAPTOP_URL: laptopUrl,
      EAST_APP_URL: `${stack.workloads.east!.appUrl}/`,
      EXIT_CODE: "42",
      ...env,
    },
    ready: (p) => p.output().includes("transparent app ready") || p.hasExited() || undefined,
    readyTimeoutMs: 120_000,
    readyIntervalMs: 100,
  });
  running.push(proc);
  return { proc, localPort };
}

async function get(url: string): Promise<string> {
  const r = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  return r.text();
}

/** Pids of the processes whose environment holds `entry`. */
function processesWith(entry: string): number[] {
  const pids: number[] = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(entry)) pids.push(Number(pid));
    } catch {
      /* gone meanwhile */
    }
  }
  return pids;
}

/** What a transparent run may leave: its private directory, the helper, tun2socks. */
function leftovers(): string[] {
  const dirs = readdirSync(tmpdir()).filter((d) => d.startsWith("switchyard-ns-"));
  const procs = execFileSync("ps", ["-eo", "args"], { encoding: "utf8" })
    .split("\n")
    .filter((l) => /namespace-helper|tun2socks\S* -device/.test(l));
  return [...dirs, ...procs];
}

describe("switchyard exec --network=transparent", () => {
  it("shows CMD the target's files, its own user, the laptop's loopback and stolen traffic; passes its exit code", async () => {
    const before = leftovers();
    const { proc, localPort } = await exec(["--network=transparent"]);
    expect(proc.output()).toMatch(
      /network, DNS and files: the default cluster's \(transparent; \d+ file\(s\)/,
    );
    // Stolen through east's agent into the namespace: the request reaches CMD there.
    const east = stack.workloads.east!.trafficUrl;
    await eventually("a stolen request answered inside the namespace", async () =>
      (await get(`${east}/hello`).catch(() => "")).startsWith("transparent app: /hello") ? true : undefined,
    );
    // The laptop still reaches CMD's port as before.
    expect(await get(`http://127.0.0.1:${localPort}/from-laptop`)).toBe("transparent app: /from-laptop");
    const report = JSON.parse(await get(`${east}/report`)) as Record<string, unknown>;
    expect(report).toEqual({
      settings: "cluster: east\n",
      uid: process.getuid!(),
      interfaces: ["lo", "sy0", "sy1"],
      proxy: null,
      laptop: "200 a service on the laptop",
      eastApp: expect.stringMatching(/^200 /),
    });
    await get(`${east}/exit`).catch(() => "");
    expect(await proc.exited).toBe(42);
    expect(leftovers()).toEqual(before);
  });

  it("lets CMD shut down on Ctrl-C with its network still up, and leaves nothing", async () => {
    const before = leftovers();
    const { proc } = await exec(["--network=transparent"]);
    await proc.stop(Infinity, "SIGINT");
    expect(await proc.exited).toBe(0);
    expect(proc.output()).toContain("graceful 200 a service on the laptop");
    expect(leftovers()).toEqual(before);
  });

  it("takes CMD, the helper and tun2socks down and removes its directory when the CLI is killed outright", async () => {
    const before = leftovers();
    const mark = `kill-${process.pid}-${Date.now()}`;
    const { proc } = await exec(["--network=transparent"], { SWITCHYARD_E2E_MARK: mark });
    // This run's processes: the CLI and everything it started carry the mark in their environment.
    const running = () => processesWith(`SWITCHYARD_E2E_MARK=${mark}`).filter((p) => p !== proc.pid);
    expect(running().length).toBeGreaterThanOrEqual(5); // unshare, helper, 2 × tun2socks, CMD
    proc.kill("SIGKILL");
    await proc.exited;
    await eventually(
      "CMD, the helper and tun2socks to be gone",
      () => (running().length === 0 ? true : undefined),
      {
        timeoutMs: 15_000,
        intervalMs: 100,
      },
    );
    // The watchdog names CMD, not the unshare that started its namespaces.
    await eventually("the watchdog to say so", () =>
      proc.output().includes(`ended without stopping ${process.execPath}; stopping it`) ? true : undefined,
    );
    // Its directory too: the watchdog removes it once the helper is gone.
    await eventually("the run's directory to be gone", () =>
      leftovers().filter((l) => !before.includes(l)).length === 0 ? true : undefined,
    );
  });

  it("builds the network while the session starts, and takes it down when the session cannot open", async () => {
    const before = leftovers();
    const mark = `no-session-${process.pid}-${Date.now()}`;
    // A target no cluster has: the session fails after its namespace helper has started.
    const flags = ["--network=transparent", "--ready-timeout", "20"];
    // Every process of this run carries the mark: seen every 20 ms from before the CLI starts.
    const helpers = new Set<number>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        for (const p of processesWith(`SWITCHYARD_E2E_MARK=${mark}`)) helpers.add(p);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const { proc } = await exec(flags, { SWITCHYARD_E2E_MARK: mark }, { target: "deployment/no-such-app" });
    const code = await proc.exited;
    watching = false;
    await watcher;
    helpers.delete(proc.pid);
    expect(code).toBe(1);
    expect(proc.output()).toMatch(/switchyard: error: session \S+ (failed|was not ready)/);
    expect(proc.output()).not.toContain("transparent app ready");
    // Its helper ran (unshare and node at least) while the session was starting, and is gone.
    expect(helpers.size).toBeGreaterThanOrEqual(2);
    expect(processesWith(`SWITCHYARD_E2E_MARK=${mark}`)).toEqual([]);
    expect(leftovers()).toEqual(before);
  });

  it("keeps delivering to a local port this machine already serves (an app run in a debugger)", async () => {
    const ide = createServer((_req, res) => res.end("the app in the debugger"));
    await new Promise<void>((r) => ide.listen(0, "127.0.0.1", r));
    const port = (ide.address() as { port: number }).port;
    try {
      const { proc } = await exec(
        ["--network=transparent"],
        {},
        {
          localPort: port,
          command: [
            process.execPath,
            "-e",
            'console.log("transparent app ready"); setInterval(() => {}, 1 << 30)',
          ],
        },
      );
      expect(proc.output()).toContain(`local port ${port} is already served on this machine`);
      const east = stack.workloads.east!.trafficUrl;
      await eventually("a stolen request answered by the laptop's app", async () =>
        (await get(`${east}/x`).catch(() => "")) === "the app in the debugger" ? true : undefined,
      );
      await proc.stop(Infinity, "SIGINT");
    } finally {
      await new Promise((r) => ide.close(r));
    }
  });

  it("falls back to the proxy in one line where it cannot run, and refuses --network=transparent there", async () => {
    const missing = { SWITCHYARD_TUN2SOCKS: join(tmpdir(), "no-such-tun2socks") };
    const auto = await exec([], missing);
    expect(auto.proc.output()).toMatch(
      /switchyard: transparent network unavailable: tun2socks is not installed: .*; using --network=proxy\n/,
    );
    const report = JSON.parse(await get(`http://127.0.0.1:${auto.localPort}/report`)) as Record<
      string,
      unknown
    >;
    expect(report.proxy).toMatch(/^socks5h:\/\/127\.0\.0\.1:\d+$/);
    await auto.proc.stop(Infinity, "SIGINT");

    const strict = await exec(["--network=transparent"], missing);
    expect(await strict.proc.exited).toBe(1);
    expect(strict.proc.output()).toMatch(
      /switchyard: error: --network=transparent is not possible here: tun2socks is not installed/,
    );
  });
});
