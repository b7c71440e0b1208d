import { describe, expect, it } from "vitest";
import {
  BRANCH_SYNC_ANNOTATIONS,
  BRANCH_SYNC_LABELS,
  LABELS,
  type BranchDatabase,
} from "../../../../proto/api/v1alpha1/index.js";
import {
  SYNCED_CONDITION,
  conflictCondition,
  copyRecord,
  copySelector,
  desiredCopy,
  foreignCopyOwner,
  isCopy,
  mirroredStatus,
  recordedCopyUid,
  syncedOnlyStatus,
} from "./branch-sync-plan.js";

const UID = "0b7c4f7e-0000-4000-8000-000000000001";

function primary(over: Partial<BranchDatabase> = {}): BranchDatabase {
  return {
    apiVersion: "switchyard.dev/v1alpha1",
    kind: "PgBranchDatabase",
    metadata: { name: "orders", namespace: "shop", uid: UID, generation: 2, labels: { team: "a" } },
    spec: { target: "deployment/web", source: { fromEnv: { name: "DATABASE_URL" } }, ttlSeconds: 300 },
    ...over,
  } as BranchDatabase;
}

function copy(
  labels: Record<string, string>,
  status?: BranchDatabase["status"],
  generation = 1,
): BranchDatabase {
  return {
    ...primary(),
    metadata: { name: "orders", namespace: "shop", uid: "copy-uid", generation, labels },
    ...(status ? { status } : {}),
  } as BranchDatabase;
}

const ours = { [LABELS.primary]: "primary", [BRANCH_SYNC_LABELS.primaryUid]: UID };
const synced = { type: SYNCED_CONDITION, status: "True" as const, reason: "Copied", message: "copied" };
const t0 = new Date("2030-01-01T00:00:00Z");

describe("the copy", () => {
  it("has the Primary CR's namespace, name, labels and spec, plus the Primary's id and the CR's uid", () => {
    const c = desiredCopy(primary(), "primary");
    expect(c.metadata).toEqual({
      name: "orders",
      namespace: "shop",
      labels: { team: "a", [LABELS.primary]: "primary", [BRANCH_SYNC_LABELS.primaryUid]: UID },
    });
    expect(c.spec).toEqual(primary().spec);
    expect(isCopy(copy(c.metadata.labels!))).toBe(true);
    expect(isCopy(primary())).toBe(false);
    expect(copySelector("primary")).toBe(`${LABELS.primary}=primary,${BRANCH_SYNC_LABELS.primaryUid}`);
  });

  it("is ours only with both labels matching; anything else says whose it is", () => {
    expect(foreignCopyOwner(copy(ours), "primary", UID)).toBeUndefined();
    expect(foreignCopyOwner(copy({}), "primary", UID)).toMatch(/no Primary.*primary-uid/);
    expect(foreignCopyOwner(copy({ ...ours, [LABELS.primary]: "other" }), "primary", UID)).toBe(
      "Primary other",
    );
    expect(
      foreignCopyOwner(copy({ ...ours, [BRANCH_SYNC_LABELS.primaryUid]: "older" }), "primary", UID),
    ).toMatch(/another branch CR of this name \(uid older\)/);
  });

  it("is recorded per Default cluster: a record of another cluster is no record", () => {
    const recorded = primary({
      metadata: { ...primary().metadata, annotations: copyRecord("east", "copy-uid") },
    });
    expect(recordedCopyUid(recorded, "east")).toBe("copy-uid");
    expect(recordedCopyUid(recorded, "west")).toBeUndefined();
    expect(recordedCopyUid(primary(), "east")).toBeUndefined();
    expect(Object.keys(copyRecord("east", "u")).sort()).toEqual(
      [BRANCH_SYNC_ANNOTATIONS.copyCluster, BRANCH_SYNC_ANNOTATIONS.copyUid].sort(),
    );
  });
});

describe("status from the copy", () => {
  it("mirrors the copy's fields and conditions, adds Synced, and removes what the copy lacks", () => {
    const ready = {
      type: "Ready",
      status: "True" as const,
      reason: "Ready",
      message: "ready",
      lastTransitionTime: "2030-01-01T00:00:00Z",
    };
    const before = primary({ status: { phase: "Pending", sessions: ["s1"] } });
    const s = mirroredStatus(
      before,
      copy(ours, {
        phase: "Ready",
        branchName: "sy_orders_abc",
        secretName: "orders-pgbranch",
        expiresAt: "2030-01-01T00:05:00Z",
        conditions: [ready, { ...ready, type: SYNCED_CONDITION, message: "the copy's own, not ours" }],
      }),
      synced,
      t0,
    );
    expect(s).toMatchObject({
      phase: "Ready",
      branchName: "sy_orders_abc",
      secretName: "orders-pgbranch",
      expiresAt: "2030-01-01T00:05:00Z",
      sessions: null,
    });
    expect(s.conditions).toEqual([
      ready,
      { ...synced, lastTransitionTime: "2030-01-01T00:00:00Z", observedGeneration: 2 },
    ]);
  });

  it("shows Pending until the copy has a phase, and a phase override wins", () => {
    expect(mirroredStatus(primary(), copy(ours), synced, t0).phase).toBe("Pending");
    expect(
      mirroredStatus(primary(), copy(ours, { phase: "Ready" }), synced, t0, { phase: "Pending" }).phase,
    ).toBe("Pending");
  });

  it("keeps Synced's transition time while its status holds, and moves it when it changes", () => {
    const first = mirroredStatus(primary(), copy(ours), synced, t0);
    const withFirst = primary({ status: first as BranchDatabase["status"] });
    const later = new Date("2030-01-01T01:00:00Z");
    const same = mirroredStatus(withFirst, copy(ours), { ...synced, message: "again" }, later);
    expect((same.conditions as { lastTransitionTime: string }[])[0]!.lastTransitionTime).toBe(
      "2030-01-01T00:00:00Z",
    );
    const failed = syncedOnlyStatus(
      withFirst,
      { ...synced, status: "False", reason: "Conflict" },
      later,
      "Failed",
    );
    expect(failed.phase).toBe("Failed");
    expect((failed.conditions as { lastTransitionTime: string }[])[0]!.lastTransitionTime).toBe(
      "2030-01-01T01:00:00Z",
    );
  });

  it("sets observedGeneration to the Primary's generation only once the copy's status describes its spec", () => {
    expect(
      mirroredStatus(primary(), copy(ours, { observedGeneration: 1 }, 2), synced, t0),
    ).not.toHaveProperty("observedGeneration");
    expect(
      mirroredStatus(primary(), copy(ours, { observedGeneration: 2 }, 2), synced, t0).observedGeneration,
    ).toBe(2);
  });
});

it("a Conflict names the object, the Default cluster, whose it is and the fix", () => {
  const c = conflictCondition("PgBranchDatabase", primary(), "east", "no Primary");
  expect(c).toMatchObject({ type: SYNCED_CONDITION, status: "False", reason: "Conflict" });
  expect(c.message).toContain("PgBranchDatabase shop/orders already exists on the Default cluster east");
  expect(c.message).toContain("kubectl -n shop delete pgbranchdatabase orders");
  expect(c.message).toContain("left untouched");
});
