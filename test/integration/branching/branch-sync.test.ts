// The branch sync controller (Primary ≠ Default) against two real API servers: a
// management-only Primary and east, its Default cluster. The controller runs as the identities
// the chart gives it: on the Primary as the control plane's ServiceAccount (control-plane-rbac.yaml's
// branch and session-Secret rules), on east as the Primary's member identity (member-rbac.yaml's
// branch sync rules). The branching controller that runs on the Default is played by this test:
// it writes the copy's credentials Secret (owned by the copy) and its status with east's admin
// client. The Default cluster is handed to the controller through a WorkloadClusters whose
// client the test can take away or replace, as the cluster registry does when credentials
// break or are renewed.
import { randomBytes } from "node:crypto";
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig, type V1Secret } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  API_VERSION,
  BRANCH_SECRET_LABEL,
  BRANCH_SECRET_TYPE,
  BRANCH_SYNC_ANNOTATIONS,
  BRANCH_SYNC_FINALIZER,
  BRANCH_SYNC_LABELS,
  LABELS,
  branchSecretData,
  branchSecretName,
  mysqlBranchDatabaseClient,
  pgBranchDatabaseClient,
  type BranchDatabase,
  type BranchDatabaseStatus,
  type BranchKind,
} from "../../../proto/api/v1alpha1/index.js";
import { BranchSyncController } from "../../../control-plane/src/branching/sync/branch-sync-controller.js";
import { desiredCopy } from "../../../control-plane/src/branching/sync/branch-sync-plan.js";
import type { WorkloadClusters } from "../../../control-plane/src/primary/workload-clusters.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { ensureNamespace } from "../control-plane/remote-fixtures.js";
import { eventually } from "../../support/poll.js";
import { sleep } from "../../../lib/abortable-sleep.js";

const NS = "shop";
const CONTROL_PLANE_SA = { namespace: "switchyard", name: "switchyard-control-plane" };
const PRIMARY_GROUP = "switchyard-primaries";
const SPEC = { target: "deployment/web", source: { fromEnv: { name: "DATABASE_URL" } }, ttlSeconds: 300 };
const clientOf = (kind: BranchKind, kc: KubeConfig) =>
  kind === "PgBranchDatabase" ? pgBranchDatabaseClient(kc) : mysqlBranchDatabaseClient(kc);

let set: ClusterSet;
let admin: { primary: KubeConfig; east: KubeConfig };
/** The Primary's own ServiceAccount, on the Primary. */
let asControlPlane: KubeConfig;
/** The identity the Primary uses on east; undefined = no usable client. */
let eastClient: KubeConfig | undefined;
let mintEastClient: () => Promise<KubeConfig>;
const clusters: WorkloadClusters = {
  topology: () => ({ primaryClusterId: "primary", clusters: [{ name: "east", isDefault: true }] }),
  kubeConfig: (c) => (c === "east" ? eastClient : undefined),
};

let controller: BranchSyncController;
let stop: AbortController | undefined;
let running: Promise<void> | undefined;
let runError: unknown;

function startController(): void {
  controller = new BranchSyncController({
    primaryKubeConfig: asControlPlane,
    clusters,
    resyncMs: 1_000,
    topologyCheckMs: 200,
    requestTimeoutMs: 2_000,
    recheckMs: 300,
  });
  stop = new AbortController();
  running = controller.start(stop.signal).catch((err: unknown) => {
    runError = err;
  });
}

async function stopController(): Promise<void> {
  stop?.abort();
  await running;
}

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary", "east"], controllerManager: false });
  admin = { primary: set.get("primary").kubeConfig(), east: set.get("east").kubeConfig() };
  await Promise.all([installCrds(admin.primary), installCrds(admin.east)]);
  for (const kc of [admin.primary, admin.east]) await ensureNamespace(kc, NS);

  // What control-plane-rbac.yaml grants the Primary's ServiceAccount for branches.
  const primaryRbac = admin.primary.makeApiClient(RbacAuthorizationV1Api);
  const kinds = ["pgbranchdatabases", "mysqlbranchdatabases"];
  await primaryRbac.createClusterRole({
    body: {
      metadata: { name: "test-branch-sync-control-plane" },
      rules: [
        {
          apiGroups: ["switchyard.dev"],
          resources: kinds,
          verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
        {
          apiGroups: ["switchyard.dev"],
          resources: kinds.map((k) => `${k}/status`),
          verbs: ["get", "update", "patch"],
        },
        { apiGroups: ["switchyard.dev"], resources: kinds.map((k) => `${k}/finalizers`), verbs: ["update"] },
        { apiGroups: [""], resources: ["secrets"], verbs: ["get", "create", "update", "patch", "delete"] },
      ],
    },
  });
  await primaryRbac.createClusterRoleBinding({
    body: {
      metadata: { name: "test-branch-sync-control-plane" },
      roleRef: {
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: "test-branch-sync-control-plane",
      },
      subjects: [{ kind: "ServiceAccount", ...CONTROL_PLANE_SA }],
    },
  });
  const sa = await set
    .get("primary")
    .mintUser(`system:serviceaccount:${CONTROL_PLANE_SA.namespace}:${CONTROL_PLANE_SA.name}`);
  asControlPlane = sa.kubeConfig();

  // What member-rbac.yaml grants the Primary's identity on a workload cluster for the branch sync:
  // the branch kinds (not their status) and Secrets by name.
  const eastRbac = admin.east.makeApiClient(RbacAuthorizationV1Api);
  await eastRbac.createClusterRole({
    body: {
      metadata: { name: "test-branch-sync-member" },
      rules: [
        {
          apiGroups: ["switchyard.dev"],
          resources: kinds,
          verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
        { apiGroups: [""], resources: ["secrets"], verbs: ["get"] },
      ],
    },
  });
  await eastRbac.createClusterRoleBinding({
    body: {
      metadata: { name: "test-branch-sync-member" },
      roleRef: {
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: "test-branch-sync-member",
      },
      subjects: [{ kind: "Group", name: PRIMARY_GROUP, apiGroup: "rbac.authorization.k8s.io" }],
    },
  });
  mintEastClient = async () =>
    (await set.get("east").mintUser("switchyard-primary", [PRIMARY_GROUP])).kubeConfig();
  eastClient = await mintEastClient();
  startController();
}, 180_000);

afterEach(() => {
  // However a test went, the controller never gave up.
  expect(runError).toBeUndefined();
});

afterAll(async () => {
  await stopController();
  await set?.stop();
}, 60_000);

const name = (prefix: string) => `${prefix}-${randomBytes(3).toString("hex")}`;
const ref = (n: string) => ({ namespace: NS, name: n });
const onPrimary = (kind: BranchKind) => clientOf(kind, admin.primary);
const onEast = (kind: BranchKind) => clientOf(kind, admin.east);

async function createBranch(kind: BranchKind, n: string, spec = SPEC): Promise<BranchDatabase> {
  return onPrimary(kind).create({ metadata: { name: n, namespace: NS }, spec });
}

/** The copy on east once the Primary's CR has recorded it. */
async function recordedCopy(kind: BranchKind, n: string): Promise<BranchDatabase> {
  return eventually(`copy of ${kind} ${n} recorded`, async () => {
    const [p, c] = await Promise.all([onPrimary(kind).get(ref(n)), onEast(kind).get(ref(n))]);
    const uid = p?.metadata.annotations?.[BRANCH_SYNC_ANNOTATIONS.copyUid];
    return c && uid === c.metadata.uid ? c : undefined;
  });
}

async function readSecret(kc: KubeConfig, n: string): Promise<V1Secret | undefined> {
  try {
    return await kc.makeApiClient(CoreV1Api).readNamespacedSecret({ namespace: NS, name: n });
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

const credentials = (password: string) => ({
  host: "pg.db.svc",
  port: "5432",
  database: "sy_orders_abcdefabcdef",
  user: "sy_orders_abcdefabcdef",
  password,
  url: `postgres://sy_orders_abcdefabcdef:${password}@pg.db.svc:5432/sy_orders_abcdefabcdef`,
});

/**
 * The branching controller's part, played here: the credentials Secret beside the copy (owned
 * by it), then status Ready naming it.
 */
async function provisionOnEast(kind: BranchKind, copy: BranchDatabase): Promise<string> {
  const secretName = branchSecretName(kind, copy.metadata.name!);
  await admin.east.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: NS,
    body: {
      metadata: {
        name: secretName,
        labels: { [BRANCH_SECRET_LABEL]: `${kind.toLowerCase()}.${copy.metadata.name}` },
        ownerReferences: [
          {
            apiVersion: API_VERSION,
            kind,
            name: copy.metadata.name!,
            uid: copy.metadata.uid!,
            controller: true,
          },
        ],
      },
      type: BRANCH_SECRET_TYPE,
      data: branchSecretData(credentials("first-password")),
    },
  });
  await onEast(kind).patchStatus(ref(copy.metadata.name!), readyStatus(copy, secretName));
  return secretName;
}

function readyStatus(copy: BranchDatabase, secretName: string): BranchDatabaseStatus {
  return {
    phase: "Ready",
    branchName: "sy_orders_abcdefabcdef",
    secretName,
    expiresAt: "2030-01-01T00:05:00Z",
    sessions: ["mc-0123456789abcdef"],
    conditions: [
      {
        type: "Ready",
        status: "True",
        reason: "BranchReady",
        message: "branch made by template copy",
        lastTransitionTime: "2030-01-01T00:00:00Z",
      },
    ],
    observedGeneration: copy.metadata.generation ?? 1,
  };
}

const synced = (b: BranchDatabase | undefined) => b?.status?.conditions?.find((c) => c.type === "Synced");

describe("copy", () => {
  it.each(["PgBranchDatabase", "MysqlBranchDatabase"] as const)(
    "a new %s gets a copy on the Default with its spec and our labels, and the Primary's CR our finalizer",
    async (kind) => {
      const n = name("new");
      const primary = await createBranch(kind, n);
      const copy = await recordedCopy(kind, n);
      expect(copy.spec).toEqual(primary.spec);
      expect(copy.metadata.labels).toMatchObject({
        [LABELS.primary]: "primary",
        [BRANCH_SYNC_LABELS.primaryUid]: primary.metadata.uid,
      });
      const after = await eventually("Pending and Synced", async () => {
        const p = await onPrimary(kind).get(ref(n));
        return p?.status?.phase === "Pending" && synced(p)?.status === "True" ? p : undefined;
      });
      expect(after.metadata.finalizers).toContain(BRANCH_SYNC_FINALIZER);
      expect(after.metadata.annotations?.[BRANCH_SYNC_ANNOTATIONS.copyCluster]).toBe("east");
      expect(synced(after)).toMatchObject({ reason: "Copied" });
      expect(controller.metrics.value(kind, "created")).toBeGreaterThanOrEqual(1);
    },
  );

  it("status and the credentials Secret come back to the Primary at once, and follow later changes", async () => {
    const kind = "PgBranchDatabase";
    const n = name("ready");
    const primary = await createBranch(kind, n);
    const copy = await recordedCopy(kind, n);
    const secretName = await provisionOnEast(kind, copy);
    const ready = await eventually(
      "Primary Ready",
      async () => {
        const p = await onPrimary(kind).get(ref(n));
        return p?.status?.phase === "Ready" ? p : undefined;
      },
      { intervalMs: 5 },
    );
    // How soon it comes back is the branching bench's goal (bench/branching), not this test's.
    const status = readyStatus(copy, secretName);
    expect(ready.status).toMatchObject({
      branchName: status.branchName,
      secretName,
      expiresAt: status.expiresAt,
      sessions: status.sessions,
      observedGeneration: primary.metadata.generation,
    });
    expect(ready.status?.conditions?.map((c) => `${c.type}=${c.status}`)).toEqual([
      "Ready=True",
      "Synced=True",
    ]);
    const secret = await readSecret(admin.primary, secretName);
    expect(secret?.type).toBe(BRANCH_SECRET_TYPE);
    expect(secret?.data).toEqual(branchSecretData(credentials("first-password")));
    expect(secret?.metadata?.labels?.[BRANCH_SECRET_LABEL]).toBe(`pgbranchdatabase.${n}`);
    expect(secret?.metadata?.ownerReferences).toEqual([
      { apiVersion: API_VERSION, kind, name: n, uid: primary.metadata.uid, controller: true },
    ]);
    const histogram = await controller.metrics.registry.getSingleMetricAsString(
      "switchyard_branch_ready_seconds",
    );
    expect(histogram).toMatch(/switchyard_branch_ready_seconds_count\{kind="PgBranchDatabase"\} [1-9]/);

    // The Secret changes on the Default with no status change: picked up by the next resync.
    const core = admin.east.makeApiClient(CoreV1Api);
    const onDefault = await core.readNamespacedSecret({ namespace: NS, name: secretName });
    await core.replaceNamespacedSecret({
      namespace: NS,
      name: secretName,
      body: { ...onDefault, data: branchSecretData(credentials("second-password")) },
    });
    await eventually("rotated Secret on the Primary", async () => {
      const s = await readSecret(admin.primary, secretName);
      return s?.data?.password === Buffer.from("second-password").toString("base64");
    });
    // A field the copy drops is dropped on the Primary too.
    await onEast(kind).patchStatus(ref(n), { sessions: null } as unknown as Partial<BranchDatabaseStatus>);
    await eventually("sessions dropped", async () => {
      const p = await onPrimary(kind).get(ref(n));
      return p?.status?.phase === "Ready" && p.status.sessions === undefined;
    });
  });

  it("an edit of ttlSeconds on the Primary reaches the copy", async () => {
    const kind = "MysqlBranchDatabase";
    const n = name("ttl");
    await createBranch(kind, n);
    await recordedCopy(kind, n);
    await onPrimary(kind).patch(ref(n), { spec: { ttlSeconds: 900 } });
    await eventually(
      "copy ttlSeconds 900",
      async () => (await onEast(kind).get(ref(n)))?.spec.ttlSeconds === 900,
    );
    expect(controller.metrics.value(kind, "updated")).toBeGreaterThanOrEqual(1);
  });
});

describe("deletion", () => {
  it("deleting the Primary's CR deletes the copy first, then the mirrored Secret and the finalizer", async () => {
    const kind = "PgBranchDatabase";
    const n = name("del");
    await createBranch(kind, n);
    const copy = await recordedCopy(kind, n);
    const secretName = await provisionOnEast(kind, copy);
    await eventually("Secret mirrored", () => readSecret(admin.primary, secretName));
    // The branching controller holds its copy while it drops the database.
    await onEast(kind).patch(ref(n), { metadata: { finalizers: ["test.switchyard.dev/drop-database"] } });
    await onPrimary(kind).delete(ref(n));
    await eventually(
      "copy being deleted",
      async () => (await onEast(kind).get(ref(n)))?.metadata.deletionTimestamp,
    );
    const waiting = await eventually("Primary waiting for its copy", async () => {
      const p = await onPrimary(kind).get(ref(n));
      return synced(p)?.reason === "DeletingCopy" ? p : undefined;
    });
    expect(waiting.metadata.finalizers).toContain(BRANCH_SYNC_FINALIZER);
    expect(await readSecret(admin.primary, secretName)).toBeDefined();
    await onEast(kind).patch(ref(n), { metadata: { finalizers: [] } });
    await eventually("copy gone", async () => !(await onEast(kind).get(ref(n))));
    await eventually("Primary CR gone", async () => !(await onPrimary(kind).get(ref(n))));
    expect(await readSecret(admin.primary, secretName)).toBeUndefined();
    expect(controller.metrics.value(kind, "copy_deleted")).toBeGreaterThanOrEqual(1);
  });

  it("a copy deleted on the Default (its TTL lapsed there) deletes the Primary's CR and its Secret", async () => {
    const kind = "MysqlBranchDatabase";
    const n = name("expired");
    await createBranch(kind, n);
    const copy = await recordedCopy(kind, n);
    const secretName = await provisionOnEast(kind, copy);
    await eventually("Secret mirrored", () => readSecret(admin.primary, secretName));
    await onEast(kind).delete(ref(n));
    await eventually("Primary CR gone", async () => !(await onPrimary(kind).get(ref(n))));
    expect(await readSecret(admin.primary, secretName)).toBeUndefined();
    expect(await onEast(kind).get(ref(n))).toBeUndefined();
    expect(controller.metrics.value(kind, "primary_deleted")).toBeGreaterThanOrEqual(1);
  });
});

describe("ownership", () => {
  it("a foreign CR of that name on the Default gives Conflict and is never touched; once it is gone the sync proceeds", async () => {
    const kind = "PgBranchDatabase";
    const n = name("taken");
    const foreign = await onEast(kind).create({
      metadata: { name: n, namespace: NS, labels: { owner: "someone-else" } },
      spec: { ...SPEC, ttlSeconds: 600 },
    });
    const primary = await createBranch(kind, n);
    const failed = await eventually("Conflict", async () => {
      const p = await onPrimary(kind).get(ref(n));
      return synced(p)?.reason === "Conflict" ? p : undefined;
    });
    expect(failed.status?.phase).toBe("Failed");
    expect(synced(failed)).toMatchObject({ status: "False" });
    expect(synced(failed)?.message).toContain(
      `PgBranchDatabase ${NS}/${n} already exists on the Default cluster east`,
    );
    expect(synced(failed)?.message).toContain(`kubectl -n ${NS} delete pgbranchdatabase ${n}`);
    // Several rechecks later the foreign object is exactly as it was.
    await sleep(1_500);
    const untouched = await onEast(kind).get(ref(n));
    expect(untouched?.metadata.resourceVersion).toBe(foreign.metadata.resourceVersion);
    expect(untouched?.metadata.finalizers).toBeUndefined();
    expect(controller.metrics.value(kind, "conflict")).toBeGreaterThanOrEqual(1);

    await onEast(kind).delete(ref(n));
    const copy = await recordedCopy(kind, n);
    expect(copy.metadata.labels?.[BRANCH_SYNC_LABELS.primaryUid]).toBe(primary.metadata.uid);
    expect(copy.spec.ttlSeconds).toBe(300);
    await eventually("Synced again", async () => {
      const p = await onPrimary(kind).get(ref(n));
      return p?.status?.phase === "Pending" && synced(p)?.status === "True";
    });
  });
});

describe("restarts and outages", () => {
  it("a copy made just before a restart (not recorded on the Primary yet) is recognised and used, not duplicated", async () => {
    const kind = "PgBranchDatabase";
    const n = name("restart");
    await stopController();
    const primary = await createBranch(kind, n);
    // Where the previous leader stopped: the copy exists on east, nothing recorded on the Primary.
    const made = await clientOf(kind, eastClient!).create(desiredCopy(primary, "primary"));
    startController();
    const copy = await recordedCopy(kind, n);
    expect(copy.metadata.uid).toBe(made.metadata.uid);
    const all = await onEast(kind).list({
      namespace: NS,
      labelSelector: `${BRANCH_SYNC_LABELS.primaryUid}=${primary.metadata.uid}`,
    });
    expect(all.items.map((c) => c.metadata.uid)).toEqual([made.metadata.uid]);
    expect(controller.metrics.value(kind, "created")).toBe(0);
  });

  it("a Default with no client is reported in Synced and the branch is copied as soon as it has one", async () => {
    const kind = "MysqlBranchDatabase";
    const n = name("noclient");
    eastClient = undefined;
    await createBranch(kind, n);
    const reported = await eventually("unreachable reported", async () => {
      const p = await onPrimary(kind).get(ref(n));
      return synced(p)?.reason === "DefaultClusterUnreachable" ? p : undefined;
    });
    expect(synced(reported)?.message).toContain("the Default cluster east has no usable client");
    expect(reported.status?.phase).toBe("Pending");
    expect(await onEast(kind).get(ref(n))).toBeUndefined();
    // New credentials: a new client, which the controller picks up on its next topology check.
    eastClient = await mintEastClient();
    await recordedCopy(kind, n);
    expect(controller.metrics.value(kind, "unreachable")).toBeGreaterThanOrEqual(1);
  });

  it("a Default that does not answer keeps a deleted branch (saying so) until it answers, then finishes", async () => {
    const kind = "PgBranchDatabase";
    const east = set.get("east");
    const gone = name("outage");
    await createBranch(kind, gone);
    await recordedCopy(kind, gone);
    await east.stopApiServer();
    try {
      await onPrimary(kind).delete(ref(gone));
      const fresh = name("during");
      await createBranch(kind, fresh);
      const stuck = await eventually("deletion blocked, said so", async () => {
        const p = await onPrimary(kind).get(ref(gone));
        return synced(p)?.reason === "DefaultClusterUnreachable" ? p : undefined;
      });
      expect(synced(stuck)?.message).toContain(
        "the branch stays until its copy on the Default cluster is deleted",
      );
      expect(stuck.metadata.finalizers).toContain(BRANCH_SYNC_FINALIZER);
      await eventually("new branch waits, said so", async () => {
        const p = await onPrimary(kind).get(ref(fresh));
        return synced(p)?.reason === "DefaultClusterUnreachable" && p?.status?.phase === "Pending";
      });
      await east.startApiServer();
      await eventually("deleted branch and its copy gone", async () => {
        const [p, c] = await Promise.all([onPrimary(kind).get(ref(gone)), onEast(kind).get(ref(gone))]);
        return !p && !c;
      });
      await recordedCopy(kind, fresh);
    } finally {
      if (!east.isApiServerRunning()) await east.startApiServer();
    }
  });
});
