import { beforeAll, describe, expect, it } from "vitest";
import { createCertificateAuthority } from "../../../test/env/pki.js";
import { parseClusterConfig, validateClusterConfig } from "./cluster-config.js";
import { ClusterConfigErrors, type ClusterConfigError } from "./cluster-config-error.js";
import { clusterLabelOf } from "./cluster-name.js";

let caData: string;
beforeAll(async () => {
  caData = Buffer.from((await createCertificateAuthority("unit-ca")).certPem).toString("base64");
});

function errorsOf(doc: unknown): ClusterConfigError[] {
  try {
    validateClusterConfig(doc);
  } catch (err) {
    expect(err).toBeInstanceOf(ClusterConfigErrors);
    return [...(err as ClusterConfigErrors).errors];
  }
  throw new Error("expected the configuration to be rejected");
}

const server = "https://api.east.example.com:6443";
const base = () => ({ enabled: true, clusterName: "primary", defaultCluster: "east" });

describe("validateClusterConfig", () => {
  it("accepts a valid configuration and types it", () => {
    const c = validateClusterConfig({
      enabled: true,
      clusterName: "primary",
      managementOnly: true,
      clusters: {
        east: { authType: "bearerToken", server: server + "/", isDefault: true },
        prod: { authType: "eks", server: "https://ABCDEF0123.gr7.eu-north-1.eks.amazonaws.com", caData },
        onprem: { authType: "mtls", server, caData, namespace: "tools" },
      },
    });
    expect(c.defaultCluster).toBe("east");
    expect(c.remotes.map((r) => r.name)).toEqual(["east", "onprem", "prod"]);
    expect(c.remotes[0]).toMatchObject({
      server,
      caPem: undefined,
      namespace: "switchyard",
      isDefault: true,
    });
    expect(c.remotes[2]).toMatchObject({ region: "eu-north-1", authType: "eks" });
    expect(c.remotes[2]!.caPem).toContain("BEGIN CERTIFICATE");
  });

  it("lets a workload Primary be the Default", () => {
    const c = validateClusterConfig({
      ...base(),
      defaultCluster: "primary",
      clusters: { east: { authType: "mtls", server } },
    });
    expect(c.defaultCluster).toBe("primary");
  });

  it("treats disabled multi-cluster as single-cluster with no remotes", () => {
    expect(parseClusterConfig("enabled: false\nclusterName: solo\n")).toEqual({
      enabled: false,
      clusterName: "solo",
      defaultCluster: "solo",
      managementOnly: false,
      remotes: [],
    });
  });

  it("requires a region for eks when the server is not an EKS endpoint", () => {
    const [first] = errorsOf({ ...base(), clusters: { east: { authType: "eks", server, caData } } });
    expect(first!.field).toBe("clusters.east.region");
    expect(first!.message).toMatch(/Fix: set region/);
  });

  const cases: Array<[string, unknown, { cluster?: string; field: string; text: RegExp }]> = [
    [
      "managementOnly with itself as default",
      {
        ...base(),
        managementOnly: true,
        defaultCluster: "primary",
        clusters: { east: { authType: "mtls", server } },
      },
      {
        field: "defaultCluster",
        text: /managementOnly.*Fix: set defaultCluster to one of the remote clusters \(east\)/,
      },
    ],
    [
      "managementOnly without a default",
      {
        enabled: true,
        clusterName: "primary",
        managementOnly: true,
        clusters: { east: { authType: "mtls", server } },
      },
      { field: "defaultCluster", text: /is required.*one of the remote clusters/ },
    ],
    [
      "unknown default",
      { ...base(), defaultCluster: "west", clusters: { east: { authType: "mtls", server } } },
      { field: "defaultCluster", text: /"west" is not a configured cluster.*primary, east/ },
    ],
    [
      "missing authType",
      { ...base(), clusters: { east: { server } } },
      { cluster: "east", field: "clusters.east.authType", text: /no default/ },
    ],
    [
      "unknown authType",
      { ...base(), clusters: { east: { authType: "BearerToken", server } } },
      {
        cluster: "east",
        field: "clusters.east.authType",
        text: /"BearerToken" is not supported.*case matters/,
      },
    ],
    [
      "eks without caData",
      { ...base(), clusters: { east: { authType: "eks", server, region: "us-east-1" } } },
      { cluster: "east", field: "clusters.east.caData", text: /required for authType eks/ },
    ],
    [
      "bad cluster name",
      { ...base(), defaultCluster: "primary", clusters: { "East.1": { authType: "mtls", server } } },
      { cluster: "East.1", field: "clusters.East.1", text: /RFC 1123/ },
    ],
    [
      "bad primary name",
      { ...base(), clusterName: "-primary", clusters: { east: { authType: "mtls", server } } },
      { field: "clusterName", text: /RFC 1123/ },
    ],
    [
      "http server",
      { ...base(), clusters: { east: { authType: "mtls", server: "http://x:80" } } },
      { cluster: "east", field: "clusters.east.server", text: /not an https URL/ },
    ],
    [
      "caData that is not a certificate",
      { ...base(), clusters: { east: { authType: "mtls", server, caData: "bm90IGEgY2VydA==" } } },
      { cluster: "east", field: "clusters.east.caData", text: /not a base64-encoded PEM certificate/ },
    ],
    [
      "the Primary listed as a remote",
      { ...base(), clusters: { primary: { authType: "mtls", server }, east: { authType: "mtls", server } } },
      { cluster: "primary", field: "clusters.primary", text: /names the Primary itself/ },
    ],
    [
      "two clusters marked isDefault",
      {
        enabled: true,
        clusterName: "primary",
        clusters: {
          a: { authType: "mtls", server, isDefault: true },
          b: { authType: "mtls", server, isDefault: true },
        },
      },
      { cluster: "b", field: "clusters.b.isDefault", text: /more than one/ },
    ],
    [
      "isDefault contradicting defaultCluster",
      {
        ...base(),
        clusters: { east: { authType: "mtls", server }, west: { authType: "mtls", server, isDefault: true } },
      },
      { cluster: "west", field: "clusters.west.isDefault", text: /contradicts defaultCluster: east/ },
    ],
  ];
  it.each(cases)("rejects %s with cluster, field and fix", (_name, doc, want) => {
    const [first] = errorsOf(doc);
    expect(first!.code).toBe("SWITCHYARD_CLUSTER_CONFIG_INVALID");
    expect(first!.cluster).toBe(want.cluster);
    expect(first!.field).toBe(want.field);
    expect(first!.message).toMatch(want.text);
    expect(first!.message).toContain("Fix: ");
  });

  it("reports every problem at once", () => {
    const errs = errorsOf({
      enabled: true,
      clusterName: "primary",
      defaultCluster: "nope",
      clusters: { a: {}, b: { authType: "eks", server } },
    });
    expect(errs.map((e) => e.field)).toEqual(
      expect.arrayContaining([
        "clusters.a.authType",
        "clusters.a.server",
        "clusters.b.caData",
        "defaultCluster",
      ]),
    );
  });

  describe("EKS cluster names", () => {
    const eksServer = "https://ABCDEF0123.gr7.eu-north-1.eks.amazonaws.com";
    const eks = () => ({ authType: "eks", server: eksServer, caData });

    it("derive the label of object names and keep the EKS name for signing", () => {
      expect(clusterLabelOf("Prod_EKS")).toBe("prod-eks");
      expect(clusterLabelOf("team_A-")).toBe("team-a");
      expect(clusterLabelOf("east")).toBe("east");
      expect(clusterLabelOf("A" + "b".repeat(61) + "_x" + "y".repeat(30))).toBe("a" + "b".repeat(61));
      const c = validateClusterConfig({
        ...base(),
        defaultCluster: "Prod_EKS",
        clusters: { Prod_EKS: eks(), east: { authType: "mtls", server } },
      });
      expect(c.defaultCluster).toBe("prod-eks");
      expect(c.remotes.map((r) => [r.name, r.eksClusterName])).toEqual([
        ["prod-eks", "Prod_EKS"],
        ["east", undefined],
      ]);
      // The derived name is accepted as defaultCluster too, and isDefault marks by it.
      expect(
        validateClusterConfig({ ...base(), defaultCluster: "prod-eks", clusters: { Prod_EKS: eks() } })
          .defaultCluster,
      ).toBe("prod-eks");
      expect(
        validateClusterConfig({
          enabled: true,
          clusterName: "primary",
          clusters: { Prod_EKS: { ...eks(), isDefault: true } },
        }).defaultCluster,
      ).toBe("prod-eks");
    });

    it("refuse two keys that become one cluster name, naming both", () => {
      const errs = errorsOf({
        ...base(),
        clusters: { Prod_EKS: eks(), "prod-eks": eks(), east: { authType: "mtls", server } },
      });
      expect(errs.map((e) => e.message)).toEqual([
        'clusters: "Prod_EKS", "prod-eks" become the same cluster name "prod-eks". Fix: rename all but one: object names and labels use an EKS cluster name lowercased, with \'_\' as \'-\'',
      ]);
    });

    it("refuse an EKS name that becomes the Primary's name", () => {
      const [e] = errorsOf({ ...base(), clusters: { Primary: eks(), east: { authType: "mtls", server } } });
      expect(e!.field).toBe("clusters.Primary");
      expect(e!.message).toMatch(/becomes the cluster name "primary", the Primary's own/);
    });

    it("stay labels for the other auth types, and must be EKS names", () => {
      for (const [key, c] of [
        ["Prod_1", { authType: "mtls", server }],
        ["Prod_1", { authType: "bearerToken", server }],
        ["bad.name", eks()],
        ["_lead", eks()],
      ] as const) {
        const [e] = errorsOf({ ...base(), defaultCluster: "primary", clusters: { [key]: c } });
        expect(e!.field).toBe(`clusters.${key}`);
        expect(e!.message).toMatch(/is not an RFC 1123 label.*only an eks cluster may keep its EKS name/);
      }
    });
  });

  it("rejects YAML that does not parse", () => {
    expect(() => parseClusterConfig("enabled: [true")).toThrow(/clusters-config.yaml: is not valid YAML/);
  });
});
