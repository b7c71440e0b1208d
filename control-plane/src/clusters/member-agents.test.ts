import { describe, expect, it } from "vitest";
import { memberAgentsSummary } from "./member-agents.js";

describe("a member's agents summary", () => {
  it("keeps what our schema accepts and drops odd entries one by one", () => {
    expect(
      memberAgentsSummary({
        injected: 3,
        lingering: 1,
        items: [
          {
            namespace: "shop",
            target: "deployment/api",
            sessions: 1,
            pods: 2,
            since: "2026-12-05T09:00:00Z",
          },
          {
            namespace: "shop",
            target: "deployment/web",
            sessions: 0,
            pods: 1,
            lingerUntil: "never",
            extra: "x",
          },
          { namespace: "Shop!", target: "deployment/bad", sessions: 0, pods: 1 },
          { namespace: "shop", target: "pod/x", sessions: 0, pods: 1 },
          { namespace: "shop", target: "statefulset/db", sessions: -1, pods: 1 },
          {
            namespace: "shop",
            target: "statefulset/db",
            sessions: 0,
            pods: 1,
            lingerUntil: "soon",
            bornWithAgent: true,
          },
        ],
      }),
    ).toEqual({
      injected: 3,
      lingering: 1,
      items: [
        { namespace: "shop", target: "deployment/api", sessions: 1, pods: 2, since: "2026-12-05T09:00:00Z" },
        { namespace: "shop", target: "deployment/web", sessions: 0, pods: 1, lingerUntil: "never" },
        { namespace: "shop", target: "statefulset/db", sessions: 0, pods: 1, bornWithAgent: true },
      ],
    });
  });

  it("refuses a summary whose counts are not counts", () => {
    expect(memberAgentsSummary(undefined)).toBeUndefined();
    expect(memberAgentsSummary({ injected: "3", lingering: 0 })).toBeUndefined();
    expect(memberAgentsSummary({ injected: 1.5, lingering: 0 })).toBeUndefined();
    expect(memberAgentsSummary({ injected: 2, lingering: 0, items: Array(300).fill({}) })).toEqual({
      injected: 2,
      lingering: 0,
      items: [],
    });
  });
});
