// The Switchyard CRDs against a real kube-apiserver: they install and become
// Established; valid objects are accepted (with defaults); invalid specs are refused by
// the API server itself, naming the field; the status subresource separates spec from
// status; printer columns (Table API), short names and categories (discovery) work.
import { request } from "node:https";
import { ApiException, ApiextensionsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  API_VERSION,
  CRD_KINDS,
  clusterSessionClient,
  crdManifests,
  GROUP,
  multiClusterSessionClient,
  switchyardOperatorClient,
  type ClusterSession,
  type MultiClusterSession,
  type SwitchyardOperator,
  VERSION,
} from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { eventually } from "../../support/poll.js";
import { condition, refused } from "./crd-writes.js";

const NS = "crd-tests";
const HASH = "0123456789abcdef".repeat(4);
const PARENT = "mc-0123456789abcdef";
let set: ClusterSet;
let kc: KubeConfig;
let counter = 0;

/** A fresh parent name per test, so tests never collide. */
function parentName(): string {
  counter += 1;
  return `mc-${counter.toString(16).padStart(16, "0")}`;
}

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary"], controllerManager: false });
  kc = set.get("primary").kubeConfig();
  await installCrds(kc);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
});

afterAll(async () => {
  await set?.stop();
});

function rawGet(path: string, accept: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, kc.getCurrentCluster()!.server);
    const options = { method: "GET", headers: { Accept: accept } } as Parameters<typeof request>[1];
    kc.applyToHTTPSOptions(options).then(() => {
      const req = request(url, options, (res) => {
        let data = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (data += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(data) }));
      });
      req.on("error", reject);
      req.end();
    }, reject);
  });
}

const validParent = (name: string) => ({
  metadata: { name, namespace: NS },
  spec: { target: "deployment/myapp/container/app", clientKeyHash: HASH },
});

const validChild = (parent: string, cluster: string) => ({
  metadata: { name: `${parent}-${cluster}`, namespace: NS },
  spec: {
    target: "deployment/myapp",
    clientKeyHash: HASH,
    parent: { name: parent, cluster, primaryClusterId: "primary" },
    connectParams: {
      databaseBranches: [{ envVar: "DATABASE_URL", kind: "PgBranchDatabase" as const, name: "branch-1" }],
      sqsSplit: [{ queueId: "orders.fifo", messageFilter: { tenant: "^dev-.*$" }, mode: "steal" as const }],
      outputQueues: { east: { "orders.fifo": "https://sqs.eu-west-1.amazonaws.com/1/tmp-orders.fifo" } },
      featureFlags: { layerReconnect: true },
    },
  },
});

describe("installation", () => {
  it("installs every CRD and each is Established with its names accepted", async () => {
    const api = kc.makeApiClient(ApiextensionsV1Api);
    for (const kind of CRD_KINDS) {
      const crd = await api.readCustomResourceDefinition({ name: crdManifests[kind].metadata.name });
      const conditions = Object.fromEntries((crd.status?.conditions ?? []).map((c) => [c.type, c.status]));
      expect(conditions, kind).toMatchObject({ Established: "True", NamesAccepted: "True" });
      // The stored CRD is exactly the manifest: no client dropped a CEL rule or a default.
      const raw = await rawGet(
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata!.name}`,
        "application/json",
      );
      const stored = (raw.body as { spec: { versions: unknown[]; names: unknown } }).spec;
      const manifest = crdManifests[kind].spec as { versions: unknown[]; names: unknown };
      expect(stored.versions, kind).toEqual(manifest.versions);
      expect(stored.names, kind).toEqual(manifest.names);
    }
  });

  it("serves the kind as soon as installCrds resolves (waits for Established)", async () => {
    // Runs before any SwitchyardOperator exists: remove the CRD, wait until it is gone,
    // reinstall, and use the kind at once — a 404 here means installCrds returned early.
    const api = kc.makeApiClient(ApiextensionsV1Api);
    const name = crdManifests.SwitchyardOperator.metadata.name;
    await api.deleteCustomResourceDefinition({ name });
    await eventually(`CRD ${name} to be deleted`, () =>
      api.readCustomResourceDefinition({ name }).then(
        () => false,
        (e: unknown) => e instanceof ApiException && e.code === 404,
      ),
    );
    await installCrds(kc, ["SwitchyardOperator"]);
    const listed = await switchyardOperatorClient(kc).list();
    expect(listed.items).toEqual([]);
    expect(listed.resourceVersion).not.toBe("");
  });

  it("is idempotent: installing again succeeds and changes nothing", async () => {
    const api = kc.makeApiClient(ApiextensionsV1Api);
    const name = crdManifests.ClusterSession.metadata.name;
    const before = await api.readCustomResourceDefinition({ name });
    await installCrds(kc, ["ClusterSession"]);
    const after = await api.readCustomResourceDefinition({ name });
    expect(after.metadata?.generation).toBe(before.metadata?.generation);
  });

  it("refuses an unknown kind with a stable code", async () => {
    await expect(installCrds(kc, ["Nope" as never])).rejects.toMatchObject({
      code: "SWITCHYARD_CRD_UNKNOWN_KIND",
    });
  });
});

describe("valid objects", () => {
  it("accepts a MultiClusterSession and applies the defaults", async () => {
    const created = await multiClusterSessionClient(kc).create(validParent(parentName()));
    expect(created.apiVersion).toBe(API_VERSION);
    expect(created.spec.ttlSeconds).toBe(60);
    expect(created.spec.failurePolicy).toBe("AllOrNothing");
  });

  it("accepts a child ClusterSession with full connect params, and lists it by label", async () => {
    const client = clusterSessionClient(kc);
    const parent = parentName();
    const obj = validChild(parent, "east");
    await client.create({
      ...obj,
      metadata: { ...obj.metadata, labels: { "switchyard.dev/parent": parent } },
    });
    const listed = await client.list({ namespace: NS, labelSelector: `switchyard.dev/parent=${parent}` });
    expect(listed.items.map((i) => i.metadata.name)).toEqual([`${parent}-east`]);
    expect(listed.items[0]!.spec.connectParams).toEqual(obj.spec.connectParams);
    expect(listed.items[0]!.spec.ttlSeconds).toBe(60);
  });

  it("accepts a single-cluster ClusterSession with any valid name", async () => {
    const created = await clusterSessionClient(kc).create({
      metadata: { name: "single-session", namespace: NS },
      spec: { target: "pod/web-0", clientKeyHash: HASH, ttlSeconds: 3600 },
    });
    expect(created.spec.parent).toBeUndefined();
  });

  it("accepts the SwitchyardOperator singleton and reads it back typed", async () => {
    const client = switchyardOperatorClient(kc);
    await client.create({
      metadata: { name: "operator" },
      spec: {
        clusterName: "primary",
        defaultCluster: "east",
        managementOnly: true,
        multiCluster: true,
        clusters: [
          { name: "east", server: "https://127.0.0.1:6443", authType: "bearerToken" },
          { name: "west", server: "https://west.example:443", authType: "eks" },
        ],
        allowList: { namespaces: ["dev", "staging"], targetKinds: ["deployment"] },
      },
    });
    const got = (await client.get({ name: "operator" })) as SwitchyardOperator;
    expect(got.spec.clusters?.map((c) => c.authType)).toEqual(["bearerToken", "eks"]);
    expect(await client.get({ name: "absent" })).toBeUndefined();
  });
});

type Case = [what: string, write: () => Promise<unknown>, field: string | RegExp];

const mcs = () => multiClusterSessionClient(kc);
const cs = () => clusterSessionClient(kc);
const op = () => switchyardOperatorClient(kc);
const parentWith = (spec: Record<string, unknown>) => {
  const p = validParent(parentName());
  return mcs().create({ ...p, spec: { ...p.spec, ...spec } as MultiClusterSession["spec"] });
};
const parentWithout = (field: "target" | "clientKeyHash") => {
  const p = validParent(parentName());
  const spec: Record<string, unknown> = { ...p.spec };
  delete spec[field];
  return mcs().create({ ...p, spec: spec as MultiClusterSession["spec"] });
};
const childWith = (spec: Record<string, unknown>, name?: string) => {
  const c = validChild(parentName(), "east");
  return cs().create({
    metadata: { ...c.metadata, name: name ?? c.metadata.name },
    spec: { ...c.spec, ...spec } as ClusterSession["spec"],
  });
};
const operatorWith = (spec: Record<string, unknown>, name = "operator") =>
  op().create({
    metadata: { name },
    spec: { clusterName: "primary", ...spec } as SwitchyardOperator["spec"],
  });

describe("invalid specs are refused by the API server, naming the field", () => {
  it.each<Case>([
    ["target of an unknown kind", () => parentWith({ target: "service/myapp" }), "spec.target"],
    ["target without a name", () => parentWith({ target: "deployment/" }), "spec.target"],
    ["target with an uppercase name", () => parentWith({ target: "deployment/MyApp" }), "spec.target"],
    ["target with a bad container part", () => parentWith({ target: "pod/a/sidecar/b" }), "spec.target"],
    ["hash that is not sha256 hex", () => parentWith({ clientKeyHash: "xyz" }), "spec.clientKeyHash"],
    ["hash in uppercase hex", () => parentWith({ clientKeyHash: HASH.toUpperCase() }), "spec.clientKeyHash"],
    ["ttlSeconds below the minimum", () => parentWith({ ttlSeconds: 0 }), "spec.ttlSeconds"],
    ["ttlSeconds above the maximum", () => parentWith({ ttlSeconds: 3601 }), "spec.ttlSeconds"],
    ["unknown failurePolicy", () => parentWith({ failurePolicy: "Sometimes" }), "spec.failurePolicy"],
    ["missing target", () => parentWithout("target"), "spec.target"],
    ["missing clientKeyHash", () => parentWithout("clientKeyHash"), "spec.clientKeyHash"],
    [
      "missing spec",
      () => mcs().create({ metadata: { name: parentName(), namespace: NS } } as never),
      "spec",
    ],
    [
      "parent not named mc-<16 hex>",
      () => mcs().create({ ...validParent("session-1") }),
      /metadata\.name must be mc-<16 lowercase hex digits>/,
    ],
    [
      "bad cluster name in outputQueues",
      () => parentWith({ connectParams: { outputQueues: { East_1: {} } } }),
      "spec.connectParams.outputQueues",
    ],
    [
      "duplicate database branch env var",
      () =>
        parentWith({
          connectParams: {
            databaseBranches: [
              { envVar: "DATABASE_URL", kind: "PgBranchDatabase", name: "a" },
              { envVar: "DATABASE_URL", kind: "MysqlBranchDatabase", name: "b" },
            ],
          },
        }),
      "spec.connectParams.databaseBranches[1]",
    ],
    [
      "unknown branch kind",
      () =>
        parentWith({
          connectParams: { databaseBranches: [{ envVar: "DB", kind: "RedisBranch", name: "a" }] },
        }),
      "spec.connectParams.databaseBranches[0].kind",
    ],
    [
      "SQS split with an empty filter",
      () => parentWith({ connectParams: { sqsSplit: [{ queueId: "orders", messageFilter: {} }] } }),
      "spec.connectParams.sqsSplit[0].messageFilter",
    ],
    [
      "child with a bad cluster name",
      () => childWith({ parent: { name: PARENT, cluster: "East_1", primaryClusterId: "primary" } }, "x"),
      "spec.parent.cluster",
    ],
    [
      "child with a bad parent name",
      () => childWith({ parent: { name: "session-1", cluster: "east", primaryClusterId: "primary" } }, "x"),
      "spec.parent.name",
    ],
    [
      "child not named <parent>-<cluster>",
      () =>
        childWith(
          { parent: { name: PARENT, cluster: "east", primaryClusterId: "primary" } },
          `${PARENT}-west`,
        ),
      /must be named <spec.parent.name>-<spec.parent.cluster>/,
    ],
    ["child ttlSeconds out of range", () => childWith({ ttlSeconds: 86400 }), "spec.ttlSeconds"],
    ["operator with a bad cluster name", () => operatorWith({ clusterName: "Primary" }), "spec.clusterName"],
    [
      "operator with a bad remote cluster name",
      () => operatorWith({ clusters: [{ name: "east_1", server: "https://e", authType: "mtls" }] }),
      "spec.clusters[0].name",
    ],
    [
      "operator with an unknown authType",
      () => operatorWith({ clusters: [{ name: "east", server: "https://e", authType: "password" }] }),
      "spec.clusters[0].authType",
    ],
    [
      "operator remote cluster without authType",
      () => operatorWith({ clusters: [{ name: "east", server: "https://e" }] }),
      "spec.clusters[0].authType",
    ],
    [
      "managementOnly without a defaultCluster",
      () => operatorWith({ managementOnly: true }),
      "spec.defaultCluster",
    ],
    [
      "managementOnly with itself as default",
      () => operatorWith({ managementOnly: true, defaultCluster: "primary" }),
      "spec.defaultCluster",
    ],
    [
      "defaultCluster not configured",
      () => operatorWith({ defaultCluster: "nowhere" }),
      "spec.defaultCluster",
    ],
    ["a second operator object", () => operatorWith({}, "operator-2"), /singleton/],
  ])("%s", async (_what, write, field) => {
    const { message, fields } = await refused(write());
    if (typeof field === "string") expect(fields).toContain(field);
    else expect(message).toMatch(field);
  });

  it("makes target and clientKeyHash immutable", async () => {
    const name = parentName();
    await mcs().create(validParent(name));
    const target = await refused(
      mcs().patch({ name, namespace: NS }, { spec: { target: "deployment/other" } }),
    );
    expect(target.fields).toContain("spec.target");
    const hash = await refused(
      mcs().patch({ name, namespace: NS }, { spec: { clientKeyHash: "f".repeat(64) } }),
    );
    expect(hash.fields).toContain("spec.clientKeyHash");
    // Mutable fields still change.
    const patched = await mcs().patch({ name, namespace: NS }, { spec: { ttlSeconds: 120 } });
    expect(patched.spec.ttlSeconds).toBe(120);
  });
});

describe("status subresource", () => {
  it("a spec update does not change status, a status update does not change spec", async () => {
    const name = parentName();
    const ref = { name, namespace: NS };
    const created = await mcs().create(validParent(name));
    const withStatus = await mcs().patchStatus(ref, {
      phase: "Initializing",
      conditions: [condition("Ready", "False")],
    });
    expect(withStatus.status?.phase).toBe("Initializing");
    expect(withStatus.metadata.generation).toBe(created.metadata.generation);

    // Status smuggled into a main-resource patch is ignored.
    const specPatch = await mcs().patch(ref, {
      spec: { ttlSeconds: 30 },
      status: { phase: "Ready" },
    } as never);
    expect(specPatch.spec.ttlSeconds).toBe(30);
    expect(specPatch.status?.phase).toBe("Initializing");
    expect(specPatch.metadata.generation).toBe((created.metadata.generation ?? 0) + 1);

    // Spec smuggled into a status patch is ignored.
    const statusPatch = await mcs().patchStatus(ref, { phase: "Pending" }, {});
    const smuggled = await mcs().patchStatus(ref, { phase: "Pending", spec: { ttlSeconds: 999 } } as never);
    expect(statusPatch.status?.phase).toBe("Pending");
    const stored = await mcs().get(ref);
    expect(stored?.spec.ttlSeconds).toBe(30);
    expect(smuggled.spec.ttlSeconds).toBe(30);
  });

  it("refuses a stale resourceVersion on a status patch (optimistic concurrency)", async () => {
    const name = parentName();
    const ref = { name, namespace: NS };
    const created = await mcs().create(validParent(name));
    await mcs().patchStatus(ref, { phase: "Initializing" });
    const err = await mcs()
      .patchStatus(ref, { phase: "Pending" }, { resourceVersion: created.metadata.resourceVersion! })
      .catch((e: unknown) => e);
    expect((err as ApiException<string>).code).toBe(409);
  });

  it.each<[string, () => Promise<unknown>, string | RegExp]>([
    [
      "a ready child without a gateway",
      async () => {
        const ref = { name: parentName(), namespace: NS };
        await mcs().create(validParent(ref.name));
        return mcs().patchStatus(ref, { children: { east: { name: `${ref.name}-east`, ready: true } } });
      },
      /a ready child must name its gateway/,
    ],
    [
      "a child under a bad cluster name",
      async () => {
        const ref = { name: parentName(), namespace: NS };
        await mcs().create(validParent(ref.name));
        return mcs().patchStatus(ref, { children: { East: { name: "x", ready: false } } });
      },
      "status.children",
    ],
    [
      "an unknown phase",
      async () => {
        const ref = { name: parentName(), namespace: NS };
        await mcs().create(validParent(ref.name));
        return mcs().patchStatus(ref, { phase: "Running" as never });
      },
      "status.phase",
    ],
    [
      "a condition with a non-standard status",
      async () => {
        const ref = { name: parentName(), namespace: NS };
        await mcs().create(validParent(ref.name));
        return mcs().patchStatus(ref, {
          conditions: [{ ...condition("Ready", "True"), status: "Maybe" as never }],
        });
      },
      "status.conditions[0].status",
    ],
    [
      "a Ready ClusterSession without gateway and pod",
      async () => {
        const c = validChild(parentName(), "east");
        await cs().create(c);
        return cs().patchStatus({ name: c.metadata.name, namespace: NS }, { phase: "Ready" });
      },
      "status.phase",
    ],
    [
      "an operator cluster entry with neither versions nor error",
      async () => {
        await op().delete({ name: "operator" });
        await op().create({ metadata: { name: "operator" }, spec: { clusterName: "primary" } });
        return op().patchStatus(
          { name: "operator" },
          { connectedClusters: [{ name: "east", lastCheck: new Date().toISOString() }] },
        );
      },
      /either connected versions or an error/,
    ],
  ])("refuses %s", async (_what, write, field) => {
    const { message, fields } = await refused(write());
    if (typeof field === "string") expect(fields).toContain(field);
    else expect(message).toMatch(field);
  });

  it("accepts a full ClusterSession status written by member and Primary", async () => {
    const c = validChild(parentName(), "west");
    const ref = { name: c.metadata.name, namespace: NS };
    await cs().create(c);
    const out = await cs().patchStatus(ref, {
      phase: "Ready",
      gateway: "wss://127.0.0.1:9443",
      pod: { name: "myapp-abc", ip: "10.0.0.7", container: "app" },
      agents: 2,
      renewedAt: new Date().toISOString(),
      conditions: [condition("Ready", "True")],
      observedGeneration: 1,
    });
    expect(out.status?.pod?.ip).toBe("10.0.0.7");
  });
});

describe("kubectl get is informative", () => {
  it("serves the printer columns through the Table API", async () => {
    const name = parentName();
    await mcs().create(validParent(name));
    await mcs().patchStatus(
      { name, namespace: NS },
      { phase: "Pending", conditions: [condition("Ready", "False")] },
    );
    const { status, body } = await rawGet(
      `/apis/${GROUP}/${VERSION}/namespaces/${NS}/multiclustersessions/${name}`,
      "application/json;as=Table;v=v1;g=meta.k8s.io",
    );
    expect(status).toBe(200);
    const table = body as {
      kind: string;
      columnDefinitions: { name: string }[];
      rows: { cells: unknown[] }[];
    };
    expect(table.kind).toBe("Table");
    const columns = table.columnDefinitions.map((c) => c.name);
    expect(columns).toEqual(["Name", "Target", "Phase", "Ready", "Policy", "TTL", "Heartbeat", "Age"]);
    const row = Object.fromEntries(columns.map((c, i) => [c, table.rows[0]!.cells[i]]));
    expect(row).toMatchObject({
      Name: name,
      Target: "deployment/myapp/container/app",
      Phase: "Pending",
      Ready: "False",
      Policy: "AllOrNothing",
      TTL: 60,
    });
  });

  it("serves ClusterSession and SwitchyardOperator columns", async () => {
    const cTable = (
      await rawGet(
        `/apis/${GROUP}/${VERSION}/clustersessions`,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
      )
    ).body as { columnDefinitions: { name: string }[] };
    expect(cTable.columnDefinitions.map((c) => c.name)).toEqual([
      "Name",
      "Target",
      "Phase",
      "Pod",
      "Parent",
      "Renewed",
      "Gateway",
      "Age",
    ]);
    const oTable = (
      await rawGet(
        `/apis/${GROUP}/${VERSION}/switchyardoperators`,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
      )
    ).body as { columnDefinitions: { name: string }[] };
    expect(oTable.columnDefinitions.map((c) => c.name)).toEqual([
      "Name",
      "Cluster",
      "Default",
      "Version",
      "Protocol",
      "Ready",
      "Sessions",
      "Agents",
      "Lingering",
      "Router",
      "Age",
    ]);
  });

  it("registers short names, categories and the status subresource in discovery", async () => {
    const { body } = await rawGet(`/apis/${GROUP}/${VERSION}`, "application/json");
    const resources = (
      body as { resources: { name: string; shortNames?: string[]; categories?: string[] }[] }
    ).resources;
    const byName = Object.fromEntries(resources.map((r) => [r.name, r]));
    expect(byName.multiclustersessions).toMatchObject({
      shortNames: ["mcsession", "symcs"],
      categories: ["switchyard"],
    });
    expect(byName.clustersessions).toMatchObject({
      shortNames: ["csession", "sycs"],
      categories: ["switchyard"],
    });
    expect(byName.switchyardoperators).toMatchObject({ shortNames: ["syop"], categories: ["switchyard"] });
    expect(Object.keys(byName)).toEqual(
      expect.arrayContaining([
        "multiclustersessions/status",
        "clustersessions/status",
        "switchyardoperators/status",
      ]),
    );
  });
});

describe("typed clients", () => {
  it("delete reports whether the object existed, and namespaced kinds require a namespace", async () => {
    const name = parentName();
    await mcs().create(validParent(name));
    expect(await mcs().delete({ name, namespace: NS })).toBe(true);
    expect(await mcs().delete({ name, namespace: NS })).toBe(false);
    await expect(mcs().get({ name })).rejects.toMatchObject({ code: "SWITCHYARD_NAMESPACE_REQUIRED" });
  });
});
