// The chart as third-party checkers see it: every values shape the suites use
// (chart/values-shapes.ts), rendered by the real helm binary, scored by kube-score and audited
// by Polaris at pinned versions (test/env builds them). Any finding fails, except those listed
// with their reason in kube-score.ignore and polaris.yaml (and in charts/README.md). A canary
// per checker proves it reads these renders: the default render with its NetworkPolicies and
// CPU limits removed must be reported.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { binaryPath, ensureBinaries } from "../../env/binaries.js";
import { chartDir, Helm, parseManifests } from "../../env/stack/helm.js";
import { valuesShapes, type ValuesShape } from "../chart/values-shapes.js";
import { runTool } from "./run-tool.js";

const here = dirname(fileURLToPath(import.meta.url));
const shapes = await valuesShapes();
/** The oldest Kubernetes the chart supports (Chart.yaml kubeVersion): kube-score checks API versions against it. */
const KUBERNETES_VERSION = "v1.28";

let helm: Helm;
let dir: string;
let files = 0;
beforeAll(async () => {
  [helm] = await Promise.all([Helm.create(), ensureBinaries(["kube-score", "polaris"])]);
  dir = mkdtempSync(join(tmpdir(), "switchyard-chart-checkers-"));
});
afterAll(() => {
  helm?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** `helm template` of one shape, written to a file of its own. */
async function render(shape: ValuesShape): Promise<string> {
  const r = await helm.run(
    ["template", "switchyard", chartDir, "--namespace", shape.namespace ?? "switchyard"],
    [shape.values],
  );
  if (r.code !== 0) throw new Error(`helm template (${shape.name}) failed:\n${r.stderr}`);
  return save(r.stdout);
}

function save(manifests: string): string {
  const file = join(dir, `render-${++files}.yaml`);
  writeFileSync(file, manifests);
  return file;
}

/** The default render without NetworkPolicies and without CPU limits: both checkers must object. */
async function brokenRender(): Promise<string> {
  const manifests = parseManifests(
    readFileSync(await render({ name: "default", usedBy: "", values: {} }), "utf8"),
  );
  const kept = manifests.filter((m) => m.kind !== "NetworkPolicy");
  for (const m of kept.filter((x) => x.kind === "Deployment")) {
    const pod = (
      m as unknown as { spec: { template: { spec: { containers: { resources: { limits: object } }[] } } } }
    ).spec.template.spec;
    for (const c of pod.containers) delete (c.resources.limits as Record<string, unknown>).cpu;
  }
  return save(kept.map((m) => stringify(m)).join("---\n"));
}

/** kube-score tests ignored on purpose: the non-comment lines of kube-score.ignore. */
function ignoredKubeScoreTests(): string[] {
  return readFileSync(join(here, "kube-score.ignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
}

/** kube-score's critical and warning lines for one render. */
async function kubeScore(file: string): Promise<string[]> {
  const r = await runTool(binaryPath("kube-score"), [
    "score",
    "--output-format",
    "ci",
    "--kubernetes-version",
    KUBERNETES_VERSION,
    ...ignoredKubeScoreTests().flatMap((t) => ["--ignore-test", t]),
    file,
  ]);
  const findings = r.stdout.split("\n").filter((l) => /^\[(CRITICAL|WARNING)\]/.test(l));
  // Exit 1 means critical findings; anything else non-zero means kube-score itself failed.
  if (r.code !== 0 && !(r.code === 1 && findings.length > 0))
    throw new Error(`kube-score failed (exit ${r.code}):\n${r.stderr}${r.stdout}`);
  return findings;
}

interface PolarisCheck {
  ID: string;
  Message: string;
  Success: boolean;
  Severity: string;
}
interface PolarisResult {
  Name: string;
  Kind: string;
  Results?: Record<string, PolarisCheck>;
  PodResult?: {
    Results?: Record<string, PolarisCheck>;
    ContainerResults?: { Name: string; Results?: Record<string, PolarisCheck> }[];
  };
}

/** Polaris's failed warning- and danger-level checks for one render, as "Kind/name [container] check: message". */
async function polaris(file: string): Promise<string[]> {
  const r = await runTool(binaryPath("polaris"), [
    "audit",
    "--audit-path",
    file,
    "--format",
    "json",
    "--config",
    join(here, "polaris.yaml"),
    "--merge-config",
  ]);
  if (r.code !== 0) throw new Error(`polaris failed (exit ${r.code}):\n${r.stderr}`);
  const audit = JSON.parse(r.stdout) as { Results: PolarisResult[] | null };
  const failed = (where: string, checks: Record<string, PolarisCheck> | undefined) =>
    Object.values(checks ?? {})
      .filter((c) => !c.Success && (c.Severity === "warning" || c.Severity === "danger"))
      .map((c) => `${where} ${c.ID} (${c.Severity}): ${c.Message}`);
  return (audit.Results ?? []).flatMap((o) => {
    const where = `${o.Kind}/${o.Name}`;
    return [
      ...failed(where, o.Results),
      ...failed(where, o.PodResult?.Results),
      ...(o.PodResult?.ContainerResults ?? []).flatMap((c) => failed(`${where} [${c.Name}]`, c.Results)),
    ];
  });
}

const cases = shapes.map((s) => [s.name, s] as const);

describe("kube-score", () => {
  it.each(cases)("finds nothing in the %s render", async (_name, shape) => {
    expect(await kubeScore(await render(shape)), `values: ${JSON.stringify(shape.values)}`).toEqual([]);
  });

  it("reports a render without NetworkPolicies and CPU limits (it reads these renders)", async () => {
    const findings = (await kubeScore(await brokenRender())).join("\n");
    expect(findings).toMatch(/switchyard-router.*does not have a matching NetworkPolicy/);
    expect(findings).toMatch(/switchyard-control-plane.*CPU limit is not set/);
  });
});

describe("Polaris", () => {
  it.each(cases)("finds nothing in the %s render", async (_name, shape) => {
    expect(await polaris(await render(shape)), `values: ${JSON.stringify(shape.values)}`).toEqual([]);
  });

  it("reports a render without CPU limits (it reads these renders)", async () => {
    const findings = (await polaris(await brokenRender())).join("\n");
    expect(findings).toMatch(/Deployment\/switchyard-router \[router\] cpuLimitsMissing/);
    expect(findings).toMatch(/Deployment\/switchyard-control-plane \[control-plane\] cpuLimitsMissing/);
  });
});

describe("what the Polaris exemptions leave to this test", () => {
  it.each(cases)(
    "%s: each Deployment runs >= 2 replicas (or its HPA does) and no RBAC rule has a wildcard",
    async (_name, shape) => {
      const manifests = parseManifests(readFileSync(await render(shape), "utf8"));
      for (const d of manifests.filter((m) => m.kind === "Deployment")) {
        const replicas = (d as unknown as { spec: { replicas?: number } }).spec.replicas;
        const hpa = manifests.find(
          (m) =>
            m.kind === "HorizontalPodAutoscaler" &&
            (m as unknown as { spec: { scaleTargetRef: { name: string } } }).spec.scaleTargetRef.name ===
              d.metadata.name,
        ) as unknown as { spec: { minReplicas: number } } | undefined;
        expect(replicas ?? hpa?.spec.minReplicas, `replicas of ${d.metadata.name}`).toBeGreaterThanOrEqual(2);
      }
      const wildcards = manifests
        .filter((m) => m.kind === "Role" || m.kind === "ClusterRole")
        .flatMap((m) =>
          ((m as unknown as { rules?: Record<string, string[] | undefined>[] }).rules ?? [])
            .filter((r) => [r.apiGroups, r.resources, r.verbs].some((list) => list?.includes("*")))
            .map((r) => `${m.kind}/${m.metadata.name}: ${JSON.stringify(r)}`),
        );
      expect(wildcards).toEqual([]);
    },
  );
});
