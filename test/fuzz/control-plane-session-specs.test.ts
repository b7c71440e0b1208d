// Fuzz of the session and operator CRs through the real API server (fast-check): mutated
// MultiClusterSession, ClusterSession and SwitchyardOperator specs — fields removed, wrong
// types, out-of-range numbers, hostile and huge strings, regexes that do not compile,
// duplicate list keys, targets of every shape. Each is either refused by the API server with a
// 422 naming a field the mutation touched (the CRD schema and CEL rules of proto/api/v1alpha1),
// or stored as a value the control plane's own types accept — and then the real controllers
// give it a verdict: the Primary's session controller and the member controller (east, agents
// stubbed) mark a session outside the allow-list Failed with Valid=False naming the field and
// the fix (counted in switchyard_sessions_invalid on the Primary), a target that does not exist
// Failed naming it. A valid MultiClusterSession and a valid ClusterSession created before the
// fuzzing stay Ready and keep being reconciled throughout.
import { createHash, randomBytes } from "node:crypto";
import { AppsV1Api, type KubeConfig } from "@kubernetes/client-node";
import { Value } from "@sinclair/typebox/value";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import {
  ClusterSessionSpec,
  MultiClusterSessionSpec,
  SwitchyardOperatorSpec,
  clusterSessionClient,
  multiClusterSessionClient,
  switchyardOperatorClient,
  type ClusterSession,
  type MultiClusterSession,
} from "../../proto/api/v1alpha1/index.js";
import { SessionAllowList, type SessionAllowListOptions } from "../../control-plane/src/allow-list/index.js";
import type { AgentProvisioner } from "../../control-plane/src/member/index.js";
import { ClusterRegistry } from "../../control-plane/src/primary/cluster-registry.js";
import {
  HeartbeatTracker,
  SessionController,
  registryWorkloadClusters,
} from "../../control-plane/src/primary/index.js";
import { installCrds } from "../../control-plane/src/runtime/index.js";
import { runPods, startClusterSet, type ClusterSet } from "../env/index.js";
import {
  NS,
  b64,
  ensureNamespace,
  putConfigMap,
  putCredentialSecret,
} from "../integration/control-plane/remote-fixtures.js";
import { startMember } from "../integration/member/member-harness.js";
import { FUZZ_SEED, fuzzParameters } from "../support/fuzz-parameters.js";
import { mutatedJson, type Json, type Mutation } from "../support/mutated-json.js";
import { eventually } from "../support/poll.js";
import { namesMutatedField, refusalOf, type Refusal } from "./control-plane-api-errors.js";

const APP_NS = "shop";
const OTHER_NS = "elsewhere";
const HASH = createHash("sha256").update("fuzz client").digest("hex");
const ALLOW: SessionAllowListOptions = {
  namespaces: [APP_NS],
  targetKinds: ["deployment", "statefulset"],
  targets: [`${APP_NS}/deployment/*`, `${APP_NS}/statefulset/db-*`],
};
const allowList = new SessionAllowList(ALLOW);
/** Cross-field CEL rules: the field an error names → the fields its rule reads (switchyard-operator.ts). */
const DEPENDS_ON = {
  "spec.defaultCluster": ["spec.clusters", "spec.clusterName", "spec.managementOnly"],
};
/** Root-rule messages: a refusal the API server reports on the object rather than on a field. */
const ROOT_RULES = [
  /metadata\.name must be mc-/,
  /must be named <spec\.parent\.name>-<spec\.parent\.cluster>/,
];

let set: ClusterSet;
let primary: KubeConfig;
let east: KubeConfig;
let registry: ClusterRegistry;
let sessions: SessionController;
let member: ReturnType<typeof startMember>;
const stop = new AbortController();
const running: Promise<unknown>[] = [];
const bystanders = { parent: "", child: "bystander-web" };

/** Agents that "serve" every ready pod: the member's real reconciler, no agent processes. */
const provisioner: AgentProvisioner = {
  mode: "process",
  async ensure({ resolved }) {
    const ready = resolved.pods.filter(
      (p) => p.status?.podIP && p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"),
    );
    if (ready.length === 0)
      return { agents: [], waiting: { reason: "NoReadyPod", message: "no ready pod yet" } };
    return {
      agents: ready.map((pod) => ({
        id: pod.metadata!.name!,
        pod,
        baseUrl: `ws://${pod.status!.podIP}:18080`,
      })),
    };
  },
  async release() {},
};

async function createDeployment(kc: KubeConfig, name: string): Promise<void> {
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: APP_NS,
    body: {
      metadata: { name },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: { containers: [{ name: "app", image: "registry.example/app:1" }] },
        },
      },
    },
  });
}

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary", "east"] });
  primary = set.get("primary").kubeConfig();
  east = set.get("east").kubeConfig();
  for (const kc of [primary, east]) {
    await installCrds(kc);
    await ensureNamespace(kc, APP_NS);
    await ensureNamespace(kc, OTHER_NS);
  }
  await ensureNamespace(primary, NS);
  await createDeployment(east, "web");
  await runPods(east, APP_NS, "app=web", 1);
  const user = await set.get("east").mintUser("switchyard-primary", ["system:masters"]);
  await putCredentialSecret(primary, "east", { "tls.crt": user.certPem, "tls.key": user.keyPem });
  await putConfigMap(
    primary,
    "switchyard-clusters",
    stringify({
      enabled: true,
      clusterName: "primary",
      defaultCluster: "east",
      managementOnly: true,
      clusters: {
        east: { authType: "mtls", server: set.get("east").server, caData: b64(set.get("east").caPem) },
      },
    }),
  );
  registry = new ClusterRegistry({
    kubeConfig: primary,
    namespace: NS,
    identity: "fuzz-0",
    checkIntervalMs: 60_000,
    leaseName: "switchyard-fuzz",
  });
  running.push(registry.start(stop.signal));
  await registry.ready();
  member = startMember(east, provisioner, { allowList: ALLOW });
  sessions = new SessionController({
    primaryKubeConfig: primary,
    clusters: registryWorkloadClusters(registry, primary),
    heartbeat: new HeartbeatTracker(),
    allowList: ALLOW,
    heartbeatIntervalMs: 1_000,
    childRenewIntervalMs: 2_000,
    requestTimeoutMs: 3_000,
    resyncMs: 5_000,
    topologyCheckMs: 500,
  });
  running.push(sessions.start(stop.signal));

  // The bystanders: one session of each kind, Ready before the fuzzing starts.
  bystanders.parent = `mc-${randomBytes(8).toString("hex")}`;
  await multiClusterSessionClient(primary).create({
    metadata: { name: bystanders.parent, namespace: APP_NS },
    spec: { target: "deployment/web", clientKeyHash: HASH, ttlSeconds: 3600 },
  });
  await clusterSessionClient(east).create({
    metadata: { name: bystanders.child, namespace: APP_NS },
    spec: { target: "deployment/web/container/app", clientKeyHash: HASH, ttlSeconds: 3600 },
  });
  await expectBystandersReady();
}, 240_000);

afterAll(async () => {
  stop.abort();
  await member?.stop();
  await Promise.allSettled(running);
  await set?.stop();
}, 60_000);

async function expectBystandersReady(): Promise<void> {
  await eventually(
    "the bystander MultiClusterSession Ready",
    async () =>
      (await multiClusterSessionClient(primary).get({ namespace: APP_NS, name: bystanders.parent }))?.status
        ?.phase === "Ready",
    { timeoutMs: 60_000 },
  );
  await eventually(
    "the bystander ClusterSession Ready",
    async () =>
      (await clusterSessionClient(east).get({ namespace: APP_NS, name: bystanders.child }))?.status?.phase ===
      "Ready",
    { timeoutMs: 60_000 },
  );
}

/** Creates through the API server: the stored object, or the refusal. */
async function attempt<T>(write: Promise<T>): Promise<{ stored: T } | { refused: Refusal }> {
  try {
    return { stored: await write };
  } catch (err) {
    const refused = refusalOf(err);
    if (!refused) throw err;
    return { refused };
  }
}

/** A 422 naming a field the mutations touched (or a root rule), in a message of bounded size. */
function expectPreciseRefusal(refused: Refusal, mutations: readonly Mutation[], what: string): void {
  expect(refused.code, `${what}: ${refused.message.slice(0, 500)}`).toBe(422);
  const named =
    namesMutatedField(refused, mutations, "spec", DEPENDS_ON) ||
    namesMutatedField(refused, mutations, "metadata") ||
    ROOT_RULES.some((r) => r.test(refused.message));
  expect(
    named,
    `${what}: refusal names none of ${JSON.stringify(mutations.map((m) => m.path))}: ${refused.message.slice(0, 800)}`,
  ).toBe(true);
}

// Regexes for SQS message filters, valid and not (RE2, as the API server compiles them).
const FILTER_REGEXES = ["^dev-.*$", "(", "[a-", "a{1001}", "(?=x)", "\\p{Nope}", "(a+)+$", "x**", "a|b", ""];
const TARGETS = [
  "deployment/web",
  "deployment/web/container/app",
  "deployment/missing",
  "statefulset/db-main",
  "statefulset/cache",
  "pod/web-0",
  "deployment/a.b.c",
];

const connectParams = (filter: string): Json => ({
  databaseBranches: [{ envVar: "DATABASE_URL", kind: "PgBranchDatabase", name: "branch-1" }],
  sqsSplit: [{ queueId: "orders.fifo", messageFilter: { tenant: filter } }],
  featureFlags: { layerReconnect: true },
  outputQueues: { east: { "orders.fifo": "https://sqs.eu-north-1.amazonaws.com/1/tmp-orders.fifo" } },
});

/** A spec built from valid parts and a chosen target and filter regex, then mutated. */
const specArb = (extra: Record<string, Json>) =>
  fc
    .record({
      target: fc.constantFrom(...TARGETS),
      filter: fc.oneof(
        { weight: 3, arbitrary: fc.constant(FILTER_REGEXES[0]!) },
        { weight: 2, arbitrary: fc.constantFrom(...FILTER_REGEXES) },
      ),
      namespace: fc.constantFrom(APP_NS, APP_NS, APP_NS, OTHER_NS),
    })
    .chain(({ target, filter, namespace }) => {
      const base: Record<string, Json> = {
        target,
        clientKeyHash: HASH,
        ttlSeconds: 300,
        connectParams: connectParams(filter),
        ...extra,
      };
      // Half are left whole (only the filter regex may not compile), so valid specs reach the controllers.
      return fc
        .option(mutatedJson<Json>(base, { maxMutations: 2 }), { freq: 2, nil: undefined })
        .map((m) => ({
          namespace,
          spec: (m?.value ?? base) as Record<string, Json>,
          mutations: [
            ...(m?.mutations ?? []),
            {
              kind: "hostileString",
              path: ["connectParams", "sqsSplit", 0, "messageFilter", "tenant"],
            } as Mutation,
          ],
        }));
    });

/** What the controllers must say about a stored session (checked once the fuzzing is done). */
interface Stored {
  kind: "parent" | "child";
  namespace: string;
  name: string;
  spec: { target: string };
}

function expectedVerdict(s: Stored): ReturnType<SessionAllowList["check"]> {
  return allowList.check(s.namespace, s.spec.target);
}

/**
 * Waits for the controllers' verdict on every session stored by a property (well within their
 * TTL): outside the allow-list → Failed, Valid=False naming the field and the fix; allowed but
 * absent → Failed naming the target; the Deployment that exists → Ready.
 */
async function expectVerdicts(
  stored: readonly Stored[],
): Promise<{ refused: number; missing: number; served: number }> {
  const verdicts = { refused: 0, missing: 0, served: 0 };
  await Promise.all(
    stored.map(async (s) => {
      const verdict = expectedVerdict(s);
      const read = () =>
        s.kind === "parent"
          ? multiClusterSessionClient(primary).get({ namespace: s.namespace, name: s.name })
          : clusterSessionClient(east).get({ namespace: s.namespace, name: s.name });
      const obj = (await eventually(
        `a verdict on ${s.kind} ${s.namespace}/${s.name} (${s.spec.target})`,
        async () => {
          const o = (await read()) as MultiClusterSession | ClusterSession | undefined;
          const phase = o?.status?.phase;
          if (!verdict.allowed) return phase === "Failed" && o;
          return (phase === "Failed" || phase === "Ready") && o;
        },
        { timeoutMs: 45_000, intervalMs: 500 },
      )) as MultiClusterSession | ClusterSession;
      const conditions = obj.status?.conditions ?? [];
      if (!verdict.allowed) {
        verdicts.refused++;
        const valid = conditions.find((c) => c.type === "Valid");
        expect(valid, JSON.stringify(conditions)).toMatchObject({
          status: "False",
          reason: verdict.reason,
          message: verdict.message,
        });
        expect(valid!.message.startsWith(`${verdict.field}: `)).toBe(true);
        expect(valid!.message).toMatch(/ask an administrator|ask an\s+administrator/);
        return;
      }
      const name = s.spec.target.split("/")[1]!;
      if (name === "web") {
        verdicts.served++;
        // These control planes split no queues: a session asking for a split is Failed, naming the fix.
        const splits = (s.spec as { connectParams?: { sqsSplit?: unknown[] } }).connectParams?.sqsSplit ?? [];
        if (splits.length > 0) {
          expect(obj.status?.phase).toBe("Failed");
          expect(JSON.stringify(obj.status)).toContain("queues.sqs.enabled=true");
        } else expect(obj.status?.phase).toBe("Ready");
        return;
      }
      // Allowed, but nothing of that name: Failed, naming the target (the parent shows its child's error).
      verdicts.missing++;
      expect(obj.status?.phase).toBe("Failed");
      const text = JSON.stringify(obj.status);
      expect(text).toContain(`${s.spec.target.split("/")[0]} ${name} not found in namespace ${s.namespace}`);
    }),
  );
  return verdicts;
}

describe(`session CRs through the real API server (seed ${FUZZ_SEED})`, () => {
  it("MultiClusterSession specs: refused naming the field, or stored valid and given a verdict", async () => {
    const mcs = multiClusterSessionClient(primary);
    const stored: Stored[] = [];
    const local = { refused: 0 };
    await fc.assert(
      fc.asyncProperty(specArb({ failurePolicy: "BestEffort" }), async ({ namespace, spec, mutations }) => {
        const name = `mc-${randomBytes(8).toString("hex")}`;
        const r = await attempt(mcs.create({ metadata: { name, namespace }, spec: spec as never }));
        if ("refused" in r) {
          local.refused++;
          return expectPreciseRefusal(r.refused, mutations, "MultiClusterSession");
        }
        const errors = [...Value.Errors(MultiClusterSessionSpec, r.stored.spec)].map(
          (e) => `${e.path}: ${e.message}`,
        );
        expect(errors, "the API server stored a spec the control plane's type refuses").toEqual([]);
        stored.push({ kind: "parent", namespace, name, spec: r.stored.spec });
      }),
      fuzzParameters(150),
    );
    expect(stored.length, "no fuzzed session was stored: nothing reached the controllers").toBeGreaterThan(0);
    const verdicts = await expectVerdicts(stored);
    // The Primary counts the refused parents it holds, by reason.
    const metrics = await sessions.sessionMetrics.registry.metrics();
    for (const reason of ["NamespaceNotAllowed", "TargetKindNotAllowed", "TargetNotAllowed"]) {
      const n = stored.filter((s) => {
        const v = expectedVerdict(s);
        return !v.allowed && v.reason === reason;
      }).length;
      expect(metrics).toContain(`switchyard_sessions_invalid{reason="${reason}"} ${n}`);
    }
    console.info(
      `MultiClusterSession: ${local.refused} refused by the API server, ${stored.length} stored; ` +
        `the Primary refused ${verdicts.refused}, ${verdicts.missing} failed (no such target), ${verdicts.served} Ready`,
    );
    await Promise.all(stored.map((s) => multiClusterSessionClient(primary).delete(s)));
  });

  it("ClusterSession specs (single-cluster and children): refused naming the field, or stored valid and given a verdict", async () => {
    const cs = clusterSessionClient(east);
    const stored: Stored[] = [];
    const local = { refused: 0 };
    const parentArb = fc.constantFrom<Json>(
      { name: "mc-0123456789abcdef", cluster: "east", primaryClusterId: "primary" },
      { name: "mc-0123456789abcdef", cluster: "west", primaryClusterId: "primary" },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.tuple(specArb({}), fc.option(parentArb, { nil: undefined })),
        async ([{ namespace, spec, mutations }, parent]) => {
          const withParent = parent !== undefined && typeof spec === "object" && spec !== null;
          const full = withParent ? { ...spec, parent } : spec;
          const p = parent as { name: string; cluster: string } | undefined;
          // A child is named <parent>-<cluster>: one parent, so each name once (deleted before reuse).
          const name = p ? `${p.name}-${p.cluster}` : `fuzz-${randomBytes(6).toString("hex")}`;
          if (p) await deleteAndWait(east, namespace, name);
          const r = await attempt(cs.create({ metadata: { name, namespace }, spec: full as never }));
          if ("refused" in r) {
            local.refused++;
            return expectPreciseRefusal(r.refused, mutations, "ClusterSession");
          }
          const errors = [...Value.Errors(ClusterSessionSpec, r.stored.spec)].map(
            (e) => `${e.path}: ${e.message}`,
          );
          expect(errors, "the API server stored a spec the control plane's type refuses").toEqual([]);
          if (!p) stored.push({ kind: "child", namespace, name, spec: r.stored.spec });
          else await deleteAndWait(east, namespace, name);
        },
      ),
      fuzzParameters(120),
    );
    expect(stored.length, "no fuzzed session was stored: nothing reached the member").toBeGreaterThan(0);
    const verdicts = await expectVerdicts(stored);
    console.info(
      `ClusterSession: ${local.refused} refused by the API server, ${stored.length} stored; ` +
        `the member refused ${verdicts.refused}, ${verdicts.missing} failed (no such target), ${verdicts.served} Ready`,
    );
    await Promise.all(stored.map((s) => clusterSessionClient(east).delete(s)));
  });

  it("SwitchyardOperator specs: refused naming the field, or stored valid", async () => {
    const op = switchyardOperatorClient(east);
    const base: Json = {
      clusterName: "east",
      defaultCluster: "west",
      managementOnly: false,
      multiCluster: true,
      clusters: [{ name: "west", server: "https://west.example.com:6443", authType: "mtls" }],
      allowList: { namespaces: ["shop"], targetKinds: ["deployment"], targets: ["shop/deployment/api-*"] },
    };
    const tally = { refused: 0, stored: 0 };
    await fc.assert(
      fc.asyncProperty(mutatedJson(base, { maxMutations: 2 }), async ({ value, mutations }) => {
        await op.delete({ name: "operator" });
        const r = await attempt(op.create({ metadata: { name: "operator" }, spec: value as never }));
        if ("refused" in r) {
          tally.refused++;
          return expectPreciseRefusal(r.refused, mutations, "SwitchyardOperator");
        }
        tally.stored++;
        const errors = [...Value.Errors(SwitchyardOperatorSpec, r.stored.spec)].map(
          (e) => `${e.path}: ${e.message}`,
        );
        expect(errors, "the API server stored a spec the control plane's type refuses").toEqual([]);
      }),
      fuzzParameters(150),
    );
    expect(tally.refused).toBeGreaterThan(0);
    expect(tally.stored).toBeGreaterThan(0);
    console.info(`SwitchyardOperator: ${tally.refused} refused by the API server, ${tally.stored} stored`);
  });

  it("a filter regex that does not compile is refused by the API server, naming the field and the fix", async () => {
    for (const [regex, problem] of [
      ["(", /missing closing \)/],
      ["(?=x)", /invalid or unsupported Perl syntax/],
      ["a{1001}", /invalid repeat count/],
    ] as const) {
      const r = await attempt(
        multiClusterSessionClient(primary).create({
          metadata: { name: `mc-${randomBytes(8).toString("hex")}`, namespace: APP_NS },
          spec: {
            target: "deployment/web",
            clientKeyHash: HASH,
            connectParams: connectParams(regex) as never,
          },
        }),
      );
      if (!("refused" in r)) throw new Error(`the API server stored the filter regex ${regex}`);
      expect(r.refused.code).toBe(422);
      expect(r.refused.fields).toContain("spec.connectParams.sqsSplit[0].messageFilter");
      expect(r.refused.message).toMatch(problem);
      expect(r.refused.message).toContain("must be a regular expression in RE2 syntax");
    }
  });

  it("the bystander sessions stayed Ready and are still reconciled", async () => {
    await expectBystandersReady();
    // A spec change is observed: the parent's observedGeneration follows its generation.
    const ref = { namespace: APP_NS, name: bystanders.parent };
    const patched = await multiClusterSessionClient(primary).patch(ref, { spec: { ttlSeconds: 3599 } });
    await eventually("the bystander parent reconciled after a spec change", async () => {
      const p = await multiClusterSessionClient(primary).get(ref);
      return p?.status?.observedGeneration === patched.metadata.generation && p?.status?.phase === "Ready";
    });
    const child = await clusterSessionClient(east).get({ namespace: APP_NS, name: bystanders.child });
    expect(child?.status?.phase).toBe("Ready");
    expect(child?.status?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
  });
});

async function deleteAndWait(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  const cs = clusterSessionClient(kc);
  if (!(await cs.delete({ namespace, name }))) return;
  await eventually(
    `ClusterSession ${namespace}/${name} gone`,
    async () => !(await cs.get({ namespace, name })),
  );
}
