import { FormatRegistry } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { describe, expect, it } from "vitest";
import { clusterSessionCrd } from "./cluster-session.js";
import { CRD_KINDS, crdDefinitions, crdManifests } from "./manifests.js";
import { multiClusterSessionCrd } from "./multi-cluster-session.js";
import { switchyardOperatorCrd } from "./switchyard-operator.js";

type Node = { [key: string]: unknown };

function rootSchema(kind: (typeof CRD_KINDS)[number]): Node {
  const versions = crdManifests[kind].spec.versions as { schema: { openAPIV3Schema: Node } }[];
  return versions[0]!.schema.openAPIV3Schema;
}

/** Every node under spec and status, with its path. */
function* walk(node: Node, path: string): Generator<[string, Node]> {
  yield [path, node];
  for (const [name, sub] of Object.entries((node.properties ?? {}) as Record<string, Node>)) {
    yield* walk(sub, `${path}.${name}`);
  }
  if (node.items) yield* walk(node.items as Node, `${path}[*]`);
  if (node.additionalProperties) yield* walk(node.additionalProperties as Node, `${path}{*}`);
}

describe.each(CRD_KINDS)("%s manifest", (kind) => {
  const root = rootSchema(kind);
  const props = root.properties as Record<string, Node>;
  const nodes = [...walk(props.spec!, "spec"), ...walk(props.status!, "status")];

  it("bounds every string, list and map, so bad input is refused and CEL costs stay bounded", () => {
    const loose: string[] = [];
    for (const [path, node] of nodes) {
      if (node.type === "string" && node.maxLength === undefined && node.enum === undefined) loose.push(path);
      if (node.type === "array" && node.maxItems === undefined) loose.push(path);
      if (node.type === "object" && node.additionalProperties && node.maxProperties === undefined)
        loose.push(path);
      if (node.type === "integer" && node.minimum === undefined) loose.push(path);
    }
    expect(loose).toEqual([]);
  });

  it("keys every list-map by required fields", () => {
    for (const [path, node] of nodes) {
      if (node["x-kubernetes-list-type"] !== "map") continue;
      const required = ((node.items as Node).required ?? []) as string[];
      for (const key of node["x-kubernetes-list-map-keys"] as string[]) {
        expect(required, `${path} key ${key}`).toContain(key);
      }
    }
  });

  it("has a status subresource, short names, the switchyard category and printer columns on real fields", () => {
    const spec = crdManifests[kind].spec as Node;
    const version = (spec.versions as Node[])[0]!;
    expect(version.subresources).toEqual({ status: {} });
    expect((spec.names as Node).shortNames).not.toHaveLength(0);
    expect((spec.names as Node).categories).toEqual(["switchyard"]);
    for (const column of version.additionalPrinterColumns as { jsonPath: string }[]) {
      if (column.jsonPath === ".metadata.creationTimestamp") continue;
      let node: Node | undefined = root;
      for (const segment of column.jsonPath
        .replace(/\[\?\(@\.type=="\w+"\)\]/, "[*]")
        .split(".")
        .slice(1)) {
        const [name, all] = segment.split("[");
        node = (node?.properties as Record<string, Node> | undefined)?.[name!];
        if (all !== undefined) node = node?.items as Node | undefined;
      }
      expect(node, `printer column ${column.jsonPath}`).toBeDefined();
    }
  });

  it("uses the standard metav1.Condition shape for status.conditions", () => {
    const conditions = (props.status!.properties as Record<string, Node>).conditions!;
    expect(conditions["x-kubernetes-list-map-keys"]).toEqual(["type"]);
    expect((conditions.items as Node).required).toEqual([
      "type",
      "status",
      "lastTransitionTime",
      "reason",
      "message",
    ]);
  });
});

describe("TypeBox schemas validate locally like the API server", () => {
  FormatRegistry.Set("date-time", (v) => !Number.isNaN(Date.parse(v)));
  const hash = "a".repeat(64);

  it.each([
    ["deployment/myapp", true],
    ["statefulset/db-0/container/main", true],
    ["pod/x.y.z", true],
    ["deploy/myapp", false],
    ["deployment/MyApp", false],
    ["deployment/", false],
    ["deployment/app/container/", false],
    ["deployment/app/sidecar/x", false],
  ])("target %s valid=%s", (target, valid) => {
    expect(Value.Check(multiClusterSessionCrd.spec, { target, clientKeyHash: hash })).toBe(valid);
  });

  it("refuses out-of-range TTLs, unknown policies and bad hashes", () => {
    const ok = { target: "deployment/a", clientKeyHash: hash };
    expect(Value.Check(multiClusterSessionCrd.spec, ok)).toBe(true);
    expect(Value.Check(multiClusterSessionCrd.spec, { ...ok, ttlSeconds: 4 })).toBe(false);
    expect(Value.Check(multiClusterSessionCrd.spec, { ...ok, ttlSeconds: 3601 })).toBe(false);
    expect(Value.Check(multiClusterSessionCrd.spec, { ...ok, failurePolicy: "Sometimes" })).toBe(false);
    expect(Value.Check(multiClusterSessionCrd.spec, { ...ok, clientKeyHash: "A".repeat(64) })).toBe(false);
  });

  it("checks map keys (cluster names) in status.children", () => {
    const child = { name: "mc-0123456789abcdef-east", ready: false };
    expect(Value.Check(multiClusterSessionCrd.status, { children: { east: child } })).toBe(true);
    expect(Value.Check(multiClusterSessionCrd.status, { children: { East_1: child } })).toBe(false);
  });

  it("accepts a full operator status", () => {
    const status = {
      operatorVersion: "0.1.0",
      protocolVersion: "1.0.0",
      supportedFeatures: ["MultiClusterPrimary"],
      routerEndpoint: "wss://router.switchyard.svc:8443",
      connectedClusters: [
        {
          name: "east",
          lastCheck: "2026-11-22T01:00:00Z",
          latencyMs: 3,
          connected: { kubernetesVersion: "v1.36.3" },
        },
      ],
      sessions: { multiClusterSessions: 1, clusterSessions: 2 },
      conditions: [
        {
          type: "Ready",
          status: "True",
          reason: "AllClustersConnected",
          message: "",
          lastTransitionTime: "2026-11-22T01:00:00Z",
        },
      ],
    };
    expect(Value.Check(switchyardOperatorCrd.status, status)).toBe(true);
    expect(Value.Check(clusterSessionCrd.status, { phase: "Ready", conditions: status.conditions })).toBe(
      true,
    );
  });

  it("every definition is registered", () => {
    expect(Object.keys(crdDefinitions).sort()).toEqual([
      "ClusterSession",
      "MultiClusterSession",
      "MysqlBranchDatabase",
      "PgBranchDatabase",
      "QueueConsumer",
      "SwitchyardOperator",
    ]);
  });
});
