// The images built from this project (test/env/images) run on a real node: the product image
// starts the control plane (its default CMD), the router and the agent as the chart and the
// sidecar template start them (`command: ["node"]`, the main module first in `args`); the
// sidecar template's redirect init container runs from the iptables image and sends traffic
// for the demo app's port to the agent's port; the demo app image serves its page. Needs root
// and the packages of test/env/nodes/install-host-packages.sh (it fails without them, never skips).
import {
  CoreV1Api,
  type KubeConfig,
  type V1Container,
  type V1Pod,
  type V1Volume,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { injectSidecar, REDIRECT_CONTAINER } from "../../../control-plane/src/member/sidecar-pod-template.js";
import { COMPONENT_MAIN, PRODUCT_IMAGE_COMMAND } from "../../../proto/product-image.js";
import { ensureBinaries } from "../../env/binaries.js";
import { startClusterSet, type ClusterSet } from "../../env/clusters/cluster-set.js";
import {
  DEMO_APP_IMAGE,
  DEMO_APP_PORT,
  demoAppImage,
  PRODUCT_IMAGE,
  productImage,
  REDIRECT_IMAGE,
} from "../../env/images/project-images.js";
import { hostCommand } from "../../env/nodes/host-command.js";
import { startNodes, type NodeSet } from "../../env/nodes/node-set.js";
import { redirectImage } from "../../env/images/redirect-image.js";
import { eventually } from "../../support/poll.js";

let set: ClusterSet | undefined;
let nodes: NodeSet | undefined;
let kc: KubeConfig;
let core: CoreV1Api;
let kubectl: string;

beforeAll(async () => {
  kubectl = (await ensureBinaries(["kubectl"])).kubectl;
  const t0 = Date.now();
  const images = [await productImage(), redirectImage(REDIRECT_IMAGE), await demoAppImage()];
  process.stderr.write(
    `[images] product build and image specs in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`,
  );
  set = await startClusterSet({ clusters: ["east"], nodes: true });
  nodes = await startNodes(set, { images });
  kc = set.get("east").kubeConfig();
  core = kc.makeApiClient(CoreV1Api);
}, 900_000);

afterAll(async () => {
  await nodes?.stop().catch(() => {});
  await set?.stop();
});

const product = (name: string, extra: Partial<V1Container> = {}): V1Container => ({
  name,
  image: PRODUCT_IMAGE,
  imagePullPolicy: "Never",
  ...extra,
});

/** Runs a pod to completion (restartPolicy Never) and answers its phase, exit code and log. */
async function runToEnd(name: string, container: V1Container, volumes?: V1Volume[]) {
  await core.createNamespacedPod({
    namespace: "default",
    body: {
      metadata: { name },
      spec: { restartPolicy: "Never", containers: [container], ...(volumes ? { volumes } : {}) },
    },
  });
  const pod = await eventually(
    `pod ${name} finished`,
    async () => {
      const p = await core.readNamespacedPod({ name, namespace: "default" });
      return p.status?.phase === "Succeeded" || p.status?.phase === "Failed" ? p : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 200 },
  );
  const log = await core.readNamespacedPodLog({ name, namespace: "default" });
  const exitCode = pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode;
  return { phase: pod.status?.phase, exitCode, log: String(log) };
}

async function waitRunning(name: string): Promise<V1Pod> {
  return eventually(
    `pod ${name} Running and Ready`,
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace: "default" });
      const ready = pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      return pod.status?.phase === "Running" && ready ? pod : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 200 },
  );
}

/** `node -e script` in pod `name` (the product image's node). */
async function execNode(name: string, script: string): Promise<string> {
  const r = await hostCommand(
    kubectl,
    [`--kubeconfig=${set!.get("east").adminKubeconfigPath}`, "exec", name, "--", "node", "-e", script],
    { timeoutMs: 30_000 },
  );
  return r.stdout.trim();
}

const fetchText = (url: string) =>
  `fetch(${JSON.stringify(url)},{signal:AbortSignal.timeout(5000)}).then(r=>r.text()).then(t=>console.log(t)).catch(e=>{console.error(String(e.cause??e));process.exit(1)})`;

describe("images built from the project", () => {
  it("the product image's default command is the control plane's --help (Dockerfile CMD)", async () => {
    const r = await runToEnd("control-plane-help", product("control-plane"));
    expect(r).toMatchObject({ phase: "Succeeded", exitCode: 0 });
    expect(r.log).toMatch(/--mode/);
  });

  it("starts the router as the chart does: command node, its main module first in args", async () => {
    const r = await runToEnd(
      "router-help",
      product("router", { command: [...PRODUCT_IMAGE_COMMAND], args: [COMPONENT_MAIN.router, "--help"] }),
    );
    expect(r).toMatchObject({ phase: "Succeeded", exitCode: 0 });
    expect(r.log).toMatch(/--control-plane/);
  });

  it("starts the agent as the sidecar template does", async () => {
    const template = injectSidecar(
      {
        spec: {
          containers: [{ name: "app", image: DEMO_APP_IMAGE, ports: [{ containerPort: DEMO_APP_PORT }] }],
        },
      },
      "app",
      "0".repeat(64),
      { agentImage: PRODUCT_IMAGE, redirectImage: REDIRECT_IMAGE, imagePullPolicy: "Never" },
    );
    // The template's native sidecar (restartPolicy Always, a startup probe), run once to its end.
    const { restartPolicy, startupProbe, ...agent } = template.spec!.initContainers!.find(
      (c) => c.name === "switchyard-agent",
    )!;
    expect(restartPolicy).toBe("Always");
    expect(startupProbe?.tcpSocket).toBeDefined();
    // With the template's volumes: the agent mounts its own state volume.
    const r = await runToEnd(
      "agent-help",
      { ...agent, args: [agent.args![0]!, "--help"] },
      template.spec!.volumes,
    );
    expect(r).toMatchObject({ phase: "Succeeded", exitCode: 0 });
    expect(r.log).toMatch(/--app-port/);
  });

  it("the redirect image is Dockerfile.redirect's: its CMD prints the nf_tables iptables it set", async () => {
    const spec = redirectImage(REDIRECT_IMAGE);
    const all = [...spec.files, ...(spec.layers ?? []).flat()];
    const link = (path: string) => all.find((f) => f.path === path && "symlink" in f);
    expect(link("/usr/sbin/iptables")).toEqual({
      path: "/usr/sbin/iptables",
      symlink: "/etc/alternatives/iptables",
    });
    expect(link("/etc/alternatives/iptables")).toMatchObject({ symlink: "/usr/sbin/iptables-nft" });
    expect(link("/bin")).toMatchObject({ symlink: "usr/bin" });
    expect(all.some((f) => f.path.startsWith("/usr/share/doc/"))).toBe(false);
    const r = await runToEnd("redirect-cmd", {
      name: "redirect",
      image: REDIRECT_IMAGE,
      imagePullPolicy: "Never",
    });
    expect(r).toMatchObject({ phase: "Succeeded", exitCode: 0 });
    expect(r.log).toMatch(/^iptables v[\d.]+ \(nf_tables\)/);
  });

  it("runs the sidecar's redirect init container from the iptables image, and the demo app", async () => {
    const app: V1Container = {
      name: "app",
      image: DEMO_APP_IMAGE,
      imagePullPolicy: "Never",
      env: [{ name: "CLUSTER", value: "east" }],
      ports: [{ containerPort: DEMO_APP_PORT }],
      readinessProbe: { httpGet: { path: "/healthz", port: DEMO_APP_PORT }, periodSeconds: 1 },
    };
    const template = injectSidecar({ spec: { containers: [structuredClone(app)] } }, "app", "0".repeat(64), {
      agentImage: PRODUCT_IMAGE,
      redirectImage: REDIRECT_IMAGE,
      imagePullPolicy: "Never",
    });
    const redirect = template.spec!.initContainers!.find((c) => c.name === REDIRECT_CONTAINER)!;
    expect(redirect.image).toBe(REDIRECT_IMAGE);
    const listenPort = Number(/--to-ports (\d+)/.exec(redirect.command!.join(" "))![1]);
    // In place of the agent, a listener on its traffic port that says it got the traffic.
    const standIn = product("stand-in", {
      command: [
        "node",
        "-e",
        `require('http').createServer((q,s)=>s.end('redirected')).listen(${listenPort})`,
      ],
    });
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "redirected" },
        spec: {
          terminationGracePeriodSeconds: 1,
          initContainers: [redirect],
          // The app as written (the template points its probe at the agent's relay, which the
          // stand-in does not serve): its probe by pod IP is redirected to the stand-in too.
          containers: [app, standIn],
        },
      },
    });
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "client" },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [product("client", { command: ["node", "-e", "setInterval(()=>{},1e9)"] })],
        },
      },
    });
    const pod = await waitRunning("redirected");
    await waitRunning("client");
    const init = pod.status?.initContainerStatuses?.[0];
    expect(init?.state?.terminated?.exitCode).toBe(0);
    // From another pod, the app's port reaches the redirect target; inside the pod the app itself answers.
    const podIp = pod.status!.podIP!;
    expect(await execNode("client", fetchText(`http://${podIp}:${DEMO_APP_PORT}/`))).toBe("redirected");
    const direct = await hostCommand(
      kubectl,
      [
        `--kubeconfig=${set!.get("east").adminKubeconfigPath}`,
        "exec",
        "redirected",
        "-c",
        "app",
        "--",
        "node",
        "-e",
        fetchText(`http://127.0.0.1:${DEMO_APP_PORT}/hello`),
      ],
      { timeoutMs: 30_000 },
    );
    expect(direct.stdout.trim()).toBe("hello from the east app: GET /hello");
  });
});
