// The chart rendered by the real helm binary (no API server needed): lint passes for every values
// shape the suites use (values-shapes.ts); every DESIGN §1
// violation fails `helm template` naming the field, with the same field, problem and fix the control
// plane's own validator reports; valid multi-cluster values render a ConfigMap and Secrets that the
// control plane's parsers accept and that round-trip the values; workloads are locked down.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import {
  parseClusterConfig,
  validateClusterConfig,
} from "../../../control-plane/src/config/cluster-config.js";
import { ClusterConfigErrors } from "../../../control-plane/src/config/cluster-config-error.js";
import { parseControlPlaneArgs } from "../../../control-plane/src/control-plane-options.js";
import {
  CREDENTIALS_LABEL,
  parseCredentialSecret,
} from "../../../control-plane/src/config/credential-secret.js";
import { createCertificateAuthority } from "../../env/index.js";
import { chartDir, find, Helm, type Manifest } from "../../env/stack/helm.js";
import { testScratchDir } from "../../support/scratch-dir.js";
import { fakeJwt, valuesShapes } from "./values-shapes.js";

// Top-level await: the invalid-value table below is built at collection time and needs real PEMs.
const ca = await createCertificateAuthority("chart-test-ca");
const caData = Buffer.from(ca.certPem).toString("base64");
const { certPem: clientCert, keyPem: clientKey } = await ca.issue({
  commonName: "switchyard-primary",
  usage: "client",
});
const jwt = fakeJwt();
const appVersion = (parseYaml(readFileSync(join(chartDir, "Chart.yaml"), "utf8")) as { appVersion: string })
  .appVersion;
const shapes = await valuesShapes();

let helm: Helm;
beforeAll(async () => {
  helm = await Helm.create();
});
afterAll(() => helm?.close());

type Values = Record<string, unknown>;
const mc = (multiCluster: Values): Values => ({ multiCluster: { enabled: true, ...multiCluster } });
const east = (c: Values) => mc({ clusterName: "primary", defaultCluster: "east", clusters: { east: c } });
const bearer = (): Values => ({ authType: "bearerToken", server: "https://east.example.com:6443", caData });

describe("helm lint", () => {
  it("passes with default values", async () => {
    const plain = await helm.run(["lint", chartDir, "--strict"]);
    expect(plain.stdout + plain.stderr).toContain("0 chart(s) failed");
    expect(plain.code).toBe(0);
  });

  it.each(shapes.map((s) => [s.name, s] as const))(
    "passes for the values shape %s, which renders",
    async (_name, shape) => {
      const ns = ["--namespace", shape.namespace ?? "switchyard"];
      const lint = await helm.run(["lint", chartDir, "--strict", ...ns], [shape.values]);
      expect(lint.code, lint.stdout + lint.stderr).toBe(0);
      const manifests = await helm.template(shape.values, shape.namespace);
      expect(manifests.filter((m) => m.kind === "Deployment")).toHaveLength(2);
    },
  );
});

interface InvalidCase {
  name: string;
  values: Values;
  /** Substrings the helm error must contain (field named, fix given). */
  expect: string[];
  /** The multiCluster document is also checked by the control plane: its errors must appear verbatim. */
  mirrorsControlPlane?: boolean;
}

const invalid = (): InvalidCase[] => [
  {
    name: "sidecar.injection enabled without a CA for the API server",
    values: { sidecar: { injection: { enabled: true } } },
    expect: ["sidecar.injection: enabled needs the CA", "Fix: set sidecar.injection.caBundle"],
  },
  {
    name: "sidecar.lingerSeconds below -1",
    values: { sidecar: { lingerSeconds: -2 } },
    expect: ["lingerSeconds"],
  },
  {
    name: "sidecar.lingerSeconds not a whole number",
    values: { sidecar: { lingerSeconds: 1.5 } },
    expect: ["lingerSeconds"],
  },
  {
    name: "clusterName missing when enabled",
    values: mc({ defaultCluster: "east", clusters: { east: bearer() } }),
    expect: ["multiCluster.clusterName: is required"],
    mirrorsControlPlane: true,
  },
  {
    name: "clusterName not an RFC 1123 label",
    values: mc({ clusterName: "Primary_1", defaultCluster: "east", clusters: { east: bearer() } }),
    expect: ['multiCluster.clusterName: "Primary_1" is not an RFC 1123 label'],
    mirrorsControlPlane: true,
  },
  {
    name: "managementOnly with the Primary as defaultCluster",
    values: mc({
      clusterName: "primary",
      managementOnly: true,
      defaultCluster: "primary",
      clusters: { east: bearer() },
    }),
    expect: [
      'multiCluster.defaultCluster: names the Primary "primary", which is managementOnly',
      "Fix: set defaultCluster to one of the remote clusters (east)",
    ],
    mirrorsControlPlane: true,
  },
  {
    name: "managementOnly without defaultCluster",
    values: mc({ clusterName: "primary", managementOnly: true, clusters: { east: bearer() } }),
    expect: ["multiCluster.defaultCluster: is required when multi-cluster is enabled"],
    mirrorsControlPlane: true,
  },
  {
    name: "managementOnly with no clusters",
    values: mc({ clusterName: "primary", managementOnly: true, defaultCluster: "east", clusters: {} }),
    expect: ["multiCluster.clusters: is empty but managementOnly is true"],
    mirrorsControlPlane: true,
  },
  {
    name: "defaultCluster names an unknown cluster",
    values: mc({ clusterName: "primary", defaultCluster: "west", clusters: { east: bearer() } }),
    expect: ['multiCluster.defaultCluster: "west" is not a configured cluster', "one of: primary, east"],
    mirrorsControlPlane: true,
  },
  {
    name: "authType missing (there is no default)",
    values: east({ server: "https://east.example.com" }),
    expect: [
      "multiCluster.clusters.east.authType: is required (there is no default)",
      "bearerToken, eks, mtls",
    ],
    mirrorsControlPlane: true,
  },
  {
    name: "authType unknown",
    values: east({ authType: "token", server: "https://east.example.com" }),
    expect: ['multiCluster.clusters.east.authType: "token" is not supported'],
    mirrorsControlPlane: true,
  },
  {
    name: "authType in the wrong case",
    values: east({ authType: "EKS", server: "https://east.example.com", caData, region: "eu-north-1" }),
    expect: ['multiCluster.clusters.east.authType: "EKS" is not supported', "(case matters)"],
    mirrorsControlPlane: true,
  },
  {
    name: "server missing",
    values: east({ authType: "bearerToken" }),
    expect: ["multiCluster.clusters.east.server: is required"],
    mirrorsControlPlane: true,
  },
  {
    name: "server not https",
    values: east({ authType: "bearerToken", server: "http://east.example.com" }),
    expect: ['multiCluster.clusters.east.server: "http://east.example.com" is not an https URL'],
    mirrorsControlPlane: true,
  },
  {
    name: "caData missing for eks",
    values: east({ authType: "eks", server: "https://ABC.gr7.eu-north-1.eks.amazonaws.com".toLowerCase() }),
    expect: ["multiCluster.clusters.east.caData: is required for authType eks"],
    mirrorsControlPlane: true,
  },
  {
    name: "region missing for eks behind a non-EKS host",
    values: east({ authType: "eks", server: "https://k8s.east.example.com", caData }),
    expect: ["multiCluster.clusters.east.region: is required for authType eks"],
    mirrorsControlPlane: true,
  },
  {
    name: "region not an AWS region",
    values: east({ authType: "eks", server: "https://k8s.east.example.com", caData, region: "north" }),
    expect: ['multiCluster.clusters.east.region: "north" is not an AWS region'],
    mirrorsControlPlane: true,
  },
  {
    name: "caData not a base64 PEM",
    values: east({ ...bearer(), caData: Buffer.from("hello").toString("base64") }),
    expect: ["multiCluster.clusters.east.caData: is not a base64-encoded PEM certificate"],
    mirrorsControlPlane: true,
  },
  {
    name: "cluster name not an RFC 1123 label",
    values: mc({ clusterName: "primary", defaultCluster: "primary", clusters: { East_1: bearer() } }),
    expect: ['multiCluster.clusters.East_1: "East_1" is not an RFC 1123 label'],
    mirrorsControlPlane: true,
  },
  {
    name: "a remote cluster named like the Primary",
    values: mc({ clusterName: "primary", defaultCluster: "primary", clusters: { primary: bearer() } }),
    expect: ["multiCluster.clusters.primary: names the Primary itself"],
    mirrorsControlPlane: true,
  },
  {
    name: "namespace not a label",
    values: east({ ...bearer(), namespace: "Switchyard" }),
    expect: ['multiCluster.clusters.east.namespace: "Switchyard" is not a namespace name'],
    mirrorsControlPlane: true,
  },
  {
    name: "two clusters marked isDefault",
    values: mc({
      clusterName: "primary",
      clusters: { east: { ...bearer(), isDefault: true }, west: { ...bearer(), isDefault: true } },
    }),
    expect: ["multiCluster.clusters.west.isDefault: more than one cluster is marked isDefault (east, west)"],
    mirrorsControlPlane: true,
  },
  {
    name: "isDefault contradicting defaultCluster",
    values: mc({
      clusterName: "primary",
      defaultCluster: "primary",
      clusters: { east: { ...bearer(), isDefault: true } },
    }),
    expect: ["multiCluster.clusters.east.isDefault: contradicts defaultCluster: primary"],
    mirrorsControlPlane: true,
  },
  {
    name: "several problems are all reported at once",
    values: mc({
      clusterName: "primary",
      defaultCluster: "west",
      clusters: { east: {}, west: { authType: "eks" } },
    }),
    expect: [
      "multiCluster.clusters.east.authType: is required",
      "multiCluster.clusters.east.server: is required",
      "multiCluster.clusters.west.server: is required",
      "multiCluster.clusters.west.caData: is required for authType eks",
    ],
    mirrorsControlPlane: true,
  },
  {
    name: "a token for a non-bearer cluster",
    values: east({ authType: "mtls", server: "https://east.example.com", token: jwt }),
    expect: ["multiCluster.clusters.east.token: is only used with authType bearerToken"],
  },
  {
    name: "a token that is not a JWT",
    values: east({ ...bearer(), token: "not-a-jwt" }),
    expect: ["multiCluster.clusters.east.token: is not a JWT"],
  },
  {
    name: "mtls cert without key",
    values: east({ authType: "mtls", server: "https://east.example.com", tls: { cert: "x" } }),
    expect: ["multiCluster.clusters.east.tls: needs both cert and key"],
  },
  {
    name: "member mode asked to orchestrate",
    values: { ...east(bearer()), controlPlane: { mode: "member" } },
    expect: ["controlPlane.mode: member cannot orchestrate"],
  },
  {
    name: "IAM group without member mode",
    values: { multiClusterMemberIamGroup: "switchyard-primaries" },
    expect: ["multiClusterMemberIamGroup: is set but multiClusterMember is false"],
  },
  {
    name: "leader-election timings out of order",
    values: { controlPlane: { leaderElection: { leaseDurationSeconds: 10, renewDeadlineSeconds: 10 } } },
    expect: [
      "controlPlane.leaderElection: need retryPeriodSeconds (2) < renewDeadlineSeconds (10) < leaseDurationSeconds (10)",
    ],
  },
  {
    name: "router endpoint not wss",
    values: { router: { endpoint: "http://switchyard.example.com" } },
    expect: ['router.endpoint: "http://switchyard.example.com" is not a wss:// URL'],
  },
  {
    name: "allowed namespace not a label",
    values: { sessions: { allowedNamespaces: ["team-a", "Team_B"] } },
    expect: ['sessions.allowedNamespaces[1]: "Team_B" is not a namespace name'],
  },
  {
    name: "allowed target not a pattern",
    values: { sessions: { allowedTargets: ["team-a/deployment/*", "team-b/web", "team-c/job/x"] } },
    expect: [
      'sessions.allowedTargets[1]: "team-b/web" is not a target pattern. Fix: write <namespace>/<kind>/<name>',
      'sessions.allowedTargets[2]: "team-c/job/x" is not a target pattern',
    ],
  },
  // Types and shapes come from values.schema.json.
  {
    name: "schema: replicas not an integer",
    values: { controlPlane: { replicas: "two" } },
    expect: ["/controlPlane/replicas"],
  },
  { name: "schema: zero router replicas", values: { router: { replicas: 0 } }, expect: ["/router/replicas"] },
  {
    name: "schema: unknown mode",
    values: { controlPlane: { mode: "leader" } },
    expect: ["/controlPlane/mode"],
  },
  { name: "schema: misspelt field", values: { multiCluster: { cluster: {} } }, expect: ["cluster"] },
  {
    name: "schema: unknown target kind",
    values: { sessions: { allowedTargetKinds: ["job"] } },
    expect: ["/sessions/allowedTargetKinds/0"],
  },
  { name: "schema: empty TLS Secret name", values: { tls: { secretName: "" } }, expect: ["/tls/secretName"] },
  {
    name: "agent server name an IP address",
    values: { tls: { agentSecretName: "agent-tls", agentServerName: "10.0.0.7" } },
    expect: ['tls.agentServerName: "10.0.0.7" is an IP address'],
  },
  {
    name: "schema: agent server name not a DNS name",
    values: { tls: { agentServerName: "Switchyard_Agent" } },
    expect: ["/tls/agentServerName"],
  },
  {
    name: "schema: empty agent server name",
    values: { tls: { agentServerName: "" } },
    expect: ["/tls/agentServerName"],
  },
  {
    name: "schema: redirect image digest not sha256",
    values: { sidecar: { redirectImage: { digest: "latest" } } },
    expect: ["/sidecar/redirectImage/digest"],
  },
  {
    name: "schema: empty redirect image repository",
    values: { sidecar: { redirectImage: { repository: "" } } },
    expect: ["/sidecar/redirectImage/repository"],
  },
  {
    name: "schema: misspelt sidecar field",
    values: { sidecar: { redirectImages: {} } },
    expect: ["redirectImages"],
  },
  {
    name: "pod provisioner without an image",
    values: { branching: { postgres: { provisioner: "pod" } } },
    expect: ["branching.postgres.pod.image: the pod provisioner needs the database image"],
  },
  {
    name: "pod provisioner with a branch server",
    values: {
      branching: {
        postgres: { provisioner: "pod", pod: { image: "postgres:17" }, urlSecret: { name: "pg" } },
      },
    },
    expect: [
      "branching.postgres.urlSecret.name: the server that holds branches is for the server provisioner",
    ],
  },
  {
    name: "pod image without the pod provisioner",
    values: { branching: { postgres: { pod: { image: "postgres:17" } } } },
    expect: ["branching.postgres.pod.image: only the pod provisioner runs an image"],
  },
  {
    name: "pod provisioner for MySQL without an image",
    values: { branching: { mysql: { provisioner: "pod" } } },
    expect: ["branching.mysql.pod.image: the pod provisioner needs the database image each branch pod runs"],
  },
  {
    name: "schema: unknown branch provisioner",
    values: { branching: { postgres: { provisioner: "container" } } },
    expect: ["/branching/postgres/provisioner"],
  },
  {
    name: "schema: isDefault not a boolean",
    values: east({ ...bearer(), isDefault: "yes" }),
    expect: ["/multiCluster/clusters/east/isDefault"],
  },
];

/** The control plane's errors for the same multiCluster document, as the chart must word them. */
function controlPlaneMessages(values: Values): string[] {
  const doc = structuredClone(values.multiCluster) as Values;
  try {
    validateClusterConfig(doc);
  } catch (err) {
    expect(err).toBeInstanceOf(ClusterConfigErrors);
    return (err as ClusterConfigErrors).errors.map(
      (e) => `multiCluster.${e.field}: ${e.problem}. Fix: ${e.fix}`,
    );
  }
  throw new Error("the control plane accepted a configuration the table says is invalid");
}

describe("helm template refuses invalid values, naming the field", () => {
  it.each(invalid().map((c) => [c.name, c] as const))("%s", async (_name, c) => {
    const r = await helm.run(["template", "switchyard", chartDir, "--namespace", "switchyard"], [c.values]);
    expect(r.code, `helm accepted invalid values: ${JSON.stringify(c.values)}`).not.toBe(0);
    for (const s of c.expect) expect(r.stderr).toContain(s);
    if (c.mirrorsControlPlane) {
      const messages = controlPlaneMessages(c.values);
      expect(messages.length).toBeGreaterThan(0);
      for (const m of messages) expect(r.stderr).toContain(m);
    }
  });
});

describe("valid multi-cluster values", () => {
  const values = (): Values => ({
    multiCluster: {
      enabled: true,
      clusterName: "primary",
      defaultCluster: "east",
      clusters: {
        east: {
          authType: "bearerToken",
          server: "https://east.example.com:6443",
          caData,
          namespace: "sy",
          token: jwt,
        },
        north: { authType: "eks", server: "https://abc123.gr7.eu-north-1.eks.amazonaws.com", caData },
        south: {
          authType: "mtls",
          server: "https://south.example.com",
          caData,
          region: "",
          tls: { cert: clientCert, key: clientKey },
        },
        west: { authType: "bearerToken", server: "https://west.example.com", isDefault: false },
      },
    },
  });

  it("render a ConfigMap the control plane accepts and that round-trips the values", async () => {
    const manifests = await helm.template(values());
    const cm = find(manifests, "ConfigMap", "switchyard-clusters") as Manifest & {
      data: Record<string, string>;
    };
    expect(cm.metadata.namespace).toBe("switchyard");
    const text = cm.data["clusters-config.yaml"]!;
    expect(text).not.toContain(jwt);
    expect(text).not.toContain("PRIVATE KEY");
    const cfg = parseClusterConfig(text);
    expect(cfg).toMatchObject({
      enabled: true,
      clusterName: "primary",
      defaultCluster: "east",
      managementOnly: false,
    });
    const byName = Object.fromEntries(cfg.remotes.map((r) => [r.name, r]));
    expect(Object.keys(byName).sort()).toEqual(["east", "north", "south", "west"]);
    const caPem = Buffer.from(caData, "base64").toString("utf8");
    expect(byName.east).toMatchObject({
      authType: "bearerToken",
      server: "https://east.example.com:6443",
      caPem,
      namespace: "sy",
      isDefault: false,
    });
    expect(byName.north).toMatchObject({
      authType: "eks",
      caPem,
      region: "eu-north-1",
      namespace: "switchyard",
    });
    expect(byName.south).toMatchObject({ authType: "mtls", server: "https://south.example.com", caPem });
    expect(byName.west).toMatchObject({ authType: "bearerToken", caPem: undefined, isDefault: false });
    // Exactly the non-secret fields, nothing else.
    const doc = parseYaml(text) as { clusters: Record<string, Record<string, unknown>> };
    for (const c of Object.values(doc.clusters))
      for (const k of Object.keys(c))
        expect(["authType", "server", "caData", "region", "namespace", "isDefault"]).toContain(k);
  });

  it("render credential Secrets only for clusters whose values carry credentials, in the control plane's format", async () => {
    const manifests = await helm.template(values());
    const secrets = manifests.filter((m) => m.kind === "Secret") as (Manifest & {
      data: Record<string, string>;
      type: string;
    })[];
    expect(secrets.map((s) => s.metadata.name).sort()).toEqual([
      "switchyard-cluster-east",
      "switchyard-cluster-south",
    ]);
    for (const s of secrets) expect(s.metadata.labels?.[CREDENTIALS_LABEL]).toBe("true");
    const eastSecret = find(manifests, "Secret", "switchyard-cluster-east") as Manifest & {
      data: Record<string, string>;
    };
    expect(parseCredentialSecret("east", "bearerToken", eastSecret.data)).toEqual({
      authType: "bearerToken",
      token: jwt,
    });
    const southSecret = find(manifests, "Secret", "switchyard-cluster-south") as Manifest & {
      data: Record<string, string>;
      type: string;
    };
    expect(southSecret.type).toBe("kubernetes.io/tls");
    expect(parseCredentialSecret("south", "mtls", southSecret.data)).toEqual({
      authType: "mtls",
      certPem: clientCert.trim(),
      keyPem: clientKey.trim(),
    });
  });

  it("multi-cluster disabled renders a ConfigMap the control plane reads as single-cluster", async () => {
    const manifests = await helm.template({});
    const cm = find(manifests, "ConfigMap", "switchyard-clusters") as Manifest & {
      data: Record<string, string>;
    };
    expect(parseClusterConfig(cm.data["clusters-config.yaml"]!)).toMatchObject({
      enabled: false,
      remotes: [],
    });
    expect(manifests.filter((m) => m.kind === "Secret")).toEqual([]);
  });

  it("the ConfigMap name is overridable and the control plane is told the new name", async () => {
    const manifests = await helm.template({ multiCluster: { configMapName: "my-clusters" } });
    find(manifests, "ConfigMap", "my-clusters");
    expect(containerArgs(manifests, "switchyard-control-plane")).toContain("--config-map=my-clusters");
  });
});

interface PodSpecShape {
  automountServiceAccountToken?: boolean;
  serviceAccountName: string;
  securityContext: Record<string, unknown>;
  containers: {
    args: string[];
    securityContext: Record<string, unknown>;
    volumeMounts: { name: string; mountPath: string }[];
  }[];
  volumes: { name: string; projected?: { sources: { serviceAccountToken?: Record<string, unknown> }[] } }[];
}
const podSpec = (manifests: readonly Manifest[], name: string): PodSpecShape =>
  (find(manifests, "Deployment", name) as unknown as { spec: { template: { spec: PodSpecShape } } }).spec
    .template.spec;
const containerArgs = (manifests: readonly Manifest[], name: string): string[] =>
  podSpec(manifests, name).containers[0]!.args;

describe("workloads", () => {
  it("are locked down: non-root, read-only root filesystem, no capabilities, RuntimeDefault seccomp", async () => {
    const manifests = await helm.template({});
    for (const name of ["switchyard-control-plane", "switchyard-router"]) {
      const spec = podSpec(manifests, name);
      expect(spec.securityContext).toMatchObject({
        runAsNonRoot: true,
        seccompProfile: { type: "RuntimeDefault" },
      });
      expect(spec.containers[0]!.securityContext).toMatchObject({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ["ALL"] },
      });
    }
  });

  it("routers get no API token, only a projected token of the route-discovery audience", async () => {
    const manifests = await helm.template({});
    const spec = podSpec(manifests, "switchyard-router");
    expect(spec.automountServiceAccountToken).toBe(false);
    const sa = find(manifests, "ServiceAccount", "switchyard-router") as Manifest & {
      automountServiceAccountToken?: boolean;
    };
    expect(sa.automountServiceAccountToken).toBe(false);
    const token = spec.volumes.find((v) => v.name === "route-discovery-token")!.projected!.sources[0]!
      .serviceAccountToken;
    expect(token).toEqual({ audience: "switchyard-route-discovery", expirationSeconds: 3600, path: "token" });
    expect(spec.containers[0]!.volumeMounts).toContainEqual({
      name: "route-discovery-token",
      mountPath: "/var/run/secrets/switchyard",
      readOnly: true,
    });
    expect(spec.containers[0]!.args).toContain("--token-file=/var/run/secrets/switchyard/token");
    expect(spec.containers[0]!.args).toContain(
      "--control-plane=https://switchyard-control-plane.switchyard.svc:9443",
    );
    // The control plane accepts exactly that audience and ServiceAccount.
    const cp = containerArgs(manifests, "switchyard-control-plane");
    expect(cp).toContain("--router-token-audience=switchyard-route-discovery");
    expect(cp).toContain("--router-service-account=switchyard/switchyard-router");
  });

  it("pass the install-time settings to the control plane as flags", async () => {
    const manifests = await helm.template({
      ...mc({
        clusterName: "primary",
        managementOnly: true,
        defaultCluster: "east",
        clusters: { east: bearer() },
      }),
      router: { endpoint: "wss://sy.example.com" },
      sessions: {
        allowedNamespaces: ["team-a", "team-b"],
        allowedTargetKinds: ["deployment"],
        allowedTargets: ["team-a/deployment/*", "team-b/*/api-*"],
      },
    });
    const args = containerArgs(manifests, "switchyard-control-plane");
    expect(args).toEqual(
      expect.arrayContaining([
        "dist/control-plane/src/main.js",
        "--mode=primary",
        "--namespace=switchyard",
        "--grpc-listen=:9443",
        "--metrics-listen=:9090",
        "--router-endpoint=wss://sy.example.com",
        "--allowed-namespaces=team-a,team-b",
        "--allowed-target-kinds=deployment",
        "--allowed-targets=team-a/deployment/*,team-b/*/api-*",
        "--tls-cert=/etc/switchyard/tls/tls.crt",
        "--tls-key=/etc/switchyard/tls/tls.key",
      ]),
    );
    expect(args).not.toContain("--mode=both");
  });

  it("give a member the same allow-list, as flags the control plane accepts", async () => {
    const dir = testScratchDir("chart-allow-list-");
    for (const f of ["tls.crt", "tls.key"]) writeFileSync(join(dir, f), f);
    const args = containerArgs(
      await helm.template({
        multiClusterMember: true,
        router: { endpoint: "wss://east.example.com" },
        sessions: { allowedNamespaces: ["team-a"], allowedTargets: ["team-a/deployment/web"] },
      }),
      "switchyard-control-plane",
    );
    expect(args).toEqual(
      expect.arrayContaining(["--allowed-namespaces=team-a", "--allowed-targets=team-a/deployment/web"]),
    );
    const parsed = parseControlPlaneArgs(
      args.slice(1).map((a) => a.replace(/=\/etc\/switchyard\/tls\//, `=${dir}/`)),
      {},
    );
    expect(parsed).toMatchObject({
      mode: "member",
      allowedNamespaces: ["team-a"],
      allowedTargets: ["team-a/deployment/web"],
    });
  });

  it("render control-plane flags that the control plane itself accepts, in every mode", async () => {
    const dir = testScratchDir("chart-flags-");
    writeFileSync(join(dir, "tls.crt"), "CERT");
    writeFileSync(join(dir, "tls.key"), "KEY");
    const cases: Array<[string, Values]> = [
      [
        "primary",
        mc({
          clusterName: "primary",
          managementOnly: true,
          defaultCluster: "east",
          clusters: { east: bearer() },
        }),
      ],
      ["both", mc({ clusterName: "primary", defaultCluster: "primary", clusters: { east: bearer() } })],
      ["member", { multiClusterMember: true, router: { endpoint: "wss://east.example.com" } }],
      ["both", {}],
    ];
    for (const [mode, values] of cases) {
      const args = containerArgs(await helm.template(values), "switchyard-control-plane")
        .slice(1) // the script path
        .map((a) => a.replace(/^--tls-(cert|key)=.*\/(tls\.(crt|key))$/, `--tls-$1=${dir}/$2`));
      const parsed = parseControlPlaneArgs(args, {});
      expect(parsed.mode).toBe(mode);
      if (mode !== "primary") expect(parsed.agents.image).toMatch(/switchyard/);
      // Whoever injects sidecars gets the redirect image; a Primary injects none.
      expect(parsed.agents.redirectImage).toBe(
        mode === "primary" ? undefined : `ghcr.io/switchyard-dev/switchyard-redirect:${appVersion}`,
      );
      expect(parsed.routerEndpoint).toMatch(/^wss:\/\//);
    }
  });

  it("give the Default cluster's control plane the pod provisioner as flags it accepts, and the rights it needs", async () => {
    const values: Values = {
      multiClusterMember: true,
      router: { endpoint: "wss://east.example.com" },
      branching: {
        defaultCluster: true,
        postgres: { provisioner: "pod", pod: { image: "postgres:17" } },
        mysql: { provisioner: "pod", pod: { image: "mariadb:11" } },
      },
    };
    const manifests = await helm.template(values);
    const args = containerArgs(manifests, "switchyard-control-plane").slice(1);
    expect(args).toEqual(
      expect.arrayContaining([
        "--default-cluster",
        "--branch-provisioner-postgres=pod",
        "--branch-pod-image-postgres=postgres:17",
        "--branch-provisioner-mysql=pod",
        "--branch-pod-image-mysql=mariadb:11",
      ]),
    );
    const dir = testScratchDir("chart-branch-flags-");
    writeFileSync(join(dir, "tls.crt"), "CERT");
    writeFileSync(join(dir, "tls.key"), "KEY");
    const parsed = parseControlPlaneArgs(
      args.map((a) => a.replace(/^--tls-(cert|key)=.*\/(tls\.(crt|key))$/, `--tls-$1=${dir}/$2`)),
      {},
    );
    expect(parsed.branching.defaultCluster).toBe(true);
    expect(parsed.branching.postgresPod).toEqual({ image: "postgres:17" });
    expect(parsed.branching.mysqlPod).toEqual({ image: "mariadb:11" });
    type Rules = { rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> };
    const rulesOf = (m: readonly Manifest[]) =>
      (find(m, "ClusterRole", "switchyard-control-plane-session-secrets") as unknown as Rules).rules;
    expect(rulesOf(manifests)).toContainEqual({
      apiGroups: [""],
      resources: ["pods", "services"],
      verbs: ["get", "create", "delete"],
    });
    // Without the pod provisioner, no rights on pods or services come from branching.
    const plainRules = rulesOf(await helm.template({ ...values, branching: { defaultCluster: true } }));
    expect(plainRules.some((r) => r.resources.includes("services"))).toBe(false);
  });

  it("give agents and gateways TLS with the chart's CA, as flags the control plane accepts", async () => {
    const dir = testScratchDir("chart-tls-flags-");
    for (const f of ["tls.crt", "tls.key", "ca.crt"]) writeFileSync(join(dir, f), f);
    const local = (a: string) => a.replace(/=\/etc\/switchyard\/tls\//, `=${dir}/`);
    const both = containerArgs(
      await helm.template({ tls: { agentSecretName: "agent-tls", gatewayCa: true } }),
      "switchyard-control-plane",
    );
    expect(both).toEqual(
      expect.arrayContaining([
        "--agent-tls-secret=agent-tls",
        "--agent-tls-server-name=switchyard-agent",
        "--agent-ca=/etc/switchyard/tls/ca.crt",
        "--gateway-ca=/etc/switchyard/tls/ca.crt",
      ]),
    );
    expect(parseControlPlaneArgs(both.slice(1).map(local), {})).toMatchObject({
      agents: { tlsSecret: "agent-tls", tlsServerName: "switchyard-agent", caPem: "ca.crt" },
      primary: { gatewayCaPem: "ca.crt" },
    });
    // The name agent certificates carry is the operator's to choose.
    const named = containerArgs(
      await helm.template({ tls: { agentSecretName: "agent-tls", agentServerName: "agent.shop.svc" } }),
      "switchyard-control-plane",
    );
    expect(named).toContain("--agent-tls-server-name=agent.shop.svc");
    expect(parseControlPlaneArgs(named.slice(1).map(local), {}).agents.tlsServerName).toBe("agent.shop.svc");
    // Without an agent Secret agents serve ws://: no server name (the control plane would refuse one).
    const plain = containerArgs(
      await helm.template({ tls: { agentServerName: "agent.shop.svc" } }),
      "switchyard-control-plane",
    );
    expect(plain.filter((a) => a.startsWith("--agent-tls-server-name="))).toEqual([]);
    // A member routes to no gateway: gatewayCa renders nothing there. Default: plaintext agents.
    const member = containerArgs(
      await helm.template({
        multiClusterMember: true,
        router: { endpoint: "wss://east.example.com" },
        tls: { gatewayCa: true },
      }),
      "switchyard-control-plane",
    );
    expect(
      member.filter((a) => /^--(agent-tls-secret|agent-tls-server-name|agent-ca|gateway-ca)=/.test(a)),
    ).toEqual([]);
    expect(parseControlPlaneArgs(member.slice(1).map(local), {}).agents.caPem).toBeUndefined();
  });

  it("give the redirect init container's image as the main image is given: tag, digest, appVersion", async () => {
    const redirectArg = async (values: Values) =>
      containerArgs(await helm.template(values), "switchyard-control-plane").filter((a) =>
        a.startsWith("--redirect-image="),
      );
    const member = { multiClusterMember: true, router: { endpoint: "wss://east.example.com" } };
    expect(await redirectArg(member)).toEqual([
      `--redirect-image=ghcr.io/switchyard-dev/switchyard-redirect:${appVersion}`,
    ]);
    expect(
      await redirectArg({
        ...member,
        sidecar: { redirectImage: { repository: "registry.example.com/iptables", tag: "1.8" } },
      }),
    ).toEqual(["--redirect-image=registry.example.com/iptables:1.8"]);
    const digest = `sha256:${"b".repeat(64)}`;
    expect(await redirectArg({ sidecar: { redirectImage: { tag: "1.8", digest } } })).toEqual([
      `--redirect-image=ghcr.io/switchyard-dev/switchyard-redirect@${digest}`,
    ]);
    // A management-only Primary injects no sidecar.
    expect(
      await redirectArg(
        mc({
          clusterName: "primary",
          managementOnly: true,
          defaultCluster: "east",
          clusters: { east: bearer() },
        }),
      ),
    ).toEqual([]);
  });

  it("scale separately, and the HPA replaces router replicas when enabled", async () => {
    const a = await helm.template({ controlPlane: { replicas: 3 }, router: { replicas: 5 } });
    expect(
      (find(a, "Deployment", "switchyard-control-plane") as unknown as { spec: { replicas: number } }).spec
        .replicas,
    ).toBe(3);
    expect(
      (find(a, "Deployment", "switchyard-router") as unknown as { spec: { replicas: number } }).spec.replicas,
    ).toBe(5);
    expect(a.some((m) => m.kind === "HorizontalPodAutoscaler")).toBe(false);
    const b = await helm.template({
      router: { autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 7 } },
    });
    expect(
      (find(b, "Deployment", "switchyard-router") as unknown as { spec: { replicas?: number } }).spec
        .replicas,
    ).toBeUndefined();
    expect(find(b, "HorizontalPodAutoscaler", "switchyard-router")).toMatchObject({
      spec: { minReplicas: 3, maxReplicas: 7 },
    });
  });
});

describe("observability", () => {
  it("ServiceMonitors and the Grafana dashboard render only when enabled", async () => {
    const off = await helm.template({});
    expect(off.some((m) => m.kind === "ServiceMonitor" || m.metadata.labels?.grafana_dashboard)).toBe(false);
    const on = await helm.template({
      metrics: { serviceMonitor: { enabled: true }, grafanaDashboard: { enabled: true } },
    });
    expect(
      on
        .filter((m) => m.kind === "ServiceMonitor")
        .map((m) => m.metadata.name)
        .sort(),
    ).toEqual(["switchyard-control-plane", "switchyard-router"]);
    const dash = find(on, "ConfigMap", "switchyard-dashboard") as Manifest & { data: Record<string, string> };
    expect(dash.metadata.labels?.grafana_dashboard).toBe("1");
    const json = JSON.parse(dash.data["switchyard.json"]!) as { panels: { targets?: { expr: string }[] }[] };
    expect(json.panels.filter((p) => p.targets).length).toBeGreaterThanOrEqual(20);
  });

  it("the dashboard queries only metrics the code registers", () => {
    const repo = resolve(chartDir, "../..");
    const sources = ["data-plane/router/src", "control-plane/src"]
      .flatMap((dir) =>
        readdirSync(join(repo, dir), { recursive: true, encoding: "utf8" })
          .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))
          .map((f) => readFileSync(join(repo, dir, f), "utf8")),
      )
      .join("\n");
    const registered = new Set([...sources.matchAll(/"(switchyard_[a-z0-9_]+)"/g)].map((m) => m[1]!));
    const dashboard = readFileSync(join(chartDir, "dashboards/switchyard.json"), "utf8");
    const used = new Set(
      [...dashboard.matchAll(/switchyard_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, "")),
    );
    expect(used.size).toBeGreaterThan(15);
    expect([...used].filter((m) => !registered.has(m))).toEqual([]);
  });
});

describe("the admission webhook for pods born with the agent", () => {
  it("is off by default, and on: a MutatingWebhookConfiguration that never blocks pods, the port, the flag", async () => {
    const off = await helm.template({});
    expect(off.filter((m) => m.kind === "MutatingWebhookConfiguration")).toEqual([]);
    const on = await helm.template({
      sidecar: { injection: { enabled: true, certManagerCertificate: "switchyard/switchyard-tls" } },
      sessions: { allowedNamespaces: ["shop"] },
    });
    const [hook] = on.filter((m) => m.kind === "MutatingWebhookConfiguration") as unknown as Array<{
      metadata: { annotations: Record<string, string> };
      webhooks: Array<Record<string, unknown>>;
    }>;
    expect(hook!.metadata.annotations["cert-manager.io/inject-ca-from"]).toBe("switchyard/switchyard-tls");
    expect(hook!.webhooks[0]).toMatchObject({
      failurePolicy: "Ignore",
      sideEffects: "NoneOnDryRun",
      clientConfig: { service: { path: "/inject-agent", port: 9444 } },
      namespaceSelector: {
        matchExpressions: [
          { key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system", "switchyard"] },
          { key: "kubernetes.io/metadata.name", operator: "In", values: ["shop"] },
        ],
      },
    });
    const text = JSON.stringify(on);
    expect(text).toContain("--injection-listen=:9444");
    expect(text).toContain('"name":"inject-agent"');
  });
});
