// Snapshot cache: versions, deltas from the change log, immutability, validation, and a
// property test that any delta applied to the table of its base version gives the current table.
import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  SessionRouteSchema,
  SessionState,
  type SessionRoute,
} from "../../../proto/gen/route_discovery_pb.js";
import { RouteSnapshotCache } from "./snapshot-cache.js";

function route(id: string, secret = "s", state = SessionState.READY): SessionRoute {
  return create(SessionRouteSchema, {
    sessionId: id,
    clientKeyHash: createHash("sha256").update(id).digest("hex"),
    state,
    upstreams:
      state === SessionState.READY
        ? [
            { cluster: "east", url: "wss://east.test:1", secret, isDefault: true },
            { cluster: "west", url: "ws://west.test:1", secret },
          ]
        : [],
  });
}

describe("RouteSnapshotCache", () => {
  it("starts at a non-empty version and bumps it only on real changes", () => {
    const c = new RouteSnapshotCache();
    const v0 = c.version();
    expect(v0).not.toBe("");
    const v1 = c.upsert(route("mc-a"));
    expect(v1).not.toBe(v0);
    expect(c.upsert(route("mc-a"))).toBe(v1); // identical: no new version
    expect(c.remove("mc-nope")).toBe(v1);
    expect(c.upsert(route("mc-a", "rotated"))).not.toBe(v1);
  });

  it("answers undefined for the current version, a delta for a known one, full for unknown ones", () => {
    const c = new RouteSnapshotCache();
    c.replaceAll([route("mc-a"), route("mc-b"), route("mc-c")]);
    const v1 = c.version();
    expect(c.changesSince(v1)).toBeUndefined();
    c.upsert(route("mc-d"));
    c.remove("mc-a");
    const d = c.changesSince(v1)!;
    expect(d.full).toBe(false);
    expect(d.upserts.map((r) => r.sessionId)).toEqual(["mc-d"]);
    expect(d.removes).toEqual(["mc-a"]);
    expect(d.version).toBe(c.version());
    for (const unknown of [
      "",
      "garbage",
      new RouteSnapshotCache().version(),
      `${v1}0`,
      v1.replace(/\.\d+$/, ".999"),
    ]) {
      const f = c.changesSince(unknown)!;
      expect(f.full).toBe(true);
      expect(f.upserts.map((r) => r.sessionId).sort()).toEqual(["mc-b", "mc-c", "mc-d"]);
    }
  });

  it("falls back to a full snapshot for versions older than the retained log", () => {
    const c = new RouteSnapshotCache({ maxLogEntries: 4 });
    c.replaceAll([route("mc-a"), route("mc-b"), route("mc-c"), route("mc-d")]);
    const old = c.version();
    for (let i = 0; i < 6; i++) c.upsert(route("mc-a", `s${i}`));
    expect(c.changesSince(old)!.full).toBe(true);
    const recent = c.version();
    c.upsert(route("mc-b", "x"));
    expect(c.changesSince(recent)).toMatchObject({ full: false, removes: [] });
  });

  it("publishes immutable snapshots and copies what callers pass in", () => {
    const c = new RouteSnapshotCache();
    const r = route("mc-a");
    c.upsert(r);
    const snap = c.snapshot();
    r.upstreams[0]!.secret = "mutated-after-upsert";
    expect(snap.routes.get("mc-a")!.upstreams[0]!.secret).toBe("s");
    expect(Object.isFrozen(snap.routes.get("mc-a"))).toBe(true);
    expect(() => {
      (snap.routes.get("mc-a")!.upstreams as unknown[]).push({});
    }).toThrow(TypeError);
    c.upsert(route("mc-b"));
    expect(snap.routes.size).toBe(1);
    expect(c.snapshot()).not.toBe(snap);
    expect(c.snapshot()).toBe(c.snapshot());
  });

  it.each([
    ["a bad session id", { sessionId: "MC_A" }],
    ...["shop:", ":mc-a", "Shop:mc-a", "shop:mc-a:b", "shop:MC_A"].map((sessionId): [string, object] => [
      `a malformed session key ${sessionId}`,
      { sessionId },
    ]),
    ["a bad key hash", { clientKeyHash: "abc" }],
    ["an unspecified state", { state: SessionState.UNSPECIFIED }],
    ["a READY route without default", { upstreams: [{ cluster: "east", url: "wss://x", secret: "s" }] }],
    [
      "two defaults",
      { upstreams: [1, 2].map((i) => ({ cluster: `c${i}`, url: "wss://x", secret: "s", isDefault: true })) },
    ],
    ["an http upstream", { upstreams: [{ cluster: "east", url: "http://x", secret: "s", isDefault: true }] }],
    [
      "a cluster name that is no DNS label",
      { upstreams: [{ cluster: "East_1", url: "wss://x", secret: "s", isDefault: true }] },
    ],
    [
      "an upstream without secret",
      { upstreams: [{ cluster: "east", url: "wss://x", secret: "", isDefault: true }] },
    ],
  ])("refuses %s without publishing", (_name, patch) => {
    const c = new RouteSnapshotCache();
    const v = c.version();
    const { $typeName: _t, ...base } = route("mc-a");
    const bad = create(SessionRouteSchema, { ...base, upstreams: [...base.upstreams], ...patch });
    expect(() => c.upsert(bad)).toThrow(expect.objectContaining({ code: "SWITCHYARD_ROUTE_INVALID" }));
    expect(() => c.replaceAll([bad])).toThrow(expect.objectContaining({ code: "SWITCHYARD_ROUTE_INVALID" }));
    expect(c.version()).toBe(v);
  });

  it("keys routes by namespace and name: a same-named session of another namespace is another entry", () => {
    const c = new RouteSnapshotCache();
    const victim = route("shop:mc-0123456789abcdef");
    const v1 = c.upsert(victim);
    c.upsert(route("tenant-b:mc-0123456789abcdef", "intruder"));
    expect(c.size).toBe(2);
    expect(c.get("shop:mc-0123456789abcdef")).toEqual(victim);
    c.remove("tenant-b:mc-0123456789abcdef");
    c.remove("mc-0123456789abcdef"); // a name alone names nothing
    expect(c.get("shop:mc-0123456789abcdef")).toEqual(victim);
    const d = c.changesSince(v1)!;
    expect(d.upserts).toEqual([]);
    expect(d.removes).toEqual(["tenant-b:mc-0123456789abcdef"]);
  });

  it("accepts a CREATING route without upstreams and refuses duplicate ids in replaceAll", () => {
    const c = new RouteSnapshotCache();
    c.upsert(route("mc-new", "s", SessionState.CREATING));
    expect(() => c.replaceAll([route("mc-a"), route("mc-a")])).toThrow(/listed twice/);
  });

  it("is not ready until replaceAll or markReady, and says so to listeners", () => {
    const a = new RouteSnapshotCache();
    const seen: string[] = [];
    a.onChange((v) => seen.push(v));
    a.upsert(route("mc-a"));
    expect(a.ready()).toBe(false);
    a.markReady();
    expect(a.ready()).toBe(true);
    expect(seen).toEqual([a.version(), a.version()]);
    const b = new RouteSnapshotCache();
    b.replaceAll([]);
    expect(b.ready()).toBe(true);
    expect(new RouteSnapshotCache({ ready: true }).ready()).toBe(true);
  });

  it("reset stops serving and forgets the table without publishing; old versions get the next term's full table", () => {
    const c = new RouteSnapshotCache();
    c.replaceAll([route("mc-a"), route("mc-b")]);
    const before = c.version();
    const seen: string[] = [];
    c.onChange((v) => seen.push(v));
    c.reset();
    expect(c.ready()).toBe(false);
    expect(c.size).toBe(0);
    expect(seen).toEqual([]);
    expect(c.version()).not.toBe(before);
    // The next term: the sessions that still exist, then complete.
    c.upsert(route("mc-b"));
    c.markReady();
    expect(c.changesSince(before)).toMatchObject({ full: true, version: c.version(), removes: [] });
    expect(c.changesSince(before)!.upserts.map((r) => r.sessionId)).toEqual(["mc-b"]);
  });

  it("notifies listeners once per published version", () => {
    const c = new RouteSnapshotCache({ ready: true });
    const seen: string[] = [];
    const off = c.onChange((v) => seen.push(v));
    c.replaceAll([route("mc-a"), route("mc-b")]);
    c.upsert(route("mc-a"));
    off();
    c.remove("mc-a");
    expect(seen).toHaveLength(1);
  });

  it("property: a delta applied to the table at its base version gives the current table", () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("upsert" as const),
        id: fc.integer({ min: 0, max: 7 }),
        secret: fc.string({ minLength: 1, maxLength: 3 }),
      }),
      fc.record({ kind: fc.constant("remove" as const), id: fc.integer({ min: 0, max: 7 }) }),
      fc.record({
        kind: fc.constant("replace" as const),
        ids: fc.uniqueArray(fc.integer({ min: 0, max: 7 }), { maxLength: 5 }),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), fc.integer({ min: 2, max: 30 }), (ops, maxLog) => {
        const c = new RouteSnapshotCache({ maxLogEntries: maxLog });
        const history: Array<{ version: string; table: Map<string, SessionRoute> }> = [];
        const record = () => history.push({ version: c.version(), table: new Map(c.snapshot().routes) });
        record();
        for (const o of ops) {
          if (o.kind === "upsert") c.upsert(route(`mc-${o.id}`, o.secret));
          else if (o.kind === "remove") c.remove(`mc-${o.id}`);
          else c.replaceAll(o.ids.map((i) => route(`mc-${i}`)));
          record();
        }
        const current = c.snapshot().routes;
        for (const h of history) {
          const changes = c.changesSince(h.version);
          if (changes === undefined) {
            expect(h.version).toBe(c.version());
            continue;
          }
          const table = changes.full ? new Map<string, SessionRoute>() : new Map(h.table);
          for (const r of changes.upserts) table.set(r.sessionId, r);
          for (const id of changes.removes) table.delete(id);
          expect([...table.keys()].sort()).toEqual([...current.keys()].sort());
          for (const [id, r] of table) expect(r).toBe(current.get(id));
          if (!changes.full)
            expect(changes.upserts.length + changes.removes.length).toBeLessThanOrEqual(current.size);
        }
      }),
    );
  });
});
