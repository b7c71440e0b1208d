// The routing table as a RouteSink: atomic apply or reject (last good table kept),
// change notifications, and redaction.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  SessionRouteSchema,
  SessionState,
  type SessionRoute,
} from "../../../proto/gen/route_discovery_pb.js";
import { hashSecret } from "../../../proto/session-auth.js";
import { RouteTableError } from "./router-errors.js";
import { RoutingTable } from "./routing-table.js";
import { parseStaticRoutes } from "./static-routes.js";

interface UpstreamInit {
  cluster: string;
  url: string;
  secret: string;
  isDefault: boolean;
  caPem?: string;
  serverName?: string;
}

function route(
  id: string,
  upstreams: UpstreamInit[] = [{ cluster: "east", url: "ws://127.0.0.1:1/x", secret: "s", isDefault: true }],
): SessionRoute {
  return create(SessionRouteSchema, {
    sessionId: id,
    clientKeyHash: hashSecret("k"),
    state: SessionState.READY,
    upstreams,
  });
}

describe("RoutingTable", () => {
  it("applies full resyncs and deltas and reports what changed", () => {
    const t = new RoutingTable();
    const changes: unknown[] = [];
    t.onChange((c) => changes.push({ up: c.upserted.map((r) => r.sessionId), rm: c.removed }));
    expect(t.loaded).toBe(false);
    t.apply({ fullResync: true, upserts: [route("a"), route("b")], removes: [], version: "1" });
    t.apply({ fullResync: false, upserts: [route("c")], removes: ["a"], version: "2" });
    t.apply({ fullResync: true, upserts: [route("c")], removes: [], version: "3" });
    expect(t.loaded).toBe(true);
    expect(t.version).toBe("3");
    expect([...t.all()].map((r) => r.sessionId)).toEqual(["c"]);
    expect(changes).toEqual([
      { up: ["a", "b"], rm: [] },
      { up: ["c"], rm: ["a"] },
      { up: [], rm: ["b"] },
    ]);
  });

  it.each([
    ["an empty version", { version: "" }],
    ["a bad hash", { upserts: [{ ...route("x"), clientKeyHash: "nothex" }] }],
    [
      "two defaults",
      {
        upserts: [
          route("x", [
            { cluster: "east", url: "ws://h/x", secret: "s", isDefault: true },
            { cluster: "west", url: "ws://h/y", secret: "s", isDefault: true },
          ]),
        ],
      },
    ],
    [
      "an http upstream",
      { upserts: [route("x", [{ cluster: "east", url: "http://h/x", secret: "s", isDefault: true }])] },
    ],
    ["a duplicate session", { upserts: [route("x"), route("x")] }],
    ...["10.0.0.7", "Switchyard_Agent", "-agent", "a..b"].map((serverName): [string, object] => [
      `server_name ${serverName}`,
      {
        upserts: [
          route("x", [
            { cluster: "east", url: "wss://10.0.0.7:9440/x", secret: "s", isDefault: true, serverName },
          ]),
        ],
      },
    ]),
  ])("rejects %s and keeps the last good table", (_name, patch) => {
    const t = new RoutingTable();
    t.apply({ fullResync: true, upserts: [route("a")], removes: [], version: "1" });
    const delta = { fullResync: true, upserts: [route("b")], removes: [], version: "2", ...patch };
    expect(() => t.apply(delta as never)).toThrow(RouteTableError);
    expect(t.version).toBe("1");
    expect(t.get("a")).toBeDefined();
  });

  it("keeps same-named sessions of two namespaces apart: removing one leaves the other", () => {
    const t = new RoutingTable();
    const victim = route("shop:mc-0123456789abcdef");
    const intruder = {
      ...route("tenant-b:mc-0123456789abcdef", [
        { cluster: "west", url: "ws://127.0.0.1:2/x", secret: "b", isDefault: true },
      ]),
      clientKeyHash: hashSecret("b"),
    };
    const longest = route(`${"n".repeat(63)}:${"a".repeat(253)}`);
    t.apply({ fullResync: true, upserts: [victim, intruder, longest], removes: [], version: "1" });
    expect(t.size).toBe(3);
    t.apply({ fullResync: false, upserts: [], removes: ["tenant-b:mc-0123456789abcdef"], version: "2" });
    expect(t.get("shop:mc-0123456789abcdef")).toEqual(victim);
    expect(t.get("tenant-b:mc-0123456789abcdef")).toBeUndefined();
    expect(() =>
      t.apply({ fullResync: false, upserts: [route(`${longest.sessionId}x`)], removes: [], version: "3" }),
    ).toThrow(RouteTableError);
  });

  it("accepts a DNS server_name and reports a change of it (or of ca_pem) as a changed route", () => {
    const t = new RoutingTable();
    const changed: string[][] = [];
    t.onChange((c) => changed.push(c.upserted.map((r) => r.sessionId)));
    const agent = (serverName: string, caPem = "") =>
      route("a", [
        { cluster: "pod-a", url: "wss://10.0.0.7:9440/x", secret: "s", isDefault: true, caPem, serverName },
      ]);
    t.apply({ fullResync: true, upserts: [agent("switchyard-agent")], removes: [], version: "1" });
    t.apply({ fullResync: true, upserts: [agent("switchyard-agent")], removes: [], version: "2" });
    t.apply({ fullResync: true, upserts: [agent("agent.example.com")], removes: [], version: "3" });
    t.apply({ fullResync: true, upserts: [agent("agent.example.com", "CA")], removes: [], version: "4" });
    expect(changed).toEqual([["a"], ["a"], ["a"]]);
    expect(t.get("a")!.upstreams[0]!.serverName).toBe("agent.example.com");
    expect(JSON.stringify(t.redacted())).toContain('"serverName":"agent.example.com"');
  });

  it("says when it applied each entry as it is: a resync that changes nothing keeps the time", async () => {
    const t = new RoutingTable();
    const changedAt = (id: string) =>
      Date.parse((t.redacted(id).sessions[0] as { changedAt: string }).changedAt);
    t.apply({ fullResync: true, upserts: [route("a"), route("b")], removes: [], version: "1" });
    const a1 = changedAt("a");
    await new Promise((r) => setTimeout(r, 5));
    const moved = route("b", [{ cluster: "west", url: "ws://127.0.0.1:2/x", secret: "s", isDefault: true }]);
    t.apply({ fullResync: true, upserts: [route("a"), moved], removes: [], version: "2" });
    expect(changedAt("a")).toBe(a1);
    expect(changedAt("b")).toBeGreaterThan(a1);
    expect(t.redacted("b").sessions).toHaveLength(1);
    expect(t.redacted("c").sessions).toEqual([]);
    expect(t.redacted().sessions).toHaveLength(2);
  });

  it("redacts secrets and hashes", () => {
    const t = new RoutingTable();
    t.apply({
      fullResync: true,
      upserts: [
        route("a", [
          { cluster: "east", url: "wss://user:pw@h/x?token=t", secret: "topsecret", isDefault: true },
        ]),
      ],
      removes: [],
      version: "1",
    });
    const text = JSON.stringify(t.redacted());
    expect(text).not.toContain("topsecret");
    expect(text).not.toContain(hashSecret("k"));
    expect(text).not.toContain("pw");
    expect(text).not.toContain("token=t");
  });

  it("parses a static routes file in protobuf JSON (YAML accepted)", () => {
    const yaml = `routes:\n  - sessionId: s1\n    clientKeyHash: ${hashSecret("k")}\n    state: SESSION_STATE_READY\n    upstreams:\n      - { cluster: east, url: "ws://127.0.0.1:9/x", secret: s, isDefault: true }\n`;
    const delta = parseStaticRoutes(yaml);
    expect(delta.fullResync).toBe(true);
    expect(delta.version).toMatch(/^file-/);
    const t = new RoutingTable();
    t.apply(delta);
    expect(t.get("s1")?.upstreams[0]?.cluster).toBe("east");
    expect(t.get("s1")?.upstreams[0]?.serverName).toBe("");
    const named = parseStaticRoutes(
      yaml.replace("isDefault: true", "isDefault: true, serverName: switchyard-agent"),
    );
    expect(named.upserts[0]!.upstreams[0]!.serverName).toBe("switchyard-agent");
    expect(() => parseStaticRoutes("routes: 5")).toThrow(RouteTableError);
  });
});
