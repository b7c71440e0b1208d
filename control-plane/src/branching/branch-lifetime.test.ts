import { describe, expect, it } from "vitest";
import type { ClusterSession } from "../../../proto/api/v1alpha1/index.js";
import { decideLifetime, sessionsUsingBranch } from "./branch-lifetime.js";

const T0 = Date.parse("2026-11-23T12:00:00Z");
const iso = (ms: number) => new Date(ms).toISOString();

describe("decideLifetime", () => {
  it("gives a branch still being made no expiry", () => {
    expect(
      decideLifetime({
        now: T0,
        ttlSeconds: 300,
        phase: "Pending",
        expiresAt: undefined,
        sessions: ["s"],
        recordedSessions: [],
      }),
    ).toEqual({ expire: false });
  });

  it("keeps the expiry at least half a TTL ahead while a session uses the branch", () => {
    const fresh = decideLifetime({
      now: T0,
      ttlSeconds: 300,
      phase: "Ready",
      expiresAt: iso(T0 + 200_000),
      sessions: ["a"],
      recordedSessions: ["a"],
    });
    // 200 s left of 300: no write until less than 150 s remain.
    expect(fresh).toEqual({ expire: false, recheckMs: 50_000 });
    const due = decideLifetime({
      now: T0,
      ttlSeconds: 300,
      phase: "Ready",
      expiresAt: iso(T0 + 100_000),
      sessions: ["a"],
      recordedSessions: ["a"],
    });
    expect(due).toEqual({ expire: false, write: { expiresAt: iso(T0 + 300_000) }, recheckMs: 150_000 });
  });

  it("records which sessions use the branch when that changes", () => {
    const d = decideLifetime({
      now: T0,
      ttlSeconds: 60,
      phase: "Ready",
      expiresAt: iso(T0 + 60_000),
      sessions: ["a", "b"],
      recordedSessions: ["a"],
    });
    expect(d).toMatchObject({ expire: false, write: { sessions: ["a", "b"] } });
  });

  it("expires an unused branch at expiresAt, and not before", () => {
    const base = { ttlSeconds: 60, phase: "Ready" as const, sessions: [], recordedSessions: [] };
    expect(decideLifetime({ ...base, now: T0, expiresAt: iso(T0 + 5_000) })).toEqual({
      expire: false,
      recheckMs: 5_000,
    });
    expect(decideLifetime({ ...base, now: T0 + 5_000, expiresAt: iso(T0 + 5_000) })).toEqual({
      expire: true,
    });
    // A Failed branch goes the same way, so failures do not pile up.
    expect(decideLifetime({ ...base, phase: "Failed", now: T0 + 6_000, expiresAt: iso(T0 + 5_000) })).toEqual(
      {
        expire: true,
      },
    );
  });

  it("starts the clock of a Ready branch that has no expiry yet", () => {
    const d = decideLifetime({
      now: T0,
      ttlSeconds: 30,
      phase: "Ready",
      expiresAt: undefined,
      sessions: [],
      recordedSessions: [],
    });
    expect(d).toEqual({ expire: false, write: { expiresAt: iso(T0 + 30_000) }, recheckMs: 30_000 });
  });
});

describe("sessionsUsingBranch", () => {
  const session = (
    namespace: string,
    name: string,
    branches: Array<{ kind: string; name: string }>,
    deleting = false,
  ) =>
    ({
      metadata: { namespace, name, ...(deleting ? { deletionTimestamp: iso(T0) } : {}) },
      spec: {
        target: "deployment/x",
        connectParams: { databaseBranches: branches.map((b) => ({ envVar: "DATABASE_URL", ...b })) },
      },
    }) as unknown as ClusterSession;

  it("counts live sessions of the namespace naming the same kind and name", () => {
    const sessions = [
      session("dev", "b-session", [{ kind: "PgBranchDatabase", name: "shop" }]),
      session("dev", "a-session", [{ kind: "PgBranchDatabase", name: "shop" }]),
      session("dev", "other-kind", [{ kind: "MysqlBranchDatabase", name: "shop" }]),
      session("prod", "other-namespace", [{ kind: "PgBranchDatabase", name: "shop" }]),
      session("dev", "ending", [{ kind: "PgBranchDatabase", name: "shop" }], true),
      session("dev", "none", []),
    ];
    expect(sessionsUsingBranch(sessions, "dev", "PgBranchDatabase", "shop")).toEqual([
      "a-session",
      "b-session",
    ]);
  });
});
