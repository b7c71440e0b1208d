// The chart's operational hardening, rendered by the real helm binary (no API server needed):
// resource requests and limits (CPU, memory, ephemeral storage), spreading replicas over nodes
// and zones, the NetworkPolicies of the control plane and the routers, and the routers' admin port
// (/metrics, /debug/*) kept out of the public Service; each value that can be wrong fails
// `helm template` with the field named.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chartDir, find, Helm, type Manifest } from "../../env/stack/helm.js";

let helm: Helm;
beforeAll(async () => {
  helm = await Helm.create();
});
afterAll(() => helm?.close());

type Values = Record<string, unknown>;
const COMPONENTS = [
  ["controlPlane", "switchyard-control-plane", "control-plane"],
  ["router", "switchyard-router", "router"],
] as const;

interface PodSpec {
  affinity?: Record<string, unknown>;
  topologySpreadConstraints?: Record<string, unknown>[];
  priorityClassName?: string;
  containers: { imagePullPolicy: string; resources: Record<string, Record<string, string>> }[];
}
const podSpec = (manifests: readonly Manifest[], name: string): PodSpec =>
  (find(manifests, "Deployment", name) as unknown as { spec: { template: { spec: PodSpec } } }).spec.template
    .spec;
const selector = (component: string) => ({
  "app.kubernetes.io/name": "switchyard",
  "app.kubernetes.io/instance": "switchyard",
  "app.kubernetes.io/component": component,
});

interface PolicySpec {
  podSelector: { matchLabels: Record<string, string> };
  policyTypes: string[];
  ingress: { from?: Record<string, unknown>[]; ports: { port: number; protocol: string }[] }[];
  egress: Record<string, unknown>[];
}
const policy = (manifests: readonly Manifest[], name: string): PolicySpec =>
  (find(manifests, "NetworkPolicy", name) as unknown as { spec: PolicySpec }).spec;

describe("resources", () => {
  it("request and limit CPU, memory and ephemeral storage by default", async () => {
    const manifests = await helm.template({});
    for (const [, name] of COMPONENTS) {
      const { resources } = podSpec(manifests, name).containers[0]!;
      for (const kind of ["requests", "limits"])
        expect(Object.keys(resources[kind]!).sort(), `${name} ${kind}`).toEqual([
          "cpu",
          "ephemeral-storage",
          "memory",
        ]);
    }
    expect(podSpec(manifests, "switchyard-router").containers[0]!.resources.limits).toEqual({
      cpu: "2",
      memory: "512Mi",
      "ephemeral-storage": "256Mi",
    });
  });

  it("take the image pull policy from values", async () => {
    const manifests = await helm.template({ image: { pullPolicy: "Always" } });
    for (const [, name] of COMPONENTS)
      expect(podSpec(manifests, name).containers[0]!.imagePullPolicy).toBe("Always");
  });
});

describe("scheduling", () => {
  it("prefers one replica per node and spreads over zones and nodes by default, without a priority class", async () => {
    const manifests = await helm.template({});
    for (const [, name, component] of COMPONENTS) {
      const spec = podSpec(manifests, name);
      expect(spec.affinity).toEqual({
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            {
              weight: 100,
              podAffinityTerm: {
                topologyKey: "kubernetes.io/hostname",
                labelSelector: { matchLabels: selector(component) },
              },
            },
          ],
        },
      });
      expect(spec.topologySpreadConstraints).toEqual(
        ["topology.kubernetes.io/zone", "kubernetes.io/hostname"].map((topologyKey) => ({
          maxSkew: 1,
          topologyKey,
          whenUnsatisfiable: "ScheduleAnyway",
          labelSelector: { matchLabels: selector(component) },
        })),
      );
      expect(spec.priorityClassName).toBeUndefined();
    }
  });

  it("requires one replica per node when hard, keeps the rest of a given affinity, and takes a priority class", async () => {
    const nodeAffinity = {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{ matchExpressions: [{ key: "pool", operator: "In", values: ["tools"] }] }],
      },
    };
    const manifests = await helm.template({
      controlPlane: { podAntiAffinity: "hard", affinity: { nodeAffinity }, priorityClassName: "tools" },
      router: { podAntiAffinity: "", topologySpread: [] },
    });
    const cp = podSpec(manifests, "switchyard-control-plane");
    expect(cp.affinity).toEqual({
      nodeAffinity,
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          {
            topologyKey: "kubernetes.io/hostname",
            labelSelector: { matchLabels: selector("control-plane") },
          },
        ],
      },
    });
    expect(cp.priorityClassName).toBe("tools");
    const router = podSpec(manifests, "switchyard-router");
    expect(router.affinity).toBeUndefined();
    expect(router.topologySpreadConstraints).toBeUndefined();
  });

  it("leaves a podAntiAffinity of your own in place of the soft preset", async () => {
    const own = { preferredDuringSchedulingIgnoredDuringExecution: [] };
    const manifests = await helm.template({ router: { affinity: { podAntiAffinity: own } } });
    expect(podSpec(manifests, "switchyard-router").affinity).toEqual({ podAntiAffinity: own });
  });
});

describe("network policies", () => {
  it("let only the routers reach RouteDiscovery and only monitoring reach the control plane's metrics", async () => {
    const manifests = await helm.template({});
    const cp = policy(manifests, "switchyard-control-plane");
    expect(cp.podSelector.matchLabels).toEqual(selector("control-plane"));
    expect(cp.policyTypes).toEqual(["Ingress", "Egress"]);
    expect(cp.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: selector("router") } }],
        ports: [{ port: 9443, protocol: "TCP" }],
      },
      {
        from: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }],
        ports: [{ port: 9090, protocol: "TCP" }],
      },
    ]);
    expect(cp.egress).toEqual([{}]);
  });

  it("open the routers' session port to anywhere by default or to routerFrom, their admin port to monitoring only", async () => {
    const open = policy(await helm.template({}), "switchyard-router");
    expect(open.podSelector.matchLabels).toEqual(selector("router"));
    expect(open.policyTypes).toEqual(["Ingress", "Egress"]);
    const defaultMonitoring = {
      namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } },
    };
    expect(open.ingress).toEqual([
      { ports: [{ port: 8443, protocol: "TCP" }] },
      { from: [defaultMonitoring], ports: [{ port: 9091, protocol: "TCP" }] },
    ]);
    const lb = { ipBlock: { cidr: "10.0.0.0/8" } };
    const monitoring = { namespaceSelector: { matchLabels: { team: "observability" } } };
    const restricted = policy(
      await helm.template({ networkPolicy: { routerFrom: [lb], metricsFrom: [monitoring] } }),
      "switchyard-router",
    );
    expect(restricted.ingress).toEqual([
      { ports: [{ port: 8443, protocol: "TCP" }], from: [lb] },
      { from: [monitoring], ports: [{ port: 9091, protocol: "TCP" }] },
    ]);
  });

  it("follow the ports and render nothing when disabled", async () => {
    const moved = await helm.template({
      controlPlane: { grpcPort: 7443, metricsPort: 7090 },
      router: { containerPort: 7000, adminPort: 7091 },
    });
    expect(policy(moved, "switchyard-control-plane").ingress.map((r) => r.ports[0]!.port)).toEqual([
      7443, 7090,
    ]);
    expect(policy(moved, "switchyard-router").ingress.map((r) => r.ports[0]!.port)).toEqual([7000, 7091]);
    const off = await helm.template({ networkPolicy: { enabled: false } });
    expect(off.filter((m) => m.kind === "NetworkPolicy")).toEqual([]);
  });
});

const invalid: Array<[name: string, values: Values, expected: string[]]> = [
  [
    "empty metricsFrom",
    { networkPolicy: { metricsFrom: [] } },
    ['networkPolicy.metricsFrom: is empty, which a NetworkPolicy reads as "from anywhere"'],
  ],
  [
    "empty control-plane egress",
    { networkPolicy: { controlPlaneEgress: [] } },
    ["networkPolicy.controlPlaneEgress: is empty, which denies all egress"],
  ],
  [
    "empty router egress",
    { networkPolicy: { routerEgress: [] } },
    ["networkPolicy.routerEgress: is empty, which denies all egress"],
  ],
  [
    "an ipBlock that is not a CIDR",
    {
      networkPolicy: {
        routerFrom: [{ ipBlock: { cidr: "10.0.0.1" } }],
        routerEgress: [{ to: [{ ipBlock: { cidr: "0.0.0.0/0", except: ["10.0.0.0"] } }] }],
      },
    },
    [
      'networkPolicy.routerFrom[0].ipBlock.cidr: "10.0.0.1" is not a CIDR',
      'networkPolicy.routerEgress[0].to[0].ipBlock.except[0]: "10.0.0.0" is not a CIDR',
    ],
  ],
  [
    "the router's admin port on its session port",
    { router: { containerPort: 9091 } },
    ["router.adminPort: equals router.containerPort. Fix: give them different ports"],
  ],
  [
    "hard anti-affinity and an own podAntiAffinity",
    { router: { podAntiAffinity: "hard", affinity: { podAntiAffinity: {} } } },
    ["router.podAntiAffinity: is hard, but router.affinity.podAntiAffinity is set too"],
  ],
  [
    "a repeated topology spread",
    {
      controlPlane: {
        topologySpread: [
          { topologyKey: "kubernetes.io/hostname" },
          { topologyKey: "kubernetes.io/hostname" },
        ],
      },
    },
    ["controlPlane.topologySpread[1]: repeats topologyKey kubernetes.io/hostname"],
  ],
  // Types and shapes come from values.schema.json.
  ["schema: an admin port out of range", { router: { adminPort: 70000 } }, ["/router/adminPort"]],
  [
    "schema: the removed routerTlsConfig",
    { metrics: { serviceMonitor: { routerTlsConfig: {} } } },
    ["routerTlsConfig"],
  ],
  ["schema: unknown anti-affinity", { router: { podAntiAffinity: "always" } }, ["/router/podAntiAffinity"]],
  [
    "schema: not a quantity",
    { controlPlane: { resources: { limits: { cpu: "lots" } } } },
    ["/controlPlane/resources/limits/cpu"],
  ],
  [
    "schema: a misspelt resources key",
    { router: { resources: { limit: { cpu: "1" } } } },
    ["/router/resources", "limit"],
  ],
  ["schema: an empty peer", { networkPolicy: { metricsFrom: [{}] } }, ["/networkPolicy/metricsFrom/0"]],
  [
    "schema: unknown whenUnsatisfiable",
    { router: { topologySpread: [{ topologyKey: "zone", whenUnsatisfiable: "Never" }] } },
    ["/router/topologySpread/0/whenUnsatisfiable"],
  ],
  [
    "schema: a bad priority class name",
    { router: { priorityClassName: "Tools!" } },
    ["/router/priorityClassName"],
  ],
];

interface ServicePort {
  name: string;
  port: number;
  targetPort: string | number;
  nodePort?: number;
}
interface ServiceSpec {
  type: string;
  clusterIP?: string;
  selector: Record<string, string>;
  ports: ServicePort[];
}
const serviceSpec = (m: Manifest) => (m as unknown as { spec: ServiceSpec }).spec;

describe("the routers' admin port (/metrics, /debug/*)", () => {
  const exposures: Array<[string, Values]> = [
    ["ClusterIP", {}],
    ["NodePort", { router: { service: { type: "NodePort", nodePort: 30443 } } }],
    ["LoadBalancer", { router: { service: { type: "LoadBalancer" } } }],
  ];

  it.each(exposures)(
    "is not in the routers' public Service (%s), with or without the ServiceMonitor",
    async (_type, values) => {
      for (const serviceMonitor of [false, true]) {
        const manifests = await helm.template({
          ...values,
          metrics: { serviceMonitor: { enabled: serviceMonitor } },
        });
        const spec = serviceSpec(find(manifests, "Service", "switchyard-router"));
        expect(spec.ports.map((p) => [p.name, p.targetPort])).toEqual([["https", "https"]]);
        expect(spec.ports.map((p) => p.port)).not.toContain(9091);
        // No Service that reaches beyond the cluster carries it either.
        for (const svc of manifests.filter((m) => m.kind === "Service")) {
          const s = serviceSpec(svc);
          if (s.ports.some((p) => p.targetPort === "admin" || p.port === 9091))
            expect({ name: svc.metadata.name, type: s.type, clusterIP: s.clusterIP }).toEqual({
              name: "switchyard-router-admin",
              type: "ClusterIP",
              clusterIP: "None",
            });
        }
      }
    },
  );

  it("is served by every router (--admin-listen) while the probes stay on the session port", async () => {
    const manifests = await helm.template({ router: { adminPort: 7091 } });
    const container = (
      find(manifests, "Deployment", "switchyard-router") as unknown as {
        spec: {
          template: {
            spec: {
              containers: {
                args: string[];
                ports: { name: string; containerPort: number }[];
                readinessProbe: { httpGet: { port: string } };
              }[];
            };
          };
        };
      }
    ).spec.template.spec.containers[0]!;
    expect(container.args).toContain("--admin-listen=:7091");
    expect(container.ports.map((p) => [p.name, p.containerPort])).toEqual([
      ["https", 8443],
      ["admin", 7091],
    ]);
    expect(container.readinessProbe.httpGet.port).toBe("https");
  });

  it("is what the routers' ServiceMonitor scrapes, over HTTP, through the headless admin Service only", async () => {
    const manifests = await helm.template({ metrics: { serviceMonitor: { enabled: true } } });
    const monitor = find(manifests, "ServiceMonitor", "switchyard-router") as unknown as {
      spec: {
        jobLabel: string;
        selector: { matchLabels: Record<string, string> };
        endpoints: { port: string; scheme: string; path: string }[];
      };
    };
    expect(monitor.spec.endpoints).toEqual([
      expect.objectContaining({ port: "admin", scheme: "http", path: "/metrics" }),
    ]);
    const selected = manifests.filter(
      (m) =>
        m.kind === "Service" &&
        Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => m.metadata.labels?.[k] === v),
    );
    expect(selected.map((m) => m.metadata.name)).toEqual(["switchyard-router-admin"]);
    const admin = serviceSpec(selected[0]!);
    expect(admin).toMatchObject({ type: "ClusterIP", clusterIP: "None", selector: selector("router") });
    expect(admin.ports).toEqual([{ name: "admin", port: 9091, targetPort: "admin", protocol: "TCP" }]);
    // The job stays the routers' name: dashboards and alerts keep matching.
    expect(selected[0]!.metadata.labels?.[monitor.spec.jobLabel]).toBe("switchyard-router");
    const off = await helm.template({});
    expect(off.some((m) => m.metadata.name === "switchyard-router-admin")).toBe(false);
  });
});

describe("helm template refuses invalid hardening values, naming the field", () => {
  it.each(invalid)("%s", async (_name, values, expected) => {
    const r = await helm.run(["template", "switchyard", chartDir, "--namespace", "switchyard"], [values]);
    expect(r.code, `helm accepted invalid values: ${JSON.stringify(values)}`).not.toBe(0);
    for (const s of expected) expect(r.stderr).toContain(s);
  });
});
