import type { V1Deployment, V1Pod, V1StatefulSet } from "@kubernetes/client-node";
import { describe, expect, it } from "vitest";
import type { ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import {
  BORN_WITH_AGENT_ANNOTATION,
  INJECTED_AT_ANNOTATION,
  LINGER_UNTIL_ANNOTATION,
} from "./agent-annotations.js";
import { agentInventory } from "./agent-inventory.js";
import { AGENT_CONTAINER, ORIGINAL_TEMPLATE_ANNOTATION } from "./sidecar-pod-template.js";

const withAgent = {
  initContainers: [{ name: AGENT_CONTAINER, image: "a", restartPolicy: "Always" }],
  containers: [],
};
const plain = { containers: [{ name: "app", image: "app" }] };

function workload(name: string, annotations: Record<string, string> = {}, agentInTemplate = false) {
  return {
    metadata: { name, namespace: "shop", annotations },
    spec: {
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: agentInTemplate ? withAgent : plain },
    },
  } as unknown as V1Deployment;
}
function pod(app: string, agent: boolean, annotations: Record<string, string> = {}, deleting = false): V1Pod {
  return {
    metadata: {
      name: `${app}-${Math.random()}`,
      namespace: "shop",
      labels: { app },
      annotations,
      ...(deleting ? { deletionTimestamp: new Date() } : {}),
    },
    spec: agent ? withAgent : plain,
  } as V1Pod;
}
const session = (target: string, extra: Partial<ClusterSession["spec"]> = {}, phase?: string) =>
  ({
    metadata: { name: `s-${Math.random()}`, namespace: "shop" },
    spec: { target, clientKeyHash: "x", ...extra },
    ...(phase ? { status: { phase } } : {}),
  }) as unknown as ClusterSession;

describe("agent inventory", () => {
  it("lists patched and born workloads with their sessions, pods, since and linger", () => {
    const deployments = [
      workload(
        "api",
        { [ORIGINAL_TEMPLATE_ANNOTATION]: "{}", [INJECTED_AT_ANNOTATION]: "2026-12-05T09:00:00Z" },
        true,
      ),
      workload(
        "web",
        { [ORIGINAL_TEMPLATE_ANNOTATION]: "{}", [LINGER_UNTIL_ANNOTATION]: "2026-12-05T10:15:00Z" },
        true,
      ),
      workload("untouched"),
    ];
    const statefulSets = [workload("db") as unknown as V1StatefulSet];
    const pods = [
      pod("api", true),
      pod("api", true),
      pod("api", true, {}, true),
      pod("web", true),
      pod("db", true, { [BORN_WITH_AGENT_ANNOTATION]: "2026-12-05T08:00:00Z" }),
      pod("untouched", false),
    ];
    const sessions = [
      session("deployment/api"),
      session("deployment/api", { connectParams: { releaseAgents: true } }),
      session("deployment/api", {}, "Failed"),
      session("deployment/web/container/app", {}, "Failed"),
    ];
    const inv = agentInventory({
      deployments: () => deployments,
      statefulSets: () => statefulSets,
      pods: () => pods,
      sessions: () => sessions,
    });
    expect(inv).toEqual({
      injected: 3,
      lingering: 1,
      items: [
        { namespace: "shop", target: "deployment/api", sessions: 1, pods: 2, since: "2026-12-05T09:00:00Z" },
        {
          namespace: "shop",
          target: "deployment/web",
          sessions: 0,
          pods: 1,
          lingerUntil: "2026-12-05T10:15:00Z",
        },
        {
          namespace: "shop",
          target: "statefulset/db",
          sessions: 0,
          pods: 1,
          since: "2026-12-05T08:00:00Z",
          bornWithAgent: true,
        },
      ],
    });
  });

  it("caps the items but keeps the counts exact", () => {
    const deployments = Array.from({ length: 130 }, (_, i) =>
      workload(`w${String(i).padStart(3, "0")}`, { [ORIGINAL_TEMPLATE_ANNOTATION]: "{}" }, true),
    );
    const inv = agentInventory({
      deployments: () => deployments,
      statefulSets: () => [],
      pods: () => [],
      sessions: () => [],
    });
    expect(inv.injected).toBe(130);
    expect(inv.items).toHaveLength(100);
  });
});
