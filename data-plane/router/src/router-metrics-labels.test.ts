// The router's `cluster` label across a simulated rollout of a member gateway's agents: every
// rollout gives the session new agent ids (pod-derived), and the label sets on /metrics must
// not grow with them. A real router on loopback, a real client WebSocket; the agents are
// unreachable addresses (links are made, and counted, whether or not they connect).
import { create } from "@bufbuild/protobuf";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { SessionRouteSchema, SessionState } from "../../../proto/gen/route_discovery_pb.js";
import { bearerHeader, hashSecret } from "../../../proto/session-auth.js";
import { sessionPath } from "../../../proto/session-endpoint.js";
import { RouterServer } from "./router-server.js";

const SESSION = "default:cs-rollout";
const SECRET = "client-secret-rollout";
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function route(version: number, agents: string[], metricsCluster: string | undefined) {
  return {
    fullResync: true,
    version: `v${version}`,
    removes: [],
    upserts: [
      create(SessionRouteSchema, {
        sessionId: SESSION,
        clientKeyHash: hashSecret(SECRET),
        state: SessionState.READY,
        upstreams: agents.map((id, i) => ({
          cluster: id,
          url: `ws://127.0.0.1:1/v1/sessions/${id}`,
          secret: "s",
          isDefault: i === 0,
          ...(metricsCluster ? { metricsCluster } : {}),
        })),
      }),
    ],
  };
}

/** The distinct `cluster` label values on /metrics. */
async function clusterLabels(adminBase: string): Promise<string[]> {
  const text = await (await fetch(`${adminBase}/metrics`)).text();
  return [...new Set([...text.matchAll(/cluster="([^"]*)"/g)].map((m) => m[1]!))].sort();
}

async function rollouts(metricsCluster: string | undefined): Promise<string[][]> {
  const router = new RouterServer({
    host: "127.0.0.1",
    port: 0,
    admin: { host: "127.0.0.1", port: 0 },
    logger: pino({ level: "silent" }),
  });
  cleanups.push(() => router.close());
  router.table.apply(route(0, ["agent-a0", "agent-b0"], metricsCluster));
  const { port } = await router.listen();
  const adminBase = `http://127.0.0.1:${router.adminAddress!.port}`;
  const ws = new WebSocket(`ws://127.0.0.1:${port}${sessionPath(SESSION)}`, {
    headers: bearerHeader(SECRET),
  });
  cleanups.push(() => ws.terminate());
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  const seen: string[][] = [await clusterLabels(adminBase)];
  // Five rollouts: both pods replaced each time, as a Deployment's rolling update does.
  for (let v = 1; v <= 5; v++) {
    router.table.apply(route(v, [`agent-a${v}`, `agent-b${v}`], metricsCluster));
    seen.push(await clusterLabels(adminBase));
  }
  return seen;
}

describe("router metric labels across agent rollouts", () => {
  it("labels a member gateway's agents by their metrics_cluster: one label, whatever the pods", async () => {
    const seen = await rollouts("agent");
    for (const labels of seen) expect(labels).toEqual(["agent"]);
  });

  it("drops the counters of upstreams that left the table when no metrics_cluster is given", async () => {
    const seen = await rollouts(undefined);
    expect(seen[0]).toEqual(["agent-a0", "agent-b0"]);
    // Only the live pods' labels, never the replaced ones: bounded by the route, not by history.
    expect(seen[5]).toEqual(["agent-a5", "agent-b5"]);
  });
});
