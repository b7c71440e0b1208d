// What the control plane says about itself in the SwitchyardOperator `operator`, checked
// against a real API server with the control plane as a user runs it (control-plane/src/main.ts,
// mode both): `MultiClusterPrimary` is advertised exactly while the configuration in force
// enables multi-cluster sessions (live reload, no restart), and `status.sessions` counts the
// live sessions it serves — not Failed, not being deleted — as they come and go. The
// Deployment `demo` has no pods (no controller manager), so its sessions stay Pending.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import {
  clusterSessionClient,
  multiClusterSessionClient,
  switchyardOperatorClient,
  type SwitchyardOperatorStatus,
} from "../../../proto/api/v1alpha1/index.js";
import { freePorts, startClusterSet, type ClusterSet } from "../../env/index.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";
import { eventually, type PollOptions } from "../../support/poll.js";
import { NS, putConfigMap } from "./remote-fixtures.js";

const POLL: PollOptions = { timeoutMs: 30_000, intervalMs: 200 };
const HASH = "a".repeat(64);
const PARENT = "mc-0123456789abcdef";

let set: ClusterSet;
let dir: string;
let cp: LaunchedProcess<LogLine>;

const kc = () => set.get("primary").kubeConfig();
const operatorStatus = async (): Promise<SwitchyardOperatorStatus | undefined> =>
  (await switchyardOperatorClient(kc()).get({ name: "operator" }))?.status;

const multiCluster = (enabled: boolean) =>
  stringify({ enabled, clusterName: "primary", defaultCluster: "primary", clusters: {} });

async function sessionsBecome(multiClusterSessions: number, clusterSessions: number): Promise<void> {
  const want = { multiClusterSessions, clusterSessions };
  let seen: unknown;
  await eventually(
    `status.sessions ${JSON.stringify(want)}`,
    async () => {
      const got = (await operatorStatus())?.sessions;
      seen = got;
      return got?.multiClusterSessions === multiClusterSessions && got.clusterSessions === clusterSessions;
    },
    POLL,
  ).catch(async (err: Error) => {
    // Say what was there instead: the counts and every session with its phase.
    const list = async (
      c: ReturnType<typeof clusterSessionClient> | ReturnType<typeof multiClusterSessionClient>,
    ) =>
      (await c.list({ namespace: "default" })).items.map(
        (s) =>
          `${s.metadata.name}:${s.status?.phase ?? "-"}${s.metadata.deletionTimestamp ? ":deleting" : ""}`,
      );
    const sessions = [
      ...(await list(multiClusterSessionClient(kc()))),
      ...(await list(clusterSessionClient(kc()))),
    ];
    throw new Error(
      `${err.message}; status.sessions is ${JSON.stringify(seen)}; sessions: ${sessions.join(", ")}`,
    );
  });
}

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary"], controllerManager: false });
  dir = mkdtempSync(join(tmpdir(), "switchyard-operator-status-"));
  const primary = set.get("primary");
  await installCrds(kc());
  await kc()
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: NS } } });
  await kc()
    .makeApiClient(AppsV1Api)
    .createNamespacedDeployment({
      namespace: "default",
      body: {
        metadata: { name: "demo" },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: "demo" } },
          template: {
            metadata: { labels: { app: "demo" } },
            spec: { containers: [{ name: "demo", image: "example.invalid/demo:1" }] },
          },
        },
      },
    });
  const [routerPort] = await freePorts(1);
  cp = await launch({
    name: "control-plane",
    ...tsx("control-plane/src/main.ts", [
      "--mode=both",
      "--cluster-name=primary",
      `--kubeconfig=${primary.adminKubeconfigPath}`,
      `--namespace=${NS}`,
      "--identity=cp-0",
      "--grpc-listen=127.0.0.1:0",
      "--metrics-listen=127.0.0.1:0",
      "--grpc-plaintext",
      `--router-service-account=${NS}/switchyard-router`,
      `--router-endpoint=ws://127.0.0.1:${routerPort}`,
      "--agent-provisioner=process",
      `--agent-kubeconfig=${primary.adminKubeconfigPath}`,
      `--agent-state-dir=${join(dir, "agents")}`,
      "--health-check-interval-seconds=1",
      "--leader-lease-duration-seconds=3",
      "--leader-renew-deadline-seconds=2",
      "--leader-retry-period-seconds=0.5",
    ]),
    ready: (p) => p.logs.find((l) => l.msg === "control plane started"),
    readyTimeoutMs: 60_000,
    readyIntervalMs: 200,
  });
}, 240_000);

afterAll(async () => {
  await cp?.stop();
  await set?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("SwitchyardOperator status", () => {
  it("advertises MultiClusterPrimary only while multi-cluster sessions are enabled", async () => {
    // No ConfigMap: multi-cluster is off, and the CLI must open single-cluster sessions.
    const first = await eventually(
      "supportedFeatures",
      async () => (await operatorStatus())?.supportedFeatures,
      POLL,
    );
    expect([...first].sort()).toEqual(["LayerReconnect", "MultiClusterMember"]);

    await putConfigMap(kc(), "switchyard-clusters", multiCluster(true));
    await eventually(
      "MultiClusterPrimary advertised",
      async () => (await operatorStatus())?.supportedFeatures?.includes("MultiClusterPrimary"),
      POLL,
    );
    await putConfigMap(kc(), "switchyard-clusters", multiCluster(false));
    await eventually(
      "MultiClusterPrimary withdrawn",
      async () => {
        const f = (await operatorStatus())?.supportedFeatures;
        return f !== undefined && !f.includes("MultiClusterPrimary") && f.includes("MultiClusterMember");
      },
      POLL,
    );
  });

  it("counts the live sessions it serves in status.sessions", async () => {
    await putConfigMap(kc(), "switchyard-clusters", multiCluster(true));
    await sessionsBecome(0, 0);
    const children = clusterSessionClient(kc());
    const parents = multiClusterSessionClient(kc());
    type NewChild = Parameters<typeof children.create>[0];

    // A single-cluster session waiting for a pod is live.
    await children.create({
      metadata: { name: "solo", namespace: "default" },
      spec: { target: "deployment/demo", clientKeyHash: HASH, ttlSeconds: 600 },
    } as NewChild);
    await sessionsBecome(0, 1);
    expect((await children.get({ namespace: "default", name: "solo" }))?.status?.phase).toBe("Pending");

    // A multi-cluster session counts on the Primary, its child here on the member side.
    await parents.create({
      metadata: { name: PARENT, namespace: "default" },
      spec: { target: "deployment/demo", clientKeyHash: HASH, ttlSeconds: 600 },
    } as Parameters<typeof parents.create>[0]);
    await sessionsBecome(1, 2);

    // A Failed session is not live.
    await children.create({
      metadata: { name: "ghost", namespace: "default" },
      spec: { target: "deployment/nowhere", clientKeyHash: HASH, ttlSeconds: 600 },
    } as NewChild);
    await eventually(
      "ghost Failed",
      async () => (await children.get({ namespace: "default", name: "ghost" }))?.status?.phase === "Failed",
      POLL,
    );
    await new Promise((r) => setTimeout(r, 2_500)); // more than one publishing round
    expect((await operatorStatus())?.sessions).toEqual({ multiClusterSessions: 1, clusterSessions: 2 });

    // Deleted sessions leave the counts.
    await children.delete({ namespace: "default", name: "solo" });
    await sessionsBecome(1, 1);
    await parents.delete({ namespace: "default", name: PARENT });
    await sessionsBecome(0, 0);
    await children.delete({ namespace: "default", name: "ghost" });
  });
});
