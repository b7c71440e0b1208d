// The `switchyard` CLI against a real API server (test/env) with the Switchyard CRDs, as
// client-certificate users under RBAC: `status` from the SwitchyardOperator; session
// creation picking the kind from supportedFeatures; an RBAC denial naming the missing
// permission; `sessions list` / `kill`; and `exec` end to end — the test plays the control
// plane (marks the session Ready and hands its route to a real router process whose
// upstreams are scripted agents east (Default) and west): CMD gets east's env and the proxy,
// stolen traffic reaches CMD's port and the answer goes back, CMD's exit code is the CLI's,
// the session is deleted on exit; and a session removed mid-run stops CMD with exit 75.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as pb from "../../../proto/gen/session_pb.js";
import {
  OPERATOR_OBJECT_NAME,
  clusterSessionClient,
  multiClusterSessionClient,
  switchyardOperatorClient,
  type SwitchyardOperatorStatus,
} from "../../../proto/api/v1alpha1/index.js";
import type { ScriptedAgent } from "../../peers/scripted-agent.js";
import { KubeSessions } from "../../../cli/src/sdk/kube/kube-sessions.js";
import { readOperator } from "../../../cli/src/sdk/kube/operator-info.js";
import { freePorts, type ClusterSet } from "../../env/index.js";
import type { RouterProcess } from "../router/router-process.js";
import {
  runCli,
  startCli,
  startDeveloperCluster,
  switchyardRule,
  type DeveloperCluster,
} from "./developer-cluster.js";
import { simulatePrimary } from "./simulated-primary.js";
import { launch, tsx } from "../../support/launch.js";

const NS = "shop";
const F = pb.FrameFamily;

let env: DeveloperCluster;
let set: ClusterSet;
let admin: KubeConfig;
let aliceConfig: string;
let bobConfig: string;
let router: RouterProcess;
let east: ScriptedAgent;
let west: ScriptedAgent;
let dir: string;

const baseStatus = (): SwitchyardOperatorStatus => ({
  operatorVersion: "0.1.0",
  protocolVersion: "1.0.0",
  supportedFeatures: ["MultiClusterPrimary", "LayerReconnect"],
  defaultNamespace: NS,
  routerEndpoint: `ws://127.0.0.1:${router.port}`,
  connectedClusters: [
    {
      name: "east",
      connected: { kubernetesVersion: "v1.34.1", operatorVersion: "0.1.0", protocolVersion: "1.0.0" },
      lastCheck: new Date().toISOString(),
      latencyMs: 12,
    },
    { name: "west", error: "dial tcp 10.9.9.9:443: connection refused", lastCheck: new Date().toISOString() },
  ],
});

const cli = (kubeconfig: string, ...args: string[]) => runCli(["--kubeconfig", kubeconfig, ...args]);

async function setOperatorStatus(status: SwitchyardOperatorStatus): Promise<void> {
  const ops = switchyardOperatorClient(admin);
  await ops.patchStatus(
    { name: OPERATOR_OBJECT_NAME },
    { ...status, supportedFeatures: status.supportedFeatures ?? [] },
  );
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-cli-"));
  env = await startDeveloperCluster({
    namespace: NS,
    rules: [switchyardRule(["multiclustersessions", "clustersessions"])],
    // Every user reads the operator: bob, in no group, gets as far as the RBAC check on create.
    operatorReaders: "system:authenticated",
    eastEnv: { DB_HOST: "db.east.internal", PATH: "/remote/bin" },
  });
  ({ set, admin, alice: aliceConfig, router, east, west } = env);
  bobConfig = (await set.get("primary").mintUser("bob", [])).kubeconfigPath;
  await setOperatorStatus(baseStatus());
}, 240_000);

afterAll(async () => {
  await env?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Plays the Primary's control plane for sessions created in NS (simulated-primary.ts); returns a stop function. */
function simulateControlPlane(): () => void {
  return simulatePrimary({ admin, namespace: NS, router, east, west }).stop;
}

describe("switchyard status", () => {
  it("shows mode, router, versions and each cluster's connectivity and latency", async () => {
    const json = await cli(aliceConfig, "status", "-o", "json");
    expect(json.code).toBe(0);
    const r = JSON.parse(json.out) as {
      mode: string;
      routerEndpoint: string;
      clusters: Array<{ name: string; connected: boolean; latencyMs?: number; error?: string }>;
    };
    expect(r.mode).toBe("multi-cluster");
    expect(r.routerEndpoint).toBe(`ws://127.0.0.1:${router.port}`);
    expect(r.clusters).toMatchObject([
      { name: "east", connected: true, latencyMs: 12 },
      { name: "west", connected: false, error: expect.stringContaining("connection refused") },
    ]);
    const table = await cli(aliceConfig, "status");
    expect(table.out).toMatch(/Session mode:\s+multi-cluster/);
    expect(table.out).toMatch(/^east\s+connected\s+v1\.34\.1\s+0\.1\.0\s+1\.0\.0\s+12ms/m);
    expect(table.out).toMatch(/^west\s+unreachable/m);
  });

  it("runs as a program (the bin entry) and exits with the command's code", async () => {
    const child = await launch({
      name: "switchyard-status",
      ...tsx("cli/src/main.ts", ["--kubeconfig", aliceConfig, "status", "-o", "json"]),
    });
    expect(await child.exited).toBe(0);
    expect((JSON.parse(child.stdout()) as { cluster: string }).cluster).toBe("primary");
  });

  it("tells the user Switchyard is not installed when the operator object is missing", async () => {
    const kc = set.get("primary").kubeConfig();
    const ops = switchyardOperatorClient(kc);
    const saved = (await ops.get({ name: OPERATOR_OBJECT_NAME }))!;
    await ops.delete({ name: OPERATOR_OBJECT_NAME });
    try {
      const r = await cli(aliceConfig, "status", "-o", "json");
      expect(r.code).toBe(1);
      expect(JSON.parse(r.out).error.code).toBe("SWITCHYARD_CLI_NOT_INSTALLED");
    } finally {
      await ops.create({ metadata: { name: OPERATOR_OBJECT_NAME }, spec: saved.spec });
      await setOperatorStatus(baseStatus());
    }
  });
});

describe("session creation", () => {
  it("refuses with a message naming verb, resource and namespace when RBAC denies it", async () => {
    const r = await cli(bobConfig, "-n", NS, "exec", "-t", "deployment/myapp", "--", "true");
    expect(r.code).toBe(1);
    expect(r.err).toContain('not allowed to create multiclustersessions.switchyard.dev in namespace "shop"');
    expect(r.err).toContain("[SWITCHYARD_CLI_FORBIDDEN]");
    expect((await multiClusterSessionClient(admin).list({ namespace: NS })).items).toHaveLength(0);
  });

  it("creates a MultiClusterSession with only the secret's hash, or a ClusterSession without MultiClusterPrimary", async () => {
    const kc = set.get("primary").kubeConfig();
    const kube = new KubeSessions(kc);
    const multi = await kube.create({ target: "deployment/myapp", namespace: NS }, await readOperator(kc));
    expect(multi.id).toMatch(/^mc-[0-9a-f]{16}$/);
    const obj = (await multiClusterSessionClient(admin).get({ name: multi.id, namespace: NS }))!;
    expect(obj.spec.clientKeyHash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(obj)).not.toContain(multi.secret);
    await kube.delete(multi);

    await setOperatorStatus({ ...baseStatus(), supportedFeatures: ["LayerReconnect"] });
    try {
      const single = await kube.create({ target: "deployment/myapp", namespace: NS }, await readOperator(kc));
      expect(single.mode).toBe("single-cluster");
      expect(await clusterSessionClient(admin).get({ name: single.id, namespace: NS })).toBeDefined();
      await kube.delete(single);
    } finally {
      await setOperatorStatus(baseStatus());
    }
  });
});

describe("switchyard sessions", () => {
  it("lists sessions as a table and JSON, and kills by id and --all", async () => {
    const kc = set.get("primary").kubeConfig();
    const kube = new KubeSessions(kc);
    const op = await readOperator(kc);
    const a = await kube.create({ target: "deployment/myapp", namespace: NS }, op);
    const b = await kube.create({ target: "deployment/other", namespace: NS }, op);

    const list = await cli(aliceConfig, "-n", NS, "sessions", "list", "-o", "json");
    expect(list.code).toBe(0);
    const ids = (JSON.parse(list.out) as { sessions: Array<{ id: string; target: string }> }).sessions;
    expect(ids.map((s) => s.id).sort()).toEqual([a.id, b.id].sort());
    const table = await cli(aliceConfig, "-n", NS, "sessions", "list");
    expect(table.out).toMatch(/^ID\s+KIND\s+TARGET\s+PHASE\s+CLUSTERS\s+AGE/);
    expect(table.out).toMatch(
      new RegExp(`^${a.id}\\s+MultiClusterSession\\s+deployment/myapp\\s+Creating\\s+0/0`, "m"),
    );

    const kill = await cli(aliceConfig, "-n", NS, "sessions", "kill", a.id);
    expect(kill.code).toBe(0);
    expect(kill.out).toContain(`session ${a.id} deleted`);
    const again = await cli(aliceConfig, "-n", NS, "sessions", "kill", a.id);
    expect(again.code).toBe(1);
    expect(again.out).toContain("not found");

    const all = await cli(aliceConfig, "-n", NS, "sessions", "kill", "--all", "-o", "json");
    expect(JSON.parse(all.out)).toEqual({
      killed: [{ id: b.id, namespace: NS, mode: "multi-cluster", deleted: true }],
    });
    expect((await multiClusterSessionClient(admin).list({ namespace: NS })).items).toHaveLength(0);

    const bad = await cli(aliceConfig, "-n", NS, "sessions", "kill");
    expect(bad.code).toBe(1);
    expect(bad.err).toContain("needs session ids or --all");
  });
});

describe("switchyard env and files", () => {
  it("prints the Default cluster's env through a short-lived session, deleted afterwards", async () => {
    const stop = simulateControlPlane();
    try {
      const r = await cli(aliceConfig, "-n", NS, "env", "-t", "deployment/myapp", "-o", "json");
      expect(r.code).toBe(0);
      expect(JSON.parse(r.out)).toEqual({
        env: { AGENT_NAME: "east", DB_HOST: "db.east.internal", PATH: "/remote/bin" },
      });
      expect(r.err).toMatch(/created multi-cluster session mc-[0-9a-f]{16}/);
      const text = await cli(aliceConfig, "-q", "-n", NS, "env", "-t", "deployment/myapp");
      expect(text.out).toBe("AGENT_NAME=east\nDB_HOST=db.east.internal\nPATH=/remote/bin\n");
      expect(text.err).toBe("");
      expect((await multiClusterSessionClient(admin).list({ namespace: NS })).items).toHaveLength(0);
    } finally {
      stop();
    }
  });

  it("reports the agent's file error with its errno and exits 1", async () => {
    const stop = simulateControlPlane();
    try {
      const r = await cli(
        aliceConfig,
        "-q",
        "-n",
        NS,
        "files",
        "cat",
        "/etc/config/app.yaml",
        "-t",
        "deployment/myapp",
      );
      expect(r.code).toBe(1);
      expect(r.err).toContain("cannot open /etc/config/app.yaml: ENOSYS");
      expect(r.err).toContain("[SWITCHYARD_CLI_REMOTE_ERROR]");
      expect((await multiClusterSessionClient(admin).list({ namespace: NS })).items).toHaveLength(0);
    } finally {
      stop();
    }
  });
});

describe("switchyard exec", () => {
  const cmdScript = `
const http = require("http"), net = require("net"), fs = require("fs");
const [port, outFile] = process.argv.slice(1);
const srv = http.createServer((req, res) => {
  res.end("local answer for " + req.url + " with " + process.env.AGENT_NAME);
  if (req.url === "/exit") {
    fs.writeFileSync(outFile, JSON.stringify({ AGENT_NAME: process.env.AGENT_NAME, DB_HOST: process.env.DB_HOST,
      PATH: process.env.PATH, SESSION: process.env.SWITCHYARD_SESSION, ALL_PROXY: process.env.ALL_PROXY }));
    setTimeout(() => process.exit(7), 20);
  }
});
srv.listen(Number(port), "127.0.0.1", () => {
  // Say "ready" through the SOCKS5 proxy: the agent sees the connect to ready.signal.
  const u = new URL(process.env.ALL_PROXY);
  const s = net.connect(Number(u.port), u.hostname, () => {
    s.write(Buffer.from([5, 1, 0]));
    s.once("data", () => {
      const h = Buffer.from("ready.signal");
      s.write(Buffer.concat([Buffer.from([5, 1, 0, 3, h.length]), h, Buffer.from([0, 1])]));
    });
  });
  s.on("error", () => {});
});
`;

  async function startExec(localPort: number, outFile: string, extra: string[] = []) {
    const { o, exited } = startCli([
      "--kubeconfig",
      aliceConfig,
      "-n",
      NS,
      "exec",
      "-t",
      "deployment/myapp",
      "--steal",
      "--port",
      `8080:${localPort}`,
      // CMD says "ready" through the proxy variables (the transparent network has none).
      "--network=proxy",
      ...extra,
      "--",
      process.execPath,
      "-e",
      cmdScript,
      String(localPort),
      outFile,
    ]);
    const ready = await east.inbox.waitFor(
      (f) =>
        f.family === F.OUTGOING_TCP &&
        f.kind === pb.OutgoingKind.CONNECT &&
        f.as(pb.TcpConnectSchema).host === "ready.signal" &&
        !seenReady.has(f.raw),
      60_000,
      "CMD's ready signal through the proxy",
    );
    seenReady.add(ready.raw);
    const steal = east.inbox.all
      .filter((f) => f.family === F.SUBSCRIPTION && f.kind === pb.SubscriptionKind.STEAL)
      .at(-1)!;
    return { o, exited, subscriptionId: steal.connectionId };
  }
  const seenReady = new Set<Buffer>();

  it("runs CMD with the Default cluster's env and proxy, delivers stolen traffic, returns CMD's exit code and deletes the session", async () => {
    const stop = simulateControlPlane();
    try {
      const outFile = join(dir, "exec-1.json");
      const { o, exited, subscriptionId } = await startExec((await freePorts(1))[0]!, outFile);
      const sessions = (await multiClusterSessionClient(admin).list({ namespace: NS })).items;
      expect(sessions).toHaveLength(1);
      const id = sessions[0]!.metadata.name!;

      // A caller in west reaches CMD through the steal; the answer returns to west.
      const conn = west.emitConnection({ port: 8080, subscriptionId });
      west.emitData(conn, "GET /exit HTTP/1.1\r\nHost: myapp\r\n\r\n");
      const answer = await west.inbox.waitFor(
        (f) =>
          f.family === F.TRAFFIC &&
          f.kind === pb.TrafficKind.DATA &&
          f.connectionId === conn &&
          Buffer.from(f.as(pb.StreamDataSchema).data).toString().includes("local answer"),
        10_000,
        "CMD's answer",
      );
      expect(Buffer.from(answer.as(pb.StreamDataSchema).data).toString()).toContain(
        "local answer for /exit with east",
      );

      expect(await exited).toBe(7);
      const seen = JSON.parse(readFileSync(outFile, "utf8")) as Record<string, string>;
      expect(seen.AGENT_NAME).toBe("east");
      expect(seen.DB_HOST).toBe("db.east.internal");
      expect(seen.PATH).toBe(process.env.PATH);
      expect(seen.SESSION).toBe(id);
      expect(seen.ALL_PROXY).toMatch(/^socks5h:\/\/127\.0\.0\.1:\d+$/);
      expect(o.err).toContain(`created multi-cluster session ${id}`);
      expect(o.err).toMatch(/session mc-[0-9a-f]{16} Ready — east \(default\): ready, west: ready/);
      expect(await multiClusterSessionClient(admin).get({ name: id, namespace: NS })).toBeUndefined();
    } finally {
      stop();
    }
  });

  it("stops CMD and exits 75 with a message when the session is lost", async () => {
    const stop = simulateControlPlane();
    try {
      const outFile = join(dir, "exec-2.json");
      const { o, exited } = await startExec((await freePorts(1))[0]!, outFile);
      const id = (await multiClusterSessionClient(admin).list({ namespace: NS })).items[0]!.metadata.name!;
      // The session disappears (expired, or killed by someone else): routers forget it.
      await multiClusterSessionClient(admin).delete({ name: id, namespace: NS });
      expect(await exited).toBe(75);
      expect(o.err).toMatch(new RegExp(`session ${id} is gone`));
      expect(o.err).toContain("stopping");
      expect(existsSync(outFile)).toBe(false);
    } finally {
      stop();
    }
  });
});
