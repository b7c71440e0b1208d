// SQS queue splitting in the chart, rendered by the real helm binary (no API server needed):
// `queues.sqs` becomes --sqs-splitting, --sqs-region and --sqs-endpoint on the control plane,
// which the control plane's own parser accepts; RBAC on QueueConsumers comes with it (and the
// workload patch the member side already has); values the control plane would refuse — a
// region that is not one, an endpoint that is not an http(s) URL, splitting on a primary-only
// control plane, a region or endpoint without splitting — fail `helm template` naming the field
// and the fix, and shapes the schema refuses name the value path.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseControlPlaneArgs } from "../../../control-plane/src/control-plane-options.js";
import { chartDir, find, Helm, type Manifest } from "../../env/stack/helm.js";
import { testScratchDir } from "../../support/scratch-dir.js";

let helm: Helm;
beforeAll(async () => {
  helm = await Helm.create();
});
afterAll(() => helm?.close());

type Values = Record<string, unknown>;
type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

const member = (sqs: Values): Values => ({
  multiClusterMember: true,
  router: { endpoint: "wss://east.example.com" },
  queues: { sqs },
});
const primaryOnly: Values = {
  multiCluster: {
    enabled: true,
    clusterName: "primary",
    managementOnly: true,
    defaultCluster: "east",
    clusters: { east: { authType: "bearerToken", server: "https://east.example.com" } },
  },
};

const controlPlaneArgs = (manifests: readonly Manifest[]): string[] =>
  (
    find(manifests, "Deployment", "switchyard-control-plane") as unknown as {
      spec: { template: { spec: { containers: { args: string[] }[] } } };
    }
  ).spec.template.spec.containers[0]!.args;
const rulesOf = (manifests: readonly Manifest[]): Rule[] =>
  (find(manifests, "ClusterRole", "switchyard-control-plane") as unknown as { rules: Rule[] }).rules;
const allows = (rules: readonly Rule[], group: string, resource: string, verb: string): boolean =>
  rules.some(
    (r) =>
      r.apiGroups.includes(group) &&
      r.resources.includes(resource) &&
      r.verbs.includes(verb) &&
      r.resourceNames === undefined,
  );

/** The rendered flags as the control plane parses them (TLS paths pointed at scratch files). */
function parsed(args: readonly string[]) {
  const dir = testScratchDir("chart-queue-flags-");
  for (const f of ["tls.crt", "tls.key"]) writeFileSync(join(dir, f), f);
  return parseControlPlaneArgs(
    args.slice(1).map((a) => a.replace(/=\/etc\/switchyard\/tls\//, `=${dir}/`)),
    {},
  );
}

describe("queues.sqs renders", () => {
  it("no flag and no QueueConsumer rights by default", async () => {
    const manifests = await helm.template({});
    expect(controlPlaneArgs(manifests).filter((a) => a.startsWith("--sqs-"))).toEqual([]);
    expect(allows(rulesOf(manifests), "switchyard.dev", "queueconsumers", "list")).toBe(false);
    expect(parsed(controlPlaneArgs(manifests)).queues).toEqual({
      splitting: false,
      region: undefined,
      endpoint: undefined,
    });
  });

  it("the three flags on a member, which the control plane accepts", async () => {
    const args = controlPlaneArgs(
      await helm.template(
        member({ enabled: true, region: "eu-north-1", endpoint: "http://elasticmq.queues.svc:9324" }),
      ),
    );
    expect(args.filter((a) => a.startsWith("--sqs-"))).toEqual([
      "--sqs-splitting",
      "--sqs-region=eu-north-1",
      "--sqs-endpoint=http://elasticmq.queues.svc:9324",
    ]);
    expect(parsed(args)).toMatchObject({
      mode: "member",
      queues: { splitting: true, region: "eu-north-1", endpoint: "http://elasticmq.queues.svc:9324" },
    });
  });

  it("only --sqs-splitting when region and endpoint are left to the AWS environment, in mode both", async () => {
    const args = controlPlaneArgs(await helm.template({ queues: { sqs: { enabled: true } } }));
    expect(args.filter((a) => a.startsWith("--sqs-"))).toEqual(["--sqs-splitting"]);
    expect(parsed(args)).toMatchObject({ mode: "both", queues: { splitting: true, region: undefined } });
  });

  it("QueueConsumer rights, on top of the workload get/patch the member side already has", async () => {
    const manifests = await helm.template(member({ enabled: true, region: "us-gov-west-1" }));
    const rules = rulesOf(manifests);
    for (const verb of ["get", "list", "watch"])
      expect(allows(rules, "switchyard.dev", "queueconsumers", verb), verb).toBe(true);
    expect(allows(rules, "switchyard.dev", "queueconsumers/status", "patch")).toBe(true);
    for (const verb of ["create", "update", "delete"])
      expect(allows(rules, "switchyard.dev", "queueconsumers", verb), verb).toBe(false);
    // Pointing the consumer's variable at a temporary queue and back: the sidecar's workload rule.
    for (const resource of ["deployments", "statefulsets"]) {
      expect(allows(rules, "apps", resource, "get"), resource).toBe(true);
      expect(allows(rules, "apps", resource, "patch"), resource).toBe(true);
      expect(allows(rules, "apps", resource, "update"), resource).toBe(false);
    }
    const crdNames = rules.find((r) => r.resources.includes("customresourcedefinitions"))!.resourceNames;
    expect(crdNames).toContain("queueconsumers.switchyard.dev");
  });

  it("the IRSA role on the control plane's ServiceAccount", async () => {
    const role = "arn:aws:iam::111122223333:role/switchyard-queues";
    const manifests = await helm.template({
      ...member({ enabled: true, region: "eu-north-1" }),
      controlPlane: { serviceAccountAnnotations: { "eks.amazonaws.com/role-arn": role } },
    });
    const sa = find(manifests, "ServiceAccount", "switchyard-control-plane") as Manifest & {
      metadata: { annotations?: Record<string, string> };
    };
    expect(sa.metadata.annotations).toEqual({ "eks.amazonaws.com/role-arn": role });
  });
});

describe("queues.sqs.credentialsSecret", () => {
  it("becomes the control plane's environment from the Secret, only when splitting", async () => {
    const envFrom = (manifests: readonly Manifest[]) =>
      (
        find(manifests, "Deployment", "switchyard-control-plane") as unknown as {
          spec: { template: { spec: { containers: { envFrom?: unknown[] }[] } } };
        }
      ).spec.template.spec.containers[0]!.envFrom;
    expect(
      envFrom(
        await helm.template(
          member({ enabled: true, endpoint: "http://elasticmq:9324", credentialsSecret: "sqs-creds" }),
        ),
      ),
    ).toEqual([{ secretRef: { name: "sqs-creds" } }]);
    expect(envFrom(await helm.template(member({ enabled: true })))).toBeUndefined();
  });
});

describe("helm template refuses queues.sqs values the control plane would refuse, naming the field", () => {
  it.each<[string, Values, string[]]>([
    [
      "a region that is not an AWS region",
      member({ enabled: true, region: "north" }),
      [
        'queues.sqs.region: "north" is not an AWS region. Fix: set it to the queues\' region, like eu-north-1',
      ],
    ],
    [
      "an endpoint that is not a URL",
      member({ enabled: true, endpoint: "elasticmq:9324" }),
      [
        'queues.sqs.endpoint: "elasticmq:9324" is not an http(s) URL',
        "e.g. http://elasticmq.queues.svc:9324",
      ],
    ],
    [
      "an endpoint with a query",
      member({ enabled: true, endpoint: "https://sqs.example.com/?x=1" }),
      ["queues.sqs.endpoint:", "is not an http(s) URL without query"],
    ],
    [
      "splitting on a primary-only control plane",
      { ...primaryOnly, queues: { sqs: { enabled: true, region: "eu-north-1" } } },
      [
        "queues.sqs.enabled: a primary-only control plane splits no queues",
        "Fix: set queues.sqs.enabled: true on the workload clusters' installs",
      ],
    ],
    [
      "a region without splitting",
      member({ enabled: false, region: "eu-north-1" }),
      ["queues.sqs.region: has no effect while queues.sqs.enabled is false"],
    ],
    [
      "schema: a region with a space",
      member({ enabled: true, region: "eu north 1" }),
      ["/queues/sqs/region"],
    ],
    ["schema: enabled not a boolean", member({ enabled: "yes" }), ["/queues/sqs/enabled"]],
    [
      "credentials without splitting",
      member({ enabled: false, credentialsSecret: "sqs-creds" }),
      ["queues.sqs.credentialsSecret: has no effect while queues.sqs.enabled is false"],
    ],
    [
      "schema: a Secret name that is not one",
      member({ enabled: true, credentialsSecret: "Sqs_Creds" }),
      ["/queues/sqs/credentialsSecret"],
    ],
    ["schema: a misspelt field", { queues: { sqs: { enabled: true, regions: "x" } } }, ["regions"]],
  ])("%s", async (_what, values, expected) => {
    const r = await helm.run(["template", "switchyard", chartDir, "--namespace", "switchyard"], [values]);
    expect(r.code, `helm accepted invalid values: ${JSON.stringify(values)}`).not.toBe(0);
    for (const s of expected) expect(r.stderr).toContain(s);
  });
});
