// RouteDiscovery spoken by a gRPC client nobody here wrote: k6's `k6/net/grpc` (grpc-go
// underneath) loads proto/route_discovery.proto on its own, dials the control-plane process
// over TLS, authenticates like a router — a ServiceAccount token minted by TokenRequest,
// reviewed by the real API server — ACKs every push, and must receive a routing table
// holding the ClusterSession this test created. The script's checks carry a `rate==1`
// threshold, so k6 exits non-zero when the table never arrives (shown with a bad token).
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { clusterSessionClient } from "../../../proto/api/v1alpha1/index.js";
import { ROUTE_DISCOVERY_PROTO } from "../../../proto/route-discovery-service.js";
import { sessionKey } from "../../../proto/session-endpoint.js";
import {
  createCertificateAuthority,
  ensureBinaries,
  startClusterSet,
  type ClusterSet,
} from "../../env/index.js";
import { launch, repoRoot, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";
import { eventually } from "../../support/poll.js";

const NS = "switchyard";
const ROUTER_SA = "switchyard-router";
const AUDIENCE = "switchyard-route-discovery";
const SESSION = "k6-solo";
const KEY_HASH = createHash("sha256").update("k6 client secret").digest("hex");
const SCRIPT = join(repoRoot, "test/integration/route-discovery/route-discovery-client.k6.js");

let set: ClusterSet;
let dir: string;
let k6: string;
let cp: LaunchedProcess<LogLine>;
let address = "";
let metricsPort = 0;
let token = "";

beforeAll(async () => {
  k6 = (await ensureBinaries(["k6"])).k6;
  set = await startClusterSet({ clusters: ["east"], controllerManager: false });
  dir = mkdtempSync(join(tmpdir(), "switchyard-k6-grpc-"));
  const east = set.get("east");
  const kc = east.kubeConfig();
  await installCrds(kc);
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: ROUTER_SA } } });
  // What a router pod's projected token is: TokenRequest, bound to the audience.
  const minted = await core.createNamespacedServiceAccountToken({
    name: ROUTER_SA,
    namespace: NS,
    body: { spec: { audiences: [AUDIENCE], expirationSeconds: 3600 } },
  });
  token = minted.status!.token;
  // The target: a Deployment only (the sidecar provisioner publishes the session as
  // CREATING until a pod with the sidecar is ready, which never happens here).
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: "default",
    body: {
      metadata: { name: "demo" },
      spec: {
        selector: { matchLabels: { app: "demo" } },
        template: {
          metadata: { labels: { app: "demo" } },
          spec: { containers: [{ name: "demo", image: "example.invalid/demo:1" }] },
        },
      },
    },
  });

  const ca = await createCertificateAuthority("switchyard-k6-grpc");
  const serving = await ca.issue({
    commonName: "control-plane",
    usage: "server",
    ipAddresses: ["127.0.0.1"],
  });
  for (const [name, pem] of Object.entries({
    "ca.crt": ca.certPem,
    "tls.crt": serving.certPem,
    "tls.key": serving.keyPem,
  }))
    writeFileSync(join(dir, name), pem);

  cp = await launch({
    name: "control-plane",
    ...tsx("control-plane/src/main.ts", [
      "--mode=member",
      "--cluster-name=east",
      `--kubeconfig=${east.adminKubeconfigPath}`,
      `--namespace=${NS}`,
      "--identity=cp-0",
      "--grpc-listen=127.0.0.1:0",
      "--metrics-listen=127.0.0.1:0",
      `--tls-cert=${join(dir, "tls.crt")}`,
      `--tls-key=${join(dir, "tls.key")}`,
      `--router-service-account=${NS}/${ROUTER_SA}`,
      `--router-token-audience=${AUDIENCE}`,
      "--router-endpoint=wss://routers.east.invalid:8443",
      "--agent-provisioner=sidecar",
      "--agent-image=example.invalid/switchyard-agent:1",
      "--leader-lease-duration-seconds=3",
      "--leader-renew-deadline-seconds=2",
      "--leader-retry-period-seconds=0.5",
    ]),
    ready: (p) => p.logs.find((l) => l.msg === "control plane started"),
    readyTimeoutMs: 60_000,
    readyIntervalMs: 200,
  });
  address = new URL(cp.ready.grpc as string).host;
  metricsPort = cp.ready.metricsPort as number;

  const sessions = clusterSessionClient(kc);
  await sessions.create({
    metadata: { name: SESSION, namespace: "default" },
    spec: { target: "deployment/demo", clientKeyHash: KEY_HASH, ttlSeconds: 600 },
  } as Parameters<typeof sessions.create>[0]);
  // The reconciler publishes the route, then writes the status.
  await eventually(
    "the session to be reconciled",
    async () => (await sessions.get({ namespace: "default", name: SESSION }))?.status?.phase,
    { timeoutMs: 60_000, intervalMs: 200 },
  );
});

afterAll(async () => {
  await cp?.stop();
  await set?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Runs the k6 script to its end; resolves with its exit code and output. */
async function runK6(bearer: string): Promise<{ code: number | string; output: string }> {
  const p = await launch({
    name: "k6",
    command: k6,
    args: [
      "run",
      "--no-usage-report",
      "-e",
      `ADDRESS=${address}`,
      "-e",
      `TOKEN=${bearer}`,
      "-e",
      `CA_FILE=${join(dir, "ca.crt")}`,
      "-e",
      `PROTO_DIR=${dirname(ROUTE_DISCOVERY_PROTO)}`,
      "-e",
      `SESSION=${sessionKey("default", SESSION)}`,
      "-e",
      `KEY_HASH=${KEY_HASH}`,
      "-e",
      "TIMEOUT_MS=20000",
      SCRIPT,
    ],
  });
  const code = await p.exited;
  return { code, output: p.output() };
}

async function metric(name: string): Promise<string[]> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return text.split("\n").filter((l) => l.startsWith(name));
}

describe("RouteDiscovery with k6's gRPC client", () => {
  it("streams the table holding the test's session to k6, authenticated by a ServiceAccount token", async () => {
    const { code, output } = await runK6(token);
    expect(code, output).toBe(0);
    expect(output).toContain("the table holds the session");
    // The control plane saw a router of the allowed ServiceAccount, and its ACKs.
    const connected = await cp.waitForLog((l) => l.msg === "router connected" && l.routerId === "k6-router");
    expect(connected.identity).toBe(`system:serviceaccount:${NS}:${ROUTER_SA}`);
    expect(await metric("switchyard_route_discovery_acks_total")).not.toContain(
      "switchyard_route_discovery_acks_total 0",
    );
    expect(cp.logs.filter((l) => l.msg === "router stream ended by protocol violation")).toEqual([]);
  });

  it("fails the k6 run when no table arrives (a token the API server rejects)", async () => {
    const { code, output } = await runK6("not-a-token");
    // 99: thresholds failed — the checks, not a crash of the script.
    expect(code, output).toBe(99);
    expect(output).toContain("stream failed");
  });
});
