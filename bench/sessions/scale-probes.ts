// What the scale benchmark reads from outside the stack's processes: their memory (VmRSS from
// /proc), when the Primary routers applied each session's route (their per-session debug
// view), and everything a deleted session could leave behind (objects on every API server,
// agents, routes, processes).
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import { clusterSessionClient, multiClusterSessionClient } from "../../proto/api/v1alpha1/index.js";
import type { EmbeddedStack } from "../../test/env/stack/embedded-stack.js";
import { descendants } from "../support/cpu-support.js";

export function rssKiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
}

/** The one descendant of this process whose command line has every one of `parts` (as whole arguments or path ends). */
function descendantWith(parts: string[]): number {
  const found = descendants(process.pid).filter((pid) => {
    const args = cmdline(pid);
    return parts.every((p) => args.some((a) => a === p || a.endsWith(`/${p}`)));
  });
  if (found.length !== 1)
    throw new Error(`expected one process with ${parts.join(" ")} among ours, found ${found.length}`);
  return found[0]!;
}

/** The stack's long-lived components by name: control planes per cluster, routers per router id. */
export function componentPids(stack: EmbeddedStack): Record<string, number> {
  const out: Record<string, number> = {};
  for (const cluster of ["primary", ...Object.keys(stack.workloads)])
    out[`${cluster}-control-plane`] = descendantWith([
      "control-plane/src/main.ts",
      `--cluster-name=${cluster}`,
    ]);
  const routers = [
    ...stack.primaryRouterUrls.map((_, i) => `primary-router-${i}`),
    ...Object.keys(stack.workloads).map((w) => `${w}-router`),
  ];
  for (const id of routers) out[id] = descendantWith(["data-plane/router/src/main.ts", `--router-id=${id}`]);
  return out;
}

export function rssOf(pids: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, rssKiB(pid)]));
}

interface RouteEntry {
  sessionId: string;
  state: string;
  upstreams: unknown[];
}
interface DebugRoutes {
  sessions: RouteEntry[];
  attached: unknown[];
}

export async function debugRoutes(adminUrl: string): Promise<DebugRoutes> {
  const res = await fetch(`${adminUrl}/debug/routes`);
  if (!res.ok) throw new Error(`${adminUrl}/debug/routes answered ${res.status}`);
  return (await res.json()) as DebugRoutes;
}

interface OneRoute {
  sessions: Array<{ state: string; changedAt: string; upstreams: unknown[] }>;
}

/**
 * When each router applied a session's route (Unix ms), read from its per-session view
 * (`/debug/routes?session=`: `changedAt`, stamped by the router as it applies the entry), so
 * the figure does not depend on how often or how late it is read. A session that is not yet
 * listed READY with `upstreams` upstreams is read again after 10, 20, 40 … 200 ms; most are
 * there at the first read (the Primary publishes a route before its Ready status write). The
 * stack runs on this machine, so the routers' clock is this process's.
 */
export class RouteWatch {
  /** Duration of each read (request + parse), ms. */
  readonly readMs: number[] = [];
  /** Reads per session until it was listed on every router. */
  readonly reads: number[] = [];
  errors = 0;
  #stopped = false;

  constructor(
    readonly adminUrls: string[],
    readonly upstreams: number,
  ) {}

  async #appliedAt(url: string, id: string, deadline: number): Promise<{ at: number; reads: number }> {
    for (let reads = 1, wait = 10; ; reads++, wait = Math.min(200, wait * 2)) {
      if (this.#stopped) throw new Error(`stopped before ${id} was listed on ${url}`);
      const t0 = performance.now();
      try {
        const res = await fetch(`${url}/debug/routes?session=${encodeURIComponent(id)}`);
        const body =
          res.status === 200 ? ((await res.json()) as OneRoute) : (await res.arrayBuffer(), undefined);
        this.readMs.push(performance.now() - t0);
        const entry = body?.sessions[0];
        if (entry && entry.state === "READY" && entry.upstreams.length >= this.upstreams)
          return { at: Date.parse(entry.changedAt), reads };
      } catch {
        this.errors++;
      }
      if (Date.now() > deadline) throw new Error(`${id} not listed READY on ${url} in time`);
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /**
   * When `id` was applied READY on every router (Unix ms: the latest router's `changedAt`);
   * rejects after `timeoutMs`.
   */
  async until(id: string, timeoutMs = 30_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    const seen = await Promise.all(this.adminUrls.map((u) => this.#appliedAt(u, id, deadline)));
    this.reads.push(Math.max(...seen.map((s) => s.reads)));
    return Math.max(...seen.map((s) => s.at));
  }

  stop(): void {
    this.#stopped = true;
  }
}

const AGENT_MAIN = "data-plane/agent/src/main.ts";

/** What sessions leave behind, by kind; all 0 on a clean stack (`processesOverBaseline` against `baseline`). */
export async function leftovers(stack: EmbeddedStack, baselineProcesses: number) {
  const counts: Record<string, number> = {};
  const primary = stack.primary.kubeConfig();
  counts["MultiClusterSessions (primary)"] = (await multiClusterSessionClient(primary).list()).items.length;
  const core = (kc: ReturnType<typeof stack.primary.kubeConfig>) => kc.makeApiClient(CoreV1Api);
  const secrets = async (kc: ReturnType<typeof stack.primary.kubeConfig>, re: RegExp) =>
    (await core(kc).listSecretForAllNamespaces()).items.filter((s) => re.test(s.metadata?.name ?? "")).length;
  counts["child-secrets Secrets (primary)"] = await secrets(primary, /^mc-.*-child-secrets$/);
  for (const c of ["primary", ...Object.keys(stack.workloads)]) {
    const kc = stack.set.get(c).kubeConfig();
    counts[`ClusterSessions (${c})`] = (await clusterSessionClient(kc).list()).items.length;
    if (c !== "primary") counts[`agent Secrets (${c})`] = await secrets(kc, /^switchyard-agent-/);
  }
  const setDir = `${stack.set.dir}/`;
  counts["agent processes"] = readdirSync("/proc").filter((d) => {
    if (!/^\d+$/.test(d)) return false;
    const args = cmdline(Number(d));
    return args.some((a) => a.endsWith(AGENT_MAIN)) && args.some((a) => a.includes(setDir));
  }).length;
  counts["agent records"] = existsSync(stack.agentsDir)
    ? readdirSync(stack.agentsDir).reduce(
        (n, cluster) =>
          n + readdirSync(join(stack.agentsDir, cluster)).filter((f) => f.endsWith(".json")).length,
        0,
      )
    : 0;
  const routers: Record<string, string> = Object.fromEntries([
    ...stack.primaryRouterAdminUrls.map((u, i) => [`primary-router-${i}`, u]),
    ...Object.values(stack.workloads).map((w) => [`${w.name}-router`, w.routerAdminUrl]),
  ]);
  for (const [name, url] of Object.entries(routers)) {
    const t = await debugRoutes(url);
    counts[`routes (${name})`] = t.sessions.length;
    counts[`attached (${name})`] = t.attached.length;
  }
  counts["processes over baseline"] = Math.max(0, descendants(process.pid).length - baselineProcesses);
  return counts;
}

/** The metrics URL of a control plane of the stack, from its "control plane started" log line. */
export function controlPlaneMetricsUrl(stack: EmbeddedStack, cluster: string): string {
  const log = readFileSync(join(stack.logDir, `${cluster}-control-plane.log`), "utf8");
  for (const line of log.split("\n")) {
    if (!line.includes('"control plane started"')) continue;
    const port = (JSON.parse(line) as { metricsPort?: number }).metricsPort;
    if (port) return `http://127.0.0.1:${port}/metrics`;
  }
  throw new Error(`no "control plane started" line with metricsPort in ${cluster}-control-plane.log`);
}

const PUSH_LATENCY = "switchyard_route_discovery_push_latency_seconds_bucket";

/** Cumulative counts of the push-latency histogram (change published → router ACK), by upper bound in s. */
export async function pushLatencyBuckets(metricsUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(metricsUrl)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith(PUSH_LATENCY)) continue;
    const le = /le="([^"]+)"/.exec(line)?.[1];
    if (le) out.set(le, (out.get(le) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return out;
}

/** Pushes (ACKs) between two readings and the bucket bounds holding their p50 and p99, ms. */
export function pushLatencyBetween(before: Map<string, number>, after: Map<string, number>) {
  const rows = [...after.entries()].map(([le, n]) => ({ le, n: n - (before.get(le) ?? 0) }));
  const total = rows.find((r) => r.le === "+Inf")?.n ?? 0;
  const bound = (q: number) => {
    const r = rows.find((x) => x.n >= q * total);
    return r === undefined || r.le === "+Inf" ? r?.le : Number(r.le) * 1000;
  };
  return { acks: total, p50AtMostMs: bound(0.5), p99AtMostMs: bound(0.99) };
}
