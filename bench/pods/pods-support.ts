// What the real-pod benches share around `switchyard exec`: timed GETs through a demo Service,
// the demo Deployment's rollout state, starting and stopping the developer's exec, and waits
// timed from the exec's start.
import { request, Agent } from "node:http";
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { freePorts } from "../../test/env/ports.js";
import type { PodStack } from "../../test/env/stack/pod-stack.js";
import { launch, type LaunchedProcess } from "../../test/support/launch.js";
import { eventually } from "../../test/support/poll.js";
import { installedCli } from "../../test/env/images/product-build.js";
import { stealExecCommand } from "../support/pod-stack-run.js";

export const AGENT = "switchyard-agent";
const REDIRECT = "switchyard-redirect";
const WARM_UP = 30;
export const WAIT = { timeoutMs: 180_000 };

interface Answer {
  ms: number;
  servedBy: string | undefined;
  reused: boolean;
}

/** One GET on `agent` (false: a connection of its own), with its latency and who answered. */
export function timedGet(url: string, agent: Agent | false, timeoutMs = 10_000): Promise<Answer> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, timeout: timeoutMs }, (res) => {
      res.on("data", () => {});
      res.on("error", reject);
      res.on("end", () =>
        resolve({
          ms: performance.now() - t0,
          servedBy: res.headers["x-served-by"] as string | undefined,
          reused: req.reusedSocket,
        }),
      );
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url}: timed out`)));
    req.on("error", reject);
    req.end();
  });
}

/** `count` sequential GETs on one kept-alive connection, each answered by `expected`; ms each. */
export async function sequential(url: string, count: number, expected: (servedBy: string) => boolean) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const ms: number[] = [];
    let reused = 0;
    for (let i = 0; i < WARM_UP + count; i++) {
      const a = await timedGet(`${url}/bench/${i}`, agent);
      if (!expected(a.servedBy ?? ""))
        throw new Error(`GET ${url} #${i}: answered by ${a.servedBy ?? "nobody"} (x-served-by)`);
      if (i < WARM_UP) continue;
      ms.push(a.ms);
      if (a.reused) reused++;
    }
    return { ms, reused };
  } finally {
    agent.destroy();
  }
}

export const demoPods = async (kc: KubeConfig): Promise<V1Pod[]> =>
  (await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: "default", labelSelector: "app=demo" }))
    .items;

const hasAgent = (p: V1Pod) =>
  [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])].some(
    (c) => c.name === AGENT || c.name === REDIRECT,
  );
const isReady = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");

/** The demo Deployment's rollout is complete, every pod (terminating ones too) as `injected` says. */
export async function rolledOut(kc: KubeConfig, injected: boolean): Promise<boolean> {
  const d = await kc
    .makeApiClient(AppsV1Api)
    .readNamespacedDeployment({ name: "demo", namespace: "default" });
  const template = d.spec!.template.spec!;
  const templateInjected = [...(template.initContainers ?? []), ...template.containers].some(
    (c) => c.name === AGENT,
  );
  const want = d.spec?.replicas ?? 1;
  const s = d.status ?? {};
  if (templateInjected !== injected || (s.observedGeneration ?? 0) < (d.metadata?.generation ?? 0))
    return false;
  if (s.replicas !== want || s.updatedReplicas !== want || s.availableReplicas !== want) return false;
  const pods = await demoPods(kc);
  return pods.length === want && pods.every((p) => hasAgent(p) === injected && isReady(p));
}

export interface Exec {
  proc: LaunchedProcess;
  localPort: number;
  startedAt: number;
}

/**
 * `switchyard exec --steal -- node local-app.mjs` as the developer, with the CLI as a user
 * installs it (`cli`: the product build's bin, test/env/images, by default); returns once spawned.
 */
export async function startExec(stack: PodStack, target?: string, cli = installedCli()): Promise<Exec> {
  const localPort = (await freePorts(1))[0]!;
  const startedAt = performance.now();
  const proc = await launch({
    name: "switchyard-exec",
    ...stealExecCommand(stack, localPort, target, cli),
    env: { LOCAL_PORT: String(localPort), LOCAL_NAME: "local" },
  });
  return { proc, localPort, startedAt };
}

/** Ctrl-C, as a developer stops it (the session is deleted on the way out); its exit status. */
export async function stopExec(e: Exec): Promise<number | string> {
  await e.proc.stop(60_000, "SIGINT");
  return e.proc.exited;
}

/** ms from the exec's start until `probe` holds (polled every `intervalMs`). */
export async function msUntil(
  e: Exec,
  what: string,
  probe: () => Promise<boolean> | boolean,
  intervalMs: number,
) {
  await eventually(what, async () => ((await probe()) ? true : undefined), {
    ...WAIT,
    intervalMs,
    giveUp: () =>
      e.proc.hasExited() ? new Error(`switchyard exec exited while waiting for ${what}`) : undefined,
  });
  return performance.now() - e.startedAt;
}

/** A fresh connection to `url` (kube-proxy picks a replica per connection) answered by "local". */
export const stolenOnce = async (url: string) =>
  (await timedGet(`${url}/ready`, false, 2000)).servedBy === "local";

export const kc = (stack: PodStack, cluster: string) => stack.set.get(cluster).kubeConfig();
export const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
