// Fuzz of the chart's values (fast-check) with the real helm binary and a real API server:
// values of every shape the chart documents — replicas, ports, images, TLS, scheduling maps
// and lists, labels and annotations, allow-lists, network policies, observability — mutated
// (fields removed, wrong types, out-of-range numbers, hostile and huge strings, unknown keys,
// emptied lists). `helm template` either fails naming a value path the mutation touched
// (values.schema.json: "at '/router/replicas'", or templates/_validate.tpl: "router.endpoint:
// … Fix: …"), never with a template crash; or it renders manifests that are valid YAML and
// that the API server accepts, object by object (server-side dry run): a broken manifest is
// never rendered silently.
import { ApiException, KubernetesObjectApi, type KubernetesObject } from "@kubernetes/client-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { ensureNamespace } from "../integration/control-plane/remote-fixtures.js";
import { fakeJwt } from "../integration/chart/values-shapes.js";
import { createCertificateAuthority, startClusterSet, type ClusterSet } from "../env/index.js";
import { chartDir, Helm } from "../env/stack/helm.js";
import { FUZZ_SEED, fuzzParameters } from "../support/fuzz-parameters.js";
import { dottedPath, mutatedJson, type Json, type Mutation } from "../support/mutated-json.js";
import { related } from "./control-plane-api-errors.js";

const RELEASE_NS = "switchyard";
let helm: Helm;
let set: ClusterSet;
let objects: KubernetesObjectApi;
let base: Json;

beforeAll(async () => {
  const [h, s, ca] = await Promise.all([
    Helm.create(),
    startClusterSet({ clusters: ["primary"], controllerManager: false }),
    createCertificateAuthority("helm-fuzz-ca"),
  ]);
  helm = h;
  set = s;
  const kc = set.get("primary").kubeConfig();
  await ensureNamespace(kc, RELEASE_NS);
  objects = KubernetesObjectApi.makeApiClient(kc);
  const client = await ca.issue({ commonName: "switchyard-primary", usage: "client" });
  const caData = Buffer.from(ca.certPem).toString("base64");
  const scheduling = (component: string): Json => ({
    replicas: 2,
    podAntiAffinity: "soft",
    priorityClassName: "",
    podLabels: { team: "platform", "example.com/tier": component },
    podAnnotations: { "example.com/owner": "team-a" },
    nodeSelector: { "kubernetes.io/os": "linux" },
    tolerations: [{ key: "dedicated", operator: "Equal", value: "tools", effect: "NoSchedule" }],
    topologySpread: [
      { topologyKey: "topology.kubernetes.io/zone", maxSkew: 1, whenUnsatisfiable: "ScheduleAnyway" },
    ],
    resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "1", memory: "512Mi" } },
    maxUnavailable: 1,
  });
  base = {
    nameOverride: "",
    fullnameOverride: "",
    image: {
      repository: "ghcr.io/switchyard-dev/switchyard",
      tag: "1.2.3",
      pullPolicy: "IfNotPresent",
      pullSecrets: ["regcred"],
    },
    tls: {
      secretName: "switchyard-tls",
      caKey: "ca.crt",
      agentSecretName: "agent-tls",
      agentServerName: "switchyard-agent",
    },
    controlPlane: {
      ...(scheduling("control-plane") as Record<string, Json>),
      leaderElection: { leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2 },
      healthCheckIntervalSeconds: 30,
      logLevel: "info",
      grpcPort: 9443,
      metricsPort: 9090,
      serviceAccountAnnotations: {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/switchyard",
      },
    },
    router: {
      ...(scheduling("router") as Record<string, Json>),
      autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 6, targetCPUUtilizationPercentage: 70 },
      containerPort: 8443,
      adminPort: 9091,
      service: {
        type: "LoadBalancer",
        port: 443,
        nodePort: 31443,
        annotations: { "example.com/lb": "internal" },
      },
      endpoint: "wss://switchyard.example.com",
      tokenAudience: "switchyard-route-discovery",
      tokenExpirationSeconds: 3600,
    },
    multiCluster: {
      enabled: true,
      clusterName: "primary",
      defaultCluster: "east",
      managementOnly: false,
      clusters: {
        east: { authType: "bearerToken", server: "https://east.example.com:6443", caData, token: fakeJwt() },
        south: {
          authType: "mtls",
          server: "https://south.example.com",
          caData,
          tls: { cert: client.certPem, key: client.keyPem },
        },
      },
    },
    sessions: {
      allowedNamespaces: ["team-a"],
      allowedTargetKinds: ["deployment"],
      allowedTargets: ["team-a/deployment/api-*"],
    },
    networkPolicy: {
      enabled: true,
      metricsFrom: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }],
      routerFrom: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["10.1.0.0/16"] } }],
      controlPlaneEgress: [
        { to: [{ ipBlock: { cidr: "0.0.0.0/0" } }], ports: [{ port: 443, protocol: "TCP" }] },
      ],
      routerEgress: [{}],
    },
    metrics: {
      serviceMonitor: { enabled: true, interval: "30s", labels: { release: "prometheus" } },
      grafanaDashboard: { enabled: true, namespace: RELEASE_NS, labels: { grafana_folder: "switchyard" } },
    },
  };
  // The base renders, and the API server accepts every object of it.
  const r = await render(base);
  expect(r.code, r.stderr).toBe(0);
  expect(await refusedObjects(r.stdout)).toEqual([]);
}, 240_000);

afterAll(async () => {
  helm?.close();
  await set?.stop();
});

function render(values: Json) {
  return helm.run(["template", "switchyard", chartDir, "--namespace", RELEASE_NS], [values as object]);
}

/** Objects of a render the API server refuses (dry run); kinds it does not serve are skipped. */
async function refusedObjects(stdout: string): Promise<string[]> {
  const problems: string[] = [];
  for (const doc of parseAllDocuments(stdout)) {
    if (doc.errors.length > 0) {
      problems.push(`rendered YAML does not parse: ${doc.errors[0]!.message.split("\n")[0]}`);
      continue;
    }
    const obj = doc.toJS() as KubernetesObject | null;
    if (obj === null || typeof obj !== "object") continue;
    const id = `${obj.kind}/${obj.metadata?.name}`;
    if (obj.apiVersion?.startsWith("monitoring.coreos.com/")) continue; // no Prometheus Operator CRDs here
    try {
      await objects.create(obj, undefined, "All");
    } catch (err) {
      if (err instanceof ApiException) {
        const body = String(err.body);
        let message = body;
        try {
          message = (JSON.parse(body) as { message?: string }).message ?? body;
        } catch {
          // not a Status: keep the body
        }
        // A namespace that does not exist here is the installer's to create, not a broken manifest.
        if (err.code === 404 && /^namespaces ".*" not found$/.test(message)) continue;
        problems.push(`${id}: ${err.code} ${message.slice(0, 600)}`);
      } else problems.push(`${id}: ${(err as Error).message.slice(0, 300)}`);
    }
  }
  return problems;
}

/** The value paths helm's refusal names: schema errors (`at '/a/b/0'`) and _validate.tpl's (`a.b[0]: …`). */
function namedPaths(stderr: string): string[] {
  // Helm prints non-ASCII keys as Go escapes.
  const text = stderr
    .replace(/\\U([0-9a-fA-F]{8})/g, (_, h: string) => String.fromCodePoint(parseInt(h, 16)))
    .replace(/\\u([0-9a-fA-F]{4})/g, (_, h: string) => String.fromCodePoint(parseInt(h, 16)));
  const schema = [...text.matchAll(/at '(\/[^']*)'/g)].map((m) =>
    m[1]!
      .split("/")
      .slice(1)
      .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
      .join("."),
  );
  const rules = [...text.matchAll(/^\s*- ([A-Za-z][\w.[\]/-]*): /gm)].map((m) => m[1]!);
  return [...schema, ...rules];
}

/** A lone surrogate cannot be written to a values file that helm reads (it says which file). */
const unreadable = (stderr: string) => /failed to parse .*values-\d+\.json/.test(stderr);

/** Cross-field rules of _validate.tpl: the path an error names → the values its rule also reads. */
const DEPENDS_ON: readonly [RegExp, readonly string[]][] = [
  [
    /^multiCluster\.(defaultCluster|clusterName|clusters)$/,
    [
      "multiCluster.enabled",
      "multiCluster.clusters",
      "multiCluster.clusterName",
      "multiCluster.managementOnly",
      "multiCluster.defaultCluster",
    ],
  ],
  [/^multiCluster\.clusters\..*\.isDefault$/, ["multiCluster.defaultCluster", "multiCluster.clusters"]],
  [/^controlPlane\.mode$/, ["multiCluster.enabled", "multiCluster.managementOnly", "multiClusterMember"]],
  [/^multiClusterMemberIamGroup$/, ["multiClusterMember"]],
  [/^controlPlane\.metricsPort$/, ["controlPlane.grpcPort"]],
  [/^router\.adminPort$/, ["router.containerPort"]],
  [/^router\.autoscaling\.minReplicas$/, ["router.autoscaling.maxReplicas", "router.autoscaling.enabled"]],
  [/^router\.service\.nodePort$/, ["router.service.type"]],
  [/^(controlPlane|router)\.podAntiAffinity$/, ["controlPlane.affinity", "router.affinity"]],
  [
    /^(controlPlane|router)\.resources\.requests\./,
    ["controlPlane.resources.limits", "router.resources.limits"],
  ],
];

const readsOf = (path: string): string[] => [
  path,
  ...DEPENDS_ON.filter(([re]) => re.test(path)).flatMap(([, deps]) => deps),
];

function expectPreciseRefusal(stderr: string, mutations: readonly Mutation[], values: Json): void {
  // JSON.stringify writes a lone surrogate as an escape, which helm's YAML reader refuses.
  if (unreadable(stderr) && /\\ud[89a-f][0-9a-f]{2}/i.test(JSON.stringify(values))) return;
  // A crash of a template (a function given the wrong type) names no value and no fix.
  expect(stderr, stderr.slice(0, 1500)).not.toMatch(
    /error calling|executing "|nil pointer|wrong type for value/,
  );
  expect(stderr, stderr.slice(0, 1500)).not.toMatch(/YAML parse error|error converting YAML/);
  const named = namedPaths(stderr);
  const touched = mutations.map((m) => dottedPath(m.path));
  // A cross-field rule names the other field and quotes the mutated one in its problem; a removed
  // value takes the chart's default, so a refusal names what no longer fits with it.
  const removed = mutations.some((m) => m.kind === "remove") && /switchyard values are invalid/.test(stderr);
  expect(
    named.some((n) => readsOf(n).some((r) => touched.some((t) => related(r, t)))) ||
      touched.some((t) => stderr.includes(t)) ||
      removed,
    `helm's refusal names none of ${JSON.stringify(touched)}:\n${stderr.slice(0, 1500)}`,
  ).toBe(true);
}

describe(`chart values under fuzz (seed ${FUZZ_SEED})`, () => {
  it("helm template refuses naming the value, or renders objects the API server accepts", async () => {
    const tally = { refused: 0, rendered: 0 };
    await fc.assert(
      fc.asyncProperty(mutatedJson(base, { maxMutations: 2 }), async ({ value, mutations }) => {
        const r = await render(value);
        if (r.code !== 0) {
          tally.refused++;
          return expectPreciseRefusal(r.stderr, mutations, value);
        }
        tally.rendered++;
        const refused = await refusedObjects(r.stdout);
        expect(
          refused,
          `helm rendered objects the API server refuses for mutations ${JSON.stringify(mutations.map((m) => [m.kind, m.path]))}`,
        ).toEqual([]);
      }),
      fuzzParameters(120),
    );
    console.info(`chart values: ${tally.refused} refused by helm, ${tally.rendered} rendered and accepted`);
    expect(tally.refused).toBeGreaterThan(0);
    expect(tally.rendered).toBeGreaterThan(0);
  });
});
