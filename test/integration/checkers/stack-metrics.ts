// Where every component of a running embedded stack serves /metrics: control planes on the
// port they log at start ("control plane started", metricsPort), routers on their admin
// port (--admin-listen; the session port answers /metrics with 404), process agents on the
// listen port their member control plane records for them.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { EmbeddedStack } from "../../env/stack/embedded-stack.js";

export type Component = "control-plane" | "router" | "agent";

export interface MetricsTarget {
  component: Component;
  /** The process, e.g. east-control-plane, primary-router-0, agent east/default/demo. */
  name: string;
  /** host:port serving plain-HTTP /metrics. */
  address: string;
}

function controlPlaneTarget(stack: EmbeddedStack, name: string): MetricsTarget {
  const log = readFileSync(join(stack.logDir, `${name}.log`), "utf8");
  for (const line of log.split("\n")) {
    if (!line.startsWith("{")) continue;
    const entry = JSON.parse(line) as { msg?: string; metricsPort?: number };
    if (entry.msg === "control plane started" && entry.metricsPort)
      return { component: "control-plane", name, address: `127.0.0.1:${entry.metricsPort}` };
  }
  throw new Error(`${name} has not logged "control plane started" with its metricsPort`);
}

/** Every /metrics endpoint of the stack; agents only once their sessions have started them. */
export function stackMetricsTargets(stack: EmbeddedStack): MetricsTarget[] {
  const workloads = Object.values(stack.workloads);
  const targets: MetricsTarget[] = [
    controlPlaneTarget(stack, "primary-control-plane"),
    ...workloads.map((w) => controlPlaneTarget(stack, `${w.name}-control-plane`)),
    ...stack.primaryRouterAdminUrls.map((u, i) => ({
      component: "router" as const,
      name: `primary-router-${i}`,
      address: new URL(u).host,
    })),
    ...workloads.map((w) => ({
      component: "router" as const,
      name: `${w.name}-router`,
      address: new URL(w.routerAdminUrl).host,
    })),
  ];
  for (const w of workloads) {
    const dir = join(stack.agentsDir, w.name);
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir).filter((n) => n.endsWith(".json"))) {
      const r = JSON.parse(readFileSync(join(dir, f), "utf8")) as {
        targetId: string;
        host: string;
        port: number;
      };
      targets.push({
        component: "agent",
        name: `agent ${w.name}/${r.targetId}`,
        address: `${r.host}:${r.port}`,
      });
    }
  }
  return targets;
}
