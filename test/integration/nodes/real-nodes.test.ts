// Real nodes (test/env/nodes) on two clusters, east and west, as separate clusters: each node turns
// Ready; pods from images built here run; a ClusterIP Service reaches its pod through kube-proxy
// and cluster DNS names it; an init container with only NET_ADMIN redirects a port with iptables;
// the API server reaches a Service and a pod through its node (the cluster egress) while the
// host cannot reach the pod; a pod in west reaches east's NodePort through the host; deleting east's pods leaves west's
// alone; and teardown leaves the host exactly as it was. Needs root and the packages of
// test/env/nodes/install-host-packages.sh: without them it fails, saying so (it never skips).
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBinaries } from "../../env/binaries.js";
import { startClusterSet, type ClusterSet, type TestCluster } from "../../env/clusters/cluster-set.js";
import { hostCommand } from "../../env/nodes/host-command.js";
import {
  baselineHostState,
  diffHostState,
  snapshotHostState,
  type HostState,
} from "../../env/nodes/host-state.js";
import type { TestNode } from "../../env/nodes/node.js";
import { startNodes, type NodeSet } from "../../env/nodes/node-set.js";
import { nodeRuntimeImage } from "../../env/images/oci-image.js";
import { redirectImage } from "../../env/images/redirect-image.js";
import { eventually } from "../../support/poll.js";

const NODE_IMAGE = "switchyard.test/node:1";
const IPTABLES_IMAGE = "switchyard.test/iptables:1";
const clusters = ["east", "west"] as const;

let before: HostState;
let set: ClusterSet | undefined;
let nodes: NodeSet | undefined;
let kubectl: string;
const t0 = Date.now();
const figures: string[] = [];

function report(line: string): void {
  figures.push(line);
  process.stderr.write(`[nodes] ${line}\n`);
}

function memory(node: TestNode): string {
  const m = node.memory();
  const mib = (b = 0) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  return `${mib(m?.pssBytes)} PSS (${mib(m?.rssBytes)} anonymous, ${mib(m?.usageBytes)} with page cache)`;
}

/** A node.js one-liner HTTP server answering with the cluster's name. */
const echoServer = (port: number) =>
  `require('http').createServer((q,s)=>s.end(process.env.CLUSTER)).listen(${port})`;

function echoDeployment(cluster: string, port = 8080) {
  return {
    metadata: { name: "echo", namespace: "default" },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: "echo" } },
      template: {
        metadata: { labels: { app: "echo" } },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [
            {
              name: "echo",
              image: NODE_IMAGE,
              imagePullPolicy: "Never",
              args: ["-e", echoServer(port)],
              env: [{ name: "CLUSTER", value: cluster }],
              ports: [{ containerPort: port }],
              readinessProbe: { httpGet: { path: "/", port }, periodSeconds: 1 },
            },
          ],
        },
      },
    },
  };
}

/** A pod that idles, to run probes in with `kubectl exec`. */
const clientPod: V1Pod = {
  metadata: { name: "client", namespace: "default" },
  spec: {
    terminationGracePeriodSeconds: 1,
    containers: [
      {
        name: "client",
        image: NODE_IMAGE,
        imagePullPolicy: "Never",
        args: ["-e", "setInterval(()=>{},1e9)"],
      },
    ],
  },
};

async function waitRunning(kc: KubeConfig, name: string, timeoutMs = 60_000): Promise<V1Pod> {
  const core = kc.makeApiClient(CoreV1Api);
  return eventually(
    `pod ${name} Running and Ready`,
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace: "default" });
      const ready = pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      return pod.status?.phase === "Running" && ready ? pod : undefined;
    },
    { timeoutMs, intervalMs: 100 },
  );
}

async function podOf(kc: KubeConfig, app: string): Promise<V1Pod> {
  const core = kc.makeApiClient(CoreV1Api);
  const pod = await eventually(`a pod of ${app}`, async () => {
    const list = await core.listNamespacedPod({ namespace: "default", labelSelector: `app=${app}` });
    return list.items.find((p) => !p.metadata?.deletionTimestamp);
  });
  return waitRunning(kc, pod.metadata!.name!);
}

/** Runs `node -e script` in the client pod of a cluster (API server → kubelet → containerd exec). */
async function inClient(cluster: TestCluster, script: string): Promise<string> {
  const r = await hostCommand(
    kubectl,
    [
      `--kubeconfig=${cluster.adminKubeconfigPath}`,
      "exec",
      "client",
      "--",
      "/usr/local/bin/node",
      "-e",
      script,
    ],
    { timeoutMs: 30_000 },
  );
  return r.stdout.trim();
}

const fetchText = (url: string, timeoutMs = 5000) =>
  `fetch(${JSON.stringify(url)},{signal:AbortSignal.timeout(${timeoutMs})}).then(r=>r.text()).then(t=>console.log(t)).catch(e=>{console.error(String(e.cause??e));process.exit(1)})`;

beforeAll(async () => {
  before = await baselineHostState();
  kubectl = (await ensureBinaries(["kubectl"])).kubectl;
  set = await startClusterSet({ clusters: [...clusters], nodes: true });
  nodes = await startNodes(set, { images: [await nodeRuntimeImage(), redirectImage(IPTABLES_IMAGE)] });
  // A first run builds kubelet, kube-proxy, kube-scheduler and CoreDNS (about 3 minutes on 2 cores).
}, 600_000);

afterAll(async () => {
  await nodes?.stop().catch(() => {});
  await set?.stop();
  if (figures.length > 0) process.stderr.write(`[nodes] figures:\n  ${figures.join("\n  ")}\n`);
});

describe("real nodes", () => {
  it("gives east and west a Ready node each, registered with its own cluster only", async () => {
    for (const name of clusters) {
      const node = nodes!.get(name);
      const list = await set!.get(name).kubeConfig().makeApiClient(CoreV1Api).listNode();
      expect(list.items.map((n) => n.metadata?.name)).toEqual([node.name]);
      const address = list.items[0]!.status?.addresses?.find((a) => a.type === "InternalIP")?.address;
      expect(address).toBe(node.ip);
      report(
        `${node.name}: Ready ${((node.timings.readyMs - node.timings.kubeletStartedMs) / 1000).toFixed(1)} s after ` +
          `kubelet start, ${(node.timings.readyMs / 1000).toFixed(1)} s after node start-up began ` +
          `(${((Date.now() - t0) / 1000).toFixed(0)} s since the file began); memory ${memory(node)}`,
      );
    }
  });

  it("runs pods from locally imported images and serves them through ClusterIP Services", async () => {
    for (const name of clusters) {
      const kc = set!.get(name).kubeConfig();
      const core = kc.makeApiClient(CoreV1Api);
      const started = Date.now();
      await kc
        .makeApiClient(AppsV1Api)
        .createNamespacedDeployment({ namespace: "default", body: echoDeployment(name) });
      await core.createNamespacedPod({ namespace: "default", body: clientPod });
      await podOf(kc, "echo");
      report(
        `${name}: first pod Running and Ready ${((Date.now() - started) / 1000).toFixed(1)} s after the Deployment was created`,
      );
      await waitRunning(kc, "client");
      await core.createNamespacedService({
        namespace: "default",
        body: {
          metadata: { name: "echo" },
          spec: {
            type: name === "east" ? "NodePort" : "ClusterIP",
            selector: { app: "echo" },
            ports: [{ port: 80, targetPort: 8080 }],
          },
        },
      });
      const svc = await core.readNamespacedService({ name: "echo", namespace: "default" });
      const body = await eventually(`echo Service of ${name} by ClusterIP`, () =>
        inClient(set!.get(name), fetchText(`http://${svc.spec!.clusterIP}/`)),
      );
      expect(body).toBe(name);
    }
  });

  it("resolves Service names with the cluster DNS", async () => {
    for (const name of clusters) {
      const cluster = set!.get(name);
      const svc = await cluster
        .kubeConfig()
        .makeApiClient(CoreV1Api)
        .readNamespacedService({ name: "echo", namespace: "default" });
      const resolved = await inClient(
        cluster,
        "require('dns').promises.resolve4('echo.default.svc.cluster.local').then(a=>console.log(a.join(',')))",
      );
      expect(resolved).toBe(svc.spec!.clusterIP);
      expect(await inClient(cluster, fetchText("http://echo/"))).toBe(name);
      // The API server too, the way in-cluster clients find it.
      const status = await inClient(
        cluster,
        "require('https').get('https://kubernetes.default.svc/healthz',{rejectUnauthorized:false},r=>{console.log(r.statusCode);process.exit(0)}).on('error',e=>{console.error(e);process.exit(1)})",
      );
      expect(["200", "401", "403"]).toContain(status);
    }
  });

  it("lets the API server reach a Service and a pod through its node (cluster egress), never the host", async () => {
    for (const name of clusters) {
      const cluster = set!.get(name);
      const pod = await podOf(cluster.kubeConfig(), "echo");
      // services/proxy and pods/proxy: the API server dials the Service's ClusterIP and the pod's
      // IP through the egress proxy in the node's network namespace.
      const viaApi = async (path: string) => {
        const r = await hostCommand(
          kubectl,
          [`--kubeconfig=${cluster.adminKubeconfigPath}`, "get", "--raw", path],
          {
            timeoutMs: 20_000,
          },
        );
        return r.stdout.trim();
      };
      expect(await viaApi("/api/v1/namespaces/default/services/echo:80/proxy/")).toBe(name);
      expect(await viaApi(`/api/v1/namespaces/default/pods/${pod.metadata!.name}:8080/proxy/`)).toBe(name);
      // The host itself has no route to the pod range: only the API server's certificate tunnels.
      // (A host whose default route leads to some other network may get an answer from there,
      // never the pod's.)
      const direct = await fetch(`http://${pod.status!.podIP}:8080/`, {
        signal: AbortSignal.timeout(2000),
      }).then(
        (r) => r.text(),
        (e: unknown) => String((e as Error).cause ?? e),
      );
      expect(direct).not.toBe(name);
    }
  });

  it("lets an init container with only NET_ADMIN redirect a port with iptables", async () => {
    const kc = set!.get("east").kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "redirected", labels: { app: "redirected" } },
        spec: {
          terminationGracePeriodSeconds: 1,
          initContainers: [
            {
              name: "redirect",
              image: IPTABLES_IMAGE,
              imagePullPolicy: "Never",
              command: ["iptables"],
              args: [
                "-t",
                "nat",
                "-A",
                "PREROUTING",
                "-p",
                "tcp",
                "--dport",
                "80",
                "-j",
                "REDIRECT",
                "--to-ports",
                "8080",
              ],
              securityContext: { capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] } },
            },
          ],
          containers: [
            {
              name: "app",
              image: NODE_IMAGE,
              imagePullPolicy: "Never",
              args: ["-e", echoServer(8080)],
              env: [{ name: "CLUSTER", value: "redirected" }],
            },
          ],
        },
      },
    });
    const pod = await waitRunning(kc, "redirected");
    expect(await inClient(set!.get("east"), fetchText(`http://${pod.status!.podIP}:80/`))).toBe("redirected");
  });

  it("lets a pod in west reach east's NodePort through the host", async () => {
    const east = nodes!.get("east");
    const svc = await set!
      .get("east")
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .readNamespacedService({ name: "echo", namespace: "default" });
    const nodePort = svc.spec!.ports![0]!.nodePort!;
    expect(await inClient(set!.get("west"), fetchText(`http://${east.ip}:${nodePort}/`))).toBe("east");
    // West's pod range is not routed anywhere: east reaches west only through west's node address.
    const westPod = await podOf(set!.get("west").kubeConfig(), "echo");
    const direct = await hostCommand(
      kubectl,
      [
        `--kubeconfig=${set!.get("east").adminKubeconfigPath}`,
        "exec",
        "client",
        "--",
        "/usr/local/bin/node",
        "-e",
        fetchText(`http://${westPod.status!.podIP}:8080/`, 1500),
      ],
      { timeoutMs: 30_000, allowFailure: true },
    );
    expect(direct.status).not.toBe(0);
  });

  it("leaves west's pods alone when every pod of east is deleted", async () => {
    const westCore = set!.get("west").kubeConfig().makeApiClient(CoreV1Api);
    const westBefore = (await westCore.listNamespacedPod({ namespace: "default" })).items
      .map((p) => p.metadata!.uid)
      .sort();
    const eastKc = set!.get("east").kubeConfig();
    const eastCore = eastKc.makeApiClient(CoreV1Api);
    await eastKc.makeApiClient(AppsV1Api).deleteCollectionNamespacedDeployment({ namespace: "default" });
    await eastCore.deleteCollectionNamespacedPod({ namespace: "default", gracePeriodSeconds: 1 });
    await eventually(
      "east's pods gone",
      async () => (await eastCore.listNamespacedPod({ namespace: "default" })).items.length === 0,
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    const westAfter = await westCore.listNamespacedPod({ namespace: "default" });
    expect(westAfter.items.map((p) => p.metadata!.uid).sort()).toEqual(westBefore);
    expect(westAfter.items.every((p) => p.status?.phase === "Running")).toBe(true);
    expect(await inClient(set!.get("west"), fetchText("http://echo/"))).toBe("west");
  });

  it("tears down and leaves the host exactly as it was", async () => {
    const during = diffHostState(before, await snapshotHostState());
    // The snapshot sees the nodes (else an empty diff after teardown would prove nothing).
    expect(during.some((l) => l.startsWith("+ links:"))).toBe(true);
    expect(during.some((l) => l.startsWith("+ cgroups:"))).toBe(true);
    const west = nodes!.get("west");
    const cpu0 = west.cpuUsageNs() ?? 0;
    await new Promise((r) => setTimeout(r, 5000));
    const cpu = ((west.cpuUsageNs() ?? 0) - cpu0) / 5e9;
    report(
      `${west.name} with two pods: ${memory(west)}; CPU ${(cpu * 100).toFixed(1)} % of one core over 5 s`,
    );
    const teardownMs = await nodes!.stop();
    const started = Date.now();
    await set!.stop();
    report(
      `teardown: nodes ${(teardownMs / 1000).toFixed(1)} s, then clusters ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    expect(diffHostState(before, await snapshotHostState())).toEqual([]);
  });
});
