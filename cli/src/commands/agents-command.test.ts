import { describe, expect, it } from "vitest";
import type { SwitchyardOperator } from "../../../proto/api/v1alpha1/index.js";
import { agentState, agentsOf, formatAgents } from "./agents-command.js";

const op = {
  apiVersion: "switchyard.dev/v1alpha1",
  kind: "SwitchyardOperator",
  metadata: { name: "operator" },
  spec: { clusterName: "primary" },
  status: {
    agents: {
      injected: 1,
      lingering: 0,
      items: [{ namespace: "shop", target: "deployment/api", sessions: 2, pods: 2 }],
    },
    connectedClusters: [
      {
        name: "east",
        lastCheck: "2026-12-05T10:00:00Z",
        connected: { kubernetesVersion: "v1.34.0" },
        agents: {
          injected: 150,
          lingering: 1,
          items: [
            {
              namespace: "shop",
              target: "deployment/api",
              sessions: 0,
              pods: 2,
              since: "2026-12-05T09:00:00Z",
              lingerUntil: "2026-12-05T10:14:00Z",
            },
          ],
        },
      },
      { name: "west", lastCheck: "2026-12-05T10:00:00Z", error: "unreachable" },
    ],
  },
} as unknown as SwitchyardOperator;

describe("switchyard agents list", () => {
  it("gathers the Primary's own agents and each connected cluster's", () => {
    const { clusters, rows } = agentsOf(op);
    expect(clusters).toEqual([
      { cluster: "primary", injected: 1, lingering: 0, truncated: false },
      { cluster: "east", injected: 150, lingering: 1, truncated: true },
    ]);
    expect(rows.map((r) => `${r.cluster}:${r.target}:${r.sessions}`)).toEqual([
      "primary:deployment/api:2",
      "east:deployment/api:0",
    ]);
  });

  it("says what state each agent is in", () => {
    const now = Date.parse("2026-12-05T10:00:00Z");
    const [inUse, idle] = agentsOf(op).rows;
    expect(agentState(inUse!, now)).toBe("in use");
    expect(agentState(idle!, now)).toBe("lingering 14m");
    expect(agentState({ ...idle!, lingerUntil: "never" }, now)).toBe("until removed");
    expect(agentState({ ...idle!, lingerUntil: undefined, bornWithAgent: true } as never, now)).toBe(
      "born with it",
    );
    const text = formatAgents(agentsOf(op).rows, true, now);
    expect(text.split("\n")[0]).toMatch(/^CLUSTER\s+NAMESPACE\s+TARGET\s+STATE\s+SESSIONS\s+PODS\s+SINCE$/);
    expect(text).toContain("east      shop        deployment/api   lingering 14m   0          2      60m");
    expect(formatAgents([], false)).toBe("No agents.\n");
  });
});
