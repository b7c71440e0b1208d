// The control-plane process as a user runs it (control-plane/src/main.ts), in member mode
// against a real API server: it reconciles a single-cluster ClusterSession, starts a
// process agent, and pushes the session's table over RouteDiscovery to a real router
// process, through which a client reaches the agent. Bad flags exit 2 with the flag named.
import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clusterSessionClient, switchyardOperatorClient } from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { AgentClient } from "../../peers/agent-client.js";
import { freePorts, runPods, startClusterSet, type ClusterSet } from "../../env/index.js";
import { RouterProcess } from "../router/router-process.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";
import { eventually, type PollOptions } from "../../support/poll.js";

const NS = "switchyard";
const AUDIENCE = "switchyard-route-discovery";

let set: ClusterSet;
let dir: string;
let app: Server;
let cp: LaunchedProcess<LogLine>;
let router: RouterProcess;
let grpcUrl = "";
let metricsPort = 0;
let routerPort = 0;
const POLL: PollOptions = { timeoutMs: 60_000, intervalMs: 200 };

/** The control plane as a user runs it; ready once it logs "control plane started". */
function startControlPlane(args: string[]): Promise<LaunchedProcess<LogLine>> {
  return launch({
    name: "control-plane",
    ...tsx("control-plane/src/main.ts", args),
    ready: (p) => p.logs.find((l) => l.msg === "control plane started"),
    readyTimeoutMs: 60_000,
    readyIntervalMs: 200,
  });
}

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"] });
  dir = mkdtempSync(join(tmpdir(), "switchyard-cp-process-"));
  const east = set.get("east");
  const kc = east.kubeConfig();
  await installCrds(kc);
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await core.createNamespacedServiceAccount({
    namespace: NS,
    body: { metadata: { name: "switchyard-router" } },
  });
  const token = await core.createNamespacedServiceAccountToken({
    name: "switchyard-router",
    namespace: NS,
    body: { spec: { audiences: [AUDIENCE], expirationSeconds: 3600 } },
  });
  writeFileSync(join(dir, "router-token"), token.status!.token);

  app = createServer((_req, res) => res.end("in-cluster app\n"));
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", () => r()));
  const appPort = (app.address() as { port: number }).port;
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: "default",
    body: {
      metadata: { name: "demo" },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: "demo" } },
        template: {
          metadata: { labels: { app: "demo" } },
          spec: {
            containers: [
              {
                name: "demo",
                image: "example.invalid/demo:1",
                env: [{ name: "GREETING", value: "hello from east" }],
                ports: [{ containerPort: appPort }],
              },
            ],
          },
        },
      },
    },
  });
  await runPods(kc, "default", "app=demo", 1);

  routerPort = (await freePorts(1))[0]!;
  cp = await startControlPlane([
    "--mode=member",
    "--cluster-name=east",
    `--kubeconfig=${east.adminKubeconfigPath}`,
    `--namespace=${NS}`,
    "--identity=cp-0",
    "--grpc-listen=127.0.0.1:0",
    "--metrics-listen=127.0.0.1:0",
    "--grpc-plaintext",
    `--router-service-account=${NS}/switchyard-router`,
    `--router-token-audience=${AUDIENCE}`,
    `--router-endpoint=ws://127.0.0.1:${routerPort}`,
    "--agent-provisioner=process",
    `--agent-kubeconfig=${east.adminKubeconfigPath}`,
    `--agent-state-dir=${join(dir, "agents")}`,
    "--leader-lease-duration-seconds=3",
    "--leader-renew-deadline-seconds=2",
    "--leader-retry-period-seconds=0.5",
  ]);
  const started = cp.ready;
  grpcUrl = started.grpc as string;
  metricsPort = started.metricsPort as number;
  router = await RouterProcess.start(null, [
    `--listen=127.0.0.1:${routerPort}`,
    `--control-plane=${grpcUrl}`,
    "--control-plane-plaintext",
    `--token-file=${join(dir, "router-token")}`,
  ]);
});

afterAll(async () => {
  await router?.stop();
  await cp?.stop();
  app?.close();
  await set?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("control-plane process (member mode)", () => {
  it("serves health and metrics", async () => {
    const health = await fetch(`http://127.0.0.1:${metricsPort}/healthz`);
    expect(health.status).toBe(200);
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toContain("switchyard_route_discovery");
    expect(metrics).toContain("switchyard_reconcile_duration_seconds");
  });

  it("advertises itself in SwitchyardOperator status", async () => {
    const op = await eventually(
      "operator status",
      async () => {
        const o = await switchyardOperatorClient(set.get("east").kubeConfig()).get({ name: "operator" });
        return o?.status?.supportedFeatures ? o : undefined;
      },
      POLL,
    );
    expect(op.spec.clusterName).toBe("east");
    expect(op.status?.supportedFeatures).toContain("MultiClusterMember");
    expect(op.status?.supportedFeatures).not.toContain("MultiClusterPrimary");
    expect(op.status?.routerEndpoint).toBe(`ws://127.0.0.1:${routerPort}`);
    expect(op.status?.operatorVersion).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("serves a single-cluster session end to end: CR → agent → table → router → client", async () => {
    const kc = set.get("east").kubeConfig();
    const secret = randomBytes(24).toString("base64url");
    const sessions = clusterSessionClient(kc);
    await sessions.create({
      metadata: { name: "solo-demo", namespace: "default" },
      spec: {
        target: "deployment/demo",
        clientKeyHash: createHash("sha256").update(secret).digest("hex"),
        ttlSeconds: 60,
      },
    } as Parameters<typeof sessions.create>[0]);
    const ready = await eventually(
      "the session to become Ready",
      async () => {
        const s = await sessions.get({ namespace: "default", name: "solo-demo" });
        return s?.status?.phase === "Ready" ? s : undefined;
      },
      POLL,
    );
    // Routed by namespace and name (the session key), never by the name alone.
    expect(ready.status?.gateway).toBe(`ws://127.0.0.1:${routerPort}/v1/sessions/default:solo-demo`);
    expect(await (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).text()).toContain("ready");

    // The router received the table over RouteDiscovery; a client with the secret gets through.
    const client = await eventually(
      "the router to accept the session",
      async () => {
        try {
          return await AgentClient.connect(ready.status!.gateway!, secret);
        } catch {
          return undefined;
        }
      },
      POLL,
    );
    const env = await client.env({ names: ["GREETING"] });
    expect(JSON.stringify(env)).toContain("hello from east");
    client.session.close();
    // A wrong secret is answered as an unknown session is: nothing tells the session exists.
    await expect(AgentClient.connect(ready.status!.gateway!, "wrong-secret")).rejects.toThrow(/404/);

    // Deleting the session removes its table from the router.
    await sessions.delete({ namespace: "default", name: "solo-demo" });
    await eventually(
      "the route to leave the router",
      async () => {
        try {
          const c = await AgentClient.connect(ready.status!.gateway!, secret);
          c.session.close();
          return undefined;
        } catch (err) {
          return /404/.test((err as Error).message) ? true : undefined;
        }
      },
      POLL,
    );
  });

  it("exits 2 and names the flag when a flag is wrong", async () => {
    const bad = await launch({
      name: "control-plane-bad-flags",
      ...tsx("control-plane/src/main.ts", ["--mode=member", "--namespace=switchyard", "--grpc-plaintext"]),
    });
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toMatch(/--router-service-account: name at least one router ServiceAccount/);
  });
});
