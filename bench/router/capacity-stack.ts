// What the capacity bench runs against, on loopback: three scripted agents (test/peers, in one
// process of their own), the load generator
// (capacity-load.ts), and one or two real router processes whose routes are pushed by a real
// RouteDiscovery server in this process (gRPC over mTLS, fed by a RouteSnapshotCache as the
// control plane feeds it; every router gets the whole table, as from the control plane).
// Session i has the three agents as upstreams, its Default being agent i mod 3, and is served
// by router i mod (number of routers). Routers are replaced between ladders (each ladder starts
// on fresh processes), optionally pinned to CPUs (taskset) and given a CPU quota (cgroup).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { setPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  RouteDiscoveryServer,
  RouteDiscoveryStreamServer,
  RouteSnapshotCache,
  RouterAuthenticator,
} from "../../control-plane/src/route-discovery/index.js";
import { SessionRouteSchema, SessionState, type SessionRoute } from "../../proto/gen/route_discovery_pb.js";
import { hashSecret } from "../../proto/session-auth.js";
import { createCertificateAuthority } from "../../test/env/pki.js";
import { launch, tsx } from "../../test/support/launch.js";
import { eventually } from "../../test/support/poll.js";
import { CpuQuota } from "./cpu-quota.js";
import { spawnTs, stopProc, type Proc } from "./router-bench.js";

const AGENT_SECRET = "capacity-agent";
export const CLIENT_SECRET = "capacity-client";
export const AGENTS = ["c1", "c2", "c3"];

export interface RouterPlacement {
  /** taskset CPU list for the routers (undefined: not pinned). */
  cpus?: string;
  /** CPUs each router may use (cgroup quota; undefined: none). */
  quota?: number;
  /** Write a V8 CPU profile of each router into this directory (on stop). */
  profileDir?: string;
}

export interface CapacityStack {
  /** The load generator's control endpoint (http://…). */
  loadUrl: string;
  loadPid: number;
  agentPids: number[];
  /** Running routers (after startRouters). */
  routers: Proc[];
  /** Replaces the routers by `count` fresh ones placed as told; resolves once they hold the table. */
  startRouters(count: number, placement: RouterPlacement): Promise<void>;
  stopRouters(): Promise<void>;
  /** Publishes sessions 0…n-1 and waits until every router acknowledged that table. */
  publish(n: number): Promise<void>;
  /** Session i as the load generator opens it. */
  session(i: number): { url: string; clusters: string[] };
  stop(): Promise<void>;
}

const covers = (acked: string, v: string) => {
  const [ae, as] = acked.split(".");
  const [ve, vs] = v.split(".");
  return ae === ve && Number(as) >= Number(vs);
};

/** Niceness of the bench's processes: work started on the machine meanwhile disturbs them less. */
export const BENCH_NICE = -10;

/** taskset every thread of `pid` onto `cpus` (when given) and raise their priority (root only). */
export function place(pid: number, cpus: string | undefined): void {
  if (cpus) execFileSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: "ignore" });
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return;
  }
  for (const tid of tids) {
    try {
      // Linux niceness is per thread; threads started later inherit it.
      setPriority(Number(tid), BENCH_NICE);
    } catch {
      return; // not permitted (not root): run at the default priority
    }
  }
}

export async function startCapacityStack(opts: {
  rate: number;
  request: "echo" | "ping";
}): Promise<CapacityStack> {
  const procs: Proc[] = [];
  let routers: Proc[] = [];
  let quotas: CpuQuota[] = [];
  const closers: Array<() => Promise<void>> = [];
  const dir = mkdtempSync(join(tmpdir(), "switchyard-capacity-"));
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  // Also on an exit that skips the ordered stop (an error thrown past it, a second Ctrl-C).
  process.once("exit", removeDir);
  closers.push(async () => removeDir());
  const stopRouters = async () => {
    await Promise.all(routers.map((r) => stopProc(r)));
    routers = [];
    for (const q of quotas) await q.remove();
    quotas = [];
  };
  const stop = async () => {
    await stopRouters();
    for (const p of procs.reverse()) await stopProc(p);
    for (const c of closers.reverse()) await c();
  };
  try {
    const ports: Record<string, number> = {};
    // The three agents share one process: on a small machine every extra process on the load
    // side's CPU adds scheduling delay to the round trips measured.
    const agents = await spawnTs(
      "test/peers/scripted-agents-main.ts",
      ["--agents", AGENTS.join(","), "--secret", AGENT_SECRET],
      (l) => "agents" in l,
    );
    procs.push(agents);
    Object.assign(ports, agents.ready.agents as Record<string, number>);
    const load = await spawnTs(
      "bench/router/capacity-load.ts",
      ["--secret", CLIENT_SECRET, "--rate", String(opts.rate), "--request", opts.request],
      (l) => "port" in l,
    );
    procs.push(load);

    const ca = await createCertificateAuthority("capacity-bench");
    const serverCert = await ca.issue({
      commonName: "control-plane",
      usage: "server",
      ipAddresses: ["127.0.0.1"],
    });
    const routerCert = await ca.issue({ commonName: "capacity-router", usage: "client" });
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text, { mode: 0o600 });
      return join(dir, name);
    };
    const caFile = file("ca.pem", ca.certPem);
    const certFile = file("router.pem", routerCert.certPem);
    const keyFile = file("router-key.pem", routerCert.keyPem);
    const cache = new RouteSnapshotCache();
    const streams = new RouteDiscoveryStreamServer({
      cache,
      authenticator: new RouterAuthenticator({ clientCertificate: {} }),
    });
    const discovery = new RouteDiscoveryServer({
      streams,
      host: "127.0.0.1",
      tls: { certPem: serverCert.certPem, keyPem: serverCert.keyPem, clientCaPem: ca.certPem },
    });
    const { url: discoveryUrl } = await discovery.listen();
    closers.push(() => discovery.close());
    cache.replaceAll([]);

    const keyHash = hashSecret(CLIENT_SECRET);
    const id = (i: number) => `cap-${i}`;
    const route = (i: number): SessionRoute =>
      create(SessionRouteSchema, {
        sessionId: id(i),
        clientKeyHash: keyHash,
        state: SessionState.READY,
        upstreams: AGENTS.map((n, k) => ({
          cluster: n,
          url: `ws://127.0.0.1:${ports[n]}/v1/sessions/${id(i)}`,
          secret: AGENT_SECRET,
          isDefault: k === i % AGENTS.length,
        })),
      });
    let published = 0;
    const waitAcked = async (v: string) => {
      const want = routers.map((_, k) => `capacity-router-${k}`);
      await eventually(
        `routers ${want.join(", ")} to acknowledge routing table ${v}`,
        () => {
          const rs = streams.connectedRouters();
          return want.every((w) => rs.some((r) => r.routerId === w && covers(r.ackedVersion, v)));
        },
        { timeoutMs: 30_000, intervalMs: 5 },
      );
    };

    const startRouter = async (k: number, placement: RouterPlacement) => {
      const nodeArgs = placement.profileDir ? ["--cpu-prof", "--cpu-prof-dir", placement.profileDir] : [];
      const cmd = tsx(
        "data-plane/router/src/main.ts",
        [
          "--listen",
          "127.0.0.1:0",
          "--admin-listen",
          "127.0.0.1:0",
          "--control-plane",
          discoveryUrl,
          "--control-plane-ca",
          caFile,
          "--client-cert",
          certFile,
          "--client-key",
          keyFile,
          "--router-id",
          `capacity-router-${k}`,
          "--log-level",
          "info", // as the chart runs it; "router listening" says it is ready
        ],
        nodeArgs,
      );
      const p = await launch({
        name: `router-${k}`,
        ...cmd,
        ready: (x) => x.logs.find((l) => l.msg === "router listening"),
        readyTimeoutMs: 60_000,
        echoStderr: true,
        // Four info lines per session at start-up; keep only the last ones in memory.
        maxLogLines: 200,
        onStart: (x) => routers.push(x),
      });
      place(p.pid, placement.cpus);
      if (placement.quota !== undefined) {
        const q = new CpuQuota(`router-${k}`, placement.quota);
        quotas.push(q);
        q.add(p.pid);
      }
    };

    return {
      loadUrl: `http://127.0.0.1:${load.ready.port as number}`,
      loadPid: load.pid,
      agentPids: [agents.pid],
      get routers() {
        return routers;
      },
      async startRouters(count, placement) {
        await stopRouters();
        for (let k = 0; k < count; k++) await startRouter(k, placement);
        await waitAcked(cache.version());
      },
      stopRouters,
      async publish(n) {
        if (n !== published) {
          published = n;
          cache.replaceAll(Array.from({ length: n }, (_, i) => route(i)));
        }
        await waitAcked(cache.version());
      },
      session(i) {
        const r = routers[i % routers.length];
        if (!r) throw new Error("no router is running: startRouters first");
        return { url: `ws://127.0.0.1:${r.ready.port as number}/v1/sessions/${id(i)}`, clusters: AGENTS };
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
