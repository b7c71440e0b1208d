// The CLI suites' stand-in for the Primary's session control plane: every new
// MultiClusterSession in `namespace` is routed through a real router process (a static
// routes file reloaded by SIGHUP) to scripted agents — east the Default, west the other —
// and marked Ready once the router has applied its route; a deleted one is unrouted.
// Tests see the parents it handled in `seen` (their spec, e.g. connectParams).
import { Watch, type KubeConfig } from "@kubernetes/client-node";
import { sessionKey } from "../../../proto/session-endpoint.js";
import {
  API_VERSION,
  multiClusterSessionClient,
  type MultiClusterSession,
} from "../../../proto/api/v1alpha1/index.js";
import type { ScriptedAgent } from "../../peers/scripted-agent.js";
import type { RouterProcess } from "../router/router-process.js";

export interface SimulatedPrimaryOptions {
  admin: KubeConfig;
  namespace: string;
  router: RouterProcess;
  east: ScriptedAgent;
  west: ScriptedAgent;
}

export interface SimulatedPrimary {
  /** Parents seen so far, as created. */
  seen: MultiClusterSession[];
  stop(): void;
}

export function simulatePrimary(o: SimulatedPrimaryOptions): SimulatedPrimary {
  const seen: MultiClusterSession[] = [];
  const routes = new Map<string, object>();
  const reload = () => o.router.reload(JSON.stringify([...routes.values()]));
  let ctl: AbortController | undefined;
  let stopped = false;
  void new Watch(o.admin)
    .watch(
      `/apis/${API_VERSION}/namespaces/${o.namespace}/multiclustersessions`,
      {},
      (type, obj: MultiClusterSession) => {
        const id = obj.metadata.name!;
        if (type === "DELETED") {
          routes.delete(id);
          return reload();
        }
        if (type !== "ADDED" || routes.has(id)) return;
        seen.push(obj);
        routes.set(id, {
          sessionId: sessionKey(o.namespace, id),
          clientKeyHash: obj.spec.clientKeyHash,
          state: "SESSION_STATE_READY",
          upstreams: [
            { cluster: "east", url: o.east.url(id), secret: "agent-east", isDefault: true },
            { cluster: "west", url: o.west.url(id), secret: "agent-west", isDefault: false },
          ],
        });
        reload();
        void o.router
          .waitForLog(
            (l) => l.msg === "static routes applied" && (l.sessions as number) >= routes.size,
            10_000,
          )
          .then(() =>
            multiClusterSessionClient(o.admin).patchStatus(
              { name: id, namespace: o.namespace },
              {
                phase: "Ready",
                children: {
                  east: {
                    name: `${id}-east`,
                    ready: true,
                    gateway: "ws://east.gw:8080",
                    defaultCluster: true,
                  },
                  west: { name: `${id}-west`, ready: true, gateway: "ws://west.gw:8080" },
                },
              },
            ),
          )
          .catch(() => {});
      },
      () => {},
    )
    .then((c) => {
      ctl = c;
      if (stopped) c.abort();
    });
  return {
    seen,
    stop: () => {
      stopped = true;
      ctl?.abort();
    },
  };
}
