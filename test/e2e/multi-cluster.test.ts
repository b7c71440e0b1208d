// End to end, as a developer uses it: `switchyard exec` against the embedded stack — a
// management-only Primary, east (the Default cluster) and west, the real chart, real
// control planes, routers and agents — with a local app under exec. Requests sent to
// east's and west's agents (what a Service in each cluster would route to) must reach the
// local app; env, files, DNS and outgoing connections must come from east only.
import { readdirSync, readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { clusterSessionClient, multiClusterSessionClient } from "../../proto/api/v1alpha1/index.js";
import { startEmbeddedStack, type EmbeddedStack } from "../env/stack/embedded-stack.js";
import { freePorts } from "../env/ports.js";
import { launch, repoRoot, tsx, type LaunchedProcess } from "../support/launch.js";
import { eventually, type PollOptions } from "../support/poll.js";

let stack: EmbeddedStack;
let sink: Server;
let sinkPort = 0;
const running: Array<LaunchedProcess<unknown>> = [];
const POLL: PollOptions = { timeoutMs: 60_000, intervalMs: 250 };

interface Exec {
  proc: LaunchedProcess;
  localPort: number;
  output: () => string;
  exited: Promise<number | string>;
}

/** Starts `switchyard exec … -- node local-app.mjs` and waits until the local app is serving. */
async function exec(flags: string[], env: Record<string, string> = {}): Promise<Exec> {
  const localPort = (await freePorts(1))[0]!;
  const proc = await launch({
    name: "switchyard-exec",
    ...tsx("cli/src/main.ts", [
      "exec",
      ...stack.developerCliArgs,
      "--port",
      `8080:${localPort}`,
      ...flags,
      "--",
      process.execPath,
      join(repoRoot, "test/e2e/fixtures/local-app.mjs"),
    ]),
    env: { LOCAL_PORT: String(localPort), ...env },
    ready: (p) => p.output().includes("local app ready"),
    readyTimeoutMs: 120_000,
    readyIntervalMs: 250,
  });
  running.push(proc);
  return { proc, localPort, output: () => proc.output(), exited: proc.exited };
}

/** Runs `fn`; on failure, adds what the CLI printed to the error. */
async function showingOutput<T>(e: Exec, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    (err as Error).message += `\nCLI output:\n${e.output()}`;
    throw err;
  }
}

/** Ctrl-C, as a developer stops it; resolves with its exit status. */
async function stopExec(e: Exec): Promise<number | string> {
  await e.proc.stop(Infinity, "SIGINT");
  return e.exited;
}

/** Running (a zombie waiting to be reaped counts as gone). */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(")") + 2));
  } catch {
    return false;
  }
}

async function get(url: string, headers: Record<string, string> = {}) {
  const r = await fetch(url, { headers });
  return { status: r.status, servedBy: r.headers.get("x-served-by"), body: await r.text() };
}

/**
 * One GET on a connection of its own. While an agent restarts, a connection it accepts
 * before the session's steal is back goes to the app and, kept alive, stays there (a steal
 * takes connections, not requests, see data-plane/agent/README.md); a caller that wants to
 * see the steal return opens new connections, like curl does.
 */
function getFresh(url: string): Promise<{ servedBy: string | undefined }> {
  return new Promise((res, rej) => {
    const req = httpRequest(url, { agent: false }, (r) => {
      r.resume();
      r.on("end", () => res({ servedBy: r.headers["x-served-by"] as string | undefined }));
    });
    req.on("error", rej);
    req.end();
  });
}

beforeAll(async () => {
  stack = await startEmbeddedStack({
    demoEnv: { GREETING: "hello" },
    ...(process.env.SWITCHYARD_E2E_LOG_DIR ? { logDir: process.env.SWITCHYARD_E2E_LOG_DIR } : {}),
  });
  sink = createServer((s) => {
    s.on("data", () => s.end(`from ${s.remoteAddress}\n`));
    s.on("error", () => {});
  });
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", () => r()));
  sinkPort = (sink.address() as { port: number }).port;
}, 240_000);

afterEach(async () => {
  for (const p of running.splice(0)) await p.stop(0, "SIGKILL");
});

afterAll(async () => {
  sink?.close();
  await stack?.stop();
});

describe("switchyard exec across clusters", () => {
  it("steals: requests reaching east's and west's agents are answered by the local app", async () => {
    const e = await exec(["--steal"]);
    const { east, west } = stack.workloads;
    const before = east!.appRequests.length + west!.appRequests.length;
    const a = await eventually(
      "a stolen request through east",
      async () => {
        const r = await get(`${east!.trafficUrl}/orders/1`);
        return r.servedBy === "local" ? r : undefined;
      },
      POLL,
    );
    expect(a.body).toBe("local app: GET /orders/1\n");
    const b = await get(`${west!.trafficUrl}/orders/2`);
    expect(b.servedBy).toBe("local");
    expect(b.body).toBe("local app: GET /orders/2\n");
    expect(east!.appRequests.length + west!.appRequests.length).toBe(before); // the cluster apps saw nothing
    // Ctrl-C reaches CMD too; CMD's exit status (killed by SIGINT: 130) is the CLI's.
    expect(await stopExec(e)).toBe(130);
  });

  it("runs the command with east's resolved environment", async () => {
    const e = await exec(["--steal"]);
    const env = await eventually(
      "the env endpoint",
      async () => {
        const r = await get(`http://127.0.0.1:${e.localPort}/env`);
        return JSON.parse(r.body) as Record<string, string>;
      },
      POLL,
    );
    // Written out by hand from the demo Deployment (createDemo in env/stack/demo-workload.ts and
    // demoEnv above) and from what the kubelet adds: the `kubernetes` Service of "default"
    // (its ClusterIP is the first address of the API servers' --service-cluster-ip-range
    // 10.0.0.0/24, port 443 named https). No other Service exists in "default".
    const expected: Record<string, string> = {
      CLUSTER_NAME: "east",
      GREETING: "hello",
      KUBERNETES_SERVICE_HOST: "10.0.0.1",
      KUBERNETES_SERVICE_PORT: "443",
      KUBERNETES_SERVICE_PORT_HTTPS: "443",
      KUBERNETES_PORT: "tcp://10.0.0.1:443",
      KUBERNETES_PORT_443_TCP: "tcp://10.0.0.1:443",
      KUBERNETES_PORT_443_TCP_PROTO: "tcp",
      KUBERNETES_PORT_443_TCP_PORT: "443",
      KUBERNETES_PORT_443_TCP_ADDR: "10.0.0.1",
    };
    for (const [k, v] of Object.entries(expected)) expect(env[k], k).toBe(v);
    // Nothing else came from the cluster.
    expect(e.output()).toContain(
      `read ${Object.keys(expected).length} environment variables from the default cluster`,
    );
    expect(env.SWITCHYARD_SESSION).toMatch(/^mc-[0-9a-f]{16}$/);
    await stopExec(e);
  });

  it("mirrors: the cluster apps still answer and the local app sees copies", async () => {
    const e = await exec(["--mirror"]);
    const { east, west } = stack.workloads;
    await eventually(
      "mirrored copies on the local app",
      async () => {
        const r1 = await get(`${east!.trafficUrl}/m/east`);
        const r2 = await get(`${west!.trafficUrl}/m/west`);
        expect(r1.servedBy).toBe("app-east");
        expect(r2.servedBy).toBe("app-west");
        const seen = JSON.parse((await get(`http://127.0.0.1:${e.localPort}/seen`)).body) as Array<{
          path: string;
        }>;
        const paths = seen.map((s) => s.path);
        return paths.includes("/m/east") && paths.includes("/m/west") ? true : undefined;
      },
      POLL,
    );
    await stopExec(e);
  });

  it("steals only requests matching a header filter", async () => {
    const e = await exec(["--steal", "--http-header", "X-User: alice"]);
    const { east, west } = stack.workloads;
    await eventually(
      "a filtered steal",
      async () => {
        const r = await get(`${east!.trafficUrl}/a`, { "x-user": "alice" });
        return r.servedBy === "local" ? r : undefined;
      },
      POLL,
    );
    expect((await get(`${west!.trafficUrl}/a`, { "x-user": "alice" })).servedBy).toBe("local");
    expect((await get(`${east!.trafficUrl}/a`, { "x-user": "bob" })).servedBy).toBe("app-east");
    expect((await get(`${west!.trafficUrl}/a`)).servedBy).toBe("app-west");
    await stopExec(e);
  });

  it("sends outgoing connections out of east only", async () => {
    // Through the proxy network: the sink is on loopback, which the transparent network keeps local.
    const e = await exec(["--steal", "--network=proxy"]);
    const r = await eventually(
      "an outgoing connection through the proxy",
      async () => {
        const x = await get(`http://127.0.0.1:${e.localPort}/out?target=127.0.0.1:${sinkPort}`);
        return x.status === 200 ? x : undefined;
      },
      POLL,
    );
    // East's agent binds its outgoing sockets to east's address; west's would be 127.0.0.3.
    expect(r.body.trim()).toBe(`from ${stack.workloads.east!.ip}`);
    await stopExec(e);
  });

  it("reads a file from east's ConfigMap mount", async () => {
    const cat = await launch({
      name: "switchyard-files-cat",
      ...tsx("cli/src/main.ts", ["files", "cat", "/etc/demo/settings.yaml", ...stack.developerCliArgs]),
    });
    running.push(cat);
    const out = { code: await cat.exited, text: cat.output() };
    expect(out.text).toContain("cluster: east");
    expect(out.code).toBe(0);
  });

  it("reconnects through another router when the one in use dies", async () => {
    const e = await exec(["--steal"]);
    const east = stack.workloads.east!;
    await showingOutput(e, async () => {
      await eventually(
        "steal before",
        async () => ((await get(`${east.trafficUrl}/r1`)).servedBy === "local" ? true : undefined),
        POLL,
      );
      const inUse = /connected to router (ws:\/\/[^/\s]+)/.exec(e.output())![1]!;
      const index = stack.primaryRouterUrls.indexOf(inUse);
      expect(index).toBeGreaterThanOrEqual(0);
      await stack.killPrimaryRouter(index);
      await eventually(
        "steal after the router died",
        async () => ((await get(`${east.trafficUrl}/r2`)).servedBy === "local" ? true : undefined),
        { ...POLL, timeoutMs: 60_000 },
      );
      const other = stack.primaryRouterUrls[1 - index]!;
      await eventually(
        "the CLI to report the new router",
        async () => (e.output().includes(`reconnected through ${other}`) ? true : undefined),
        POLL,
      );
    });
    await stopExec(e);
  });

  it("tells the client when west's agent dies, keeps east working, and resubscribes west when it returns", async () => {
    const e = await exec(["--steal"]);
    const { east, west } = stack.workloads;
    await showingOutput(e, async () => {
      await eventually(
        "steal in east and west",
        async () =>
          (await get(`${west!.trafficUrl}/w1`)).servedBy === "local" &&
          (await get(`${east!.trafficUrl}/e0`)).servedBy === "local"
            ? true
            : undefined,
        POLL,
      );
      const agentsDir = join(stack.agentsDir, "west");
      const record = readdirSync(agentsDir).find((f) => f.endsWith(".json"))!;
      const { pid } = JSON.parse(readFileSync(join(agentsDir, record), "utf8")) as { pid: number };
      process.kill(pid, "SIGKILL");
      await eventually(
        "the client to hear about west",
        async () => (/cluster west\/\S+ is unreachable/.test(e.output()) ? true : undefined),
        POLL,
      );
      expect((await get(`${east!.trafficUrl}/e1`)).servedBy).toBe("local");
      await eventually(
        "west's steal to return with a new agent",
        async () => ((await getFresh(`${west!.trafficUrl}/w2`)).servedBy === "local" ? true : undefined),
        { ...POLL, timeoutMs: 60_000 },
      );
      expect(e.output()).toMatch(
        /cluster west\/\S+ is connected[\s\S]*is unreachable[\s\S]*cluster west\/\S+ is connected/,
      );
    });
    await stopExec(e);
  });

  it("cleans up everything after the TTL when the CLI is killed, and the local command dies with it", async () => {
    // The proxy network: the app reports its pids, which in the transparent network's PID
    // namespace are not this machine's (test/e2e/transparent-exec.test.ts kills that one).
    const e = await exec(["--steal", "--ttl", "10", "--network=proxy"], { LOCAL_APP_CHILD: "1" });
    const name = /session (mc-[0-9a-f]{16})/.exec(e.output())![1]!;
    const pids = JSON.parse((await get(`http://127.0.0.1:${e.localPort}/pids`)).body) as {
      app: number;
      child: number;
    };
    expect(isRunning(pids.app) && isRunning(pids.child)).toBe(true);
    e.proc.kill("SIGKILL");
    await e.exited;
    // Nothing is left to run without its session: CMD and the child it started are stopped
    // (SIGTERM to CMD's process group, SIGKILL after 5 s), and the watchdog says so.
    await showingOutput(e, () =>
      eventually(
        "the local app and its child to be gone",
        () => !isRunning(pids.app) && !isRunning(pids.child),
        {
          timeoutMs: 10_000,
          intervalMs: 100,
        },
      ),
    );
    await showingOutput(e, () =>
      eventually("the CLI's watchdog to say so", () =>
        e
          .output()
          .includes(`the CLI (pid ${e.proc.pid}) ended without stopping ${process.execPath}; stopping it`),
      ),
    );
    const parents = multiClusterSessionClient(stack.primary.kubeConfig());
    await eventually(
      "the parent to be deleted",
      async () => ((await parents.get({ namespace: "default", name })) ? undefined : true),
      { ...POLL, timeoutMs: 120_000 },
    );
    // The children go once their members have cleaned up (a member finalizer holds each).
    for (const w of Object.values(stack.workloads)) {
      const children = clusterSessionClient(w.cluster.kubeConfig());
      await eventually(
        `the child in ${w.name} to be deleted`,
        async () =>
          (await children.get({ namespace: "default", name: `${name}-${w.name}` })) ? undefined : true,
        { ...POLL, timeoutMs: 60_000 },
      );
    }
    // With no session left on the target, each member releases its process agent.
    for (const w of Object.values(stack.workloads)) {
      const dir = join(stack.agentsDir, w.name);
      await eventually(
        `${w.name}'s agent to be released`,
        async () => (readdirSync(dir).some((f) => f.endsWith(".json")) ? undefined : true),
        POLL,
      );
    }
  });
});
