// Fuzz of the Primary's remote-cluster configuration through the real API server and the real
// ClusterRegistry (fast-check). Credential Secrets of two victim clusters get malformed
// material — garbage, truncated and swapped PEM, a key of another certificate, an expired
// certificate, encrypted keys, tokens that are not JWTs or carry no usable claims — and the
// clusters ConfigMap gets mutated documents and YAML that does not parse. Properties after
// each write: the victim's error names the Secret key and the fix (exactly what the
// control plane's parser says), a refused ConfigMap leaves the last valid configuration in
// force and shows every field in ConfigurationValid=False, each rejection is counted in
// switchyard_cluster_config_rejections_total, no log line, status or error carries the secret
// bytes (a canary in them), and the healthy cluster stays connected throughout.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { switchyardOperatorClient } from "../../proto/api/v1alpha1/index.js";
import {
  parseClusterConfig,
  validateClusterConfig,
  type MultiClusterConfig,
} from "../../control-plane/src/config/cluster-config.js";
import {
  ClusterConfigError,
  ClusterConfigErrors,
} from "../../control-plane/src/config/cluster-config-error.js";
import {
  CREDENTIALS_LABEL,
  credentialSecretName,
  parseCredentialSecret,
} from "../../control-plane/src/config/credential-secret.js";
import { ClusterRegistry } from "../../control-plane/src/primary/cluster-registry.js";
import { installCrds } from "../../control-plane/src/runtime/index.js";
import { startClusterSet, type ClusterSet } from "../env/index.js";
import {
  NS,
  b64,
  capturingLogger,
  ensureNamespace,
  putConfigMap,
} from "../integration/control-plane/remote-fixtures.js";
import { FUZZ_SEED, fuzzParameters } from "../support/fuzz-parameters.js";
import { CANARY, credentialArbitraries, type CredentialMaterial } from "../support/malformed-credentials.js";
import { mutatedJson, type Json } from "../support/mutated-json.js";
import { eventually } from "../support/poll.js";

const CONFIG_MAP = "switchyard-clusters";
let set: ClusterSet;
let primary: KubeConfig;
let registry: ClusterRegistry;
let lines: string[];
let material: CredentialMaterial;
/** A token east really issued (ServiceAccount `victim`), so bearer material can connect too. */
let realToken: string;
let baseline: Json;
let baselineConfig: MultiClusterConfig;
const stop = new AbortController();
let run: Promise<void>;
/** Every secret value written, to look for in logs and status (besides the canary). */
const written = new Set<string>();

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary", "east"], controllerManager: false });
  primary = set.get("primary").kubeConfig();
  await installCrds(primary);
  await ensureNamespace(primary);
  const east = set.get("east");
  const issue = (
    commonName: string,
    extra: { validForSeconds?: number; notBeforeOffsetSeconds?: number } = {},
  ) => east.ca.issue({ commonName, organizations: ["system:masters"], usage: "client", ...extra });
  material = {
    caPem: east.caPem,
    pair: await issue("victim"),
    other: await issue("other"),
    expired: await issue("expired", { notBeforeOffsetSeconds: -7_200, validForSeconds: -60 }),
  };
  const eastAdmin = east.kubeConfig();
  await ensureNamespace(eastAdmin, NS);
  const core = eastAdmin.makeApiClient(CoreV1Api);
  await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: "victim" } } });
  realToken = (
    await core.createNamespacedServiceAccountToken({
      namespace: NS,
      name: "victim",
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    })
  ).status!.token;
  written.add(realToken);
  const healthy = await issue("switchyard-primary");
  written.add(healthy.keyPem.split("\n")[1]!);
  await putSecret("east", { "tls.crt": healthy.certPem, "tls.key": healthy.keyPem });
  // east is healthy; west (mtls) and north (bearerToken) are the victims, on the same API server.
  const remote = (authType: string) => ({ authType, server: east.server, caData: b64(east.caPem) });
  baseline = {
    enabled: true,
    clusterName: "primary",
    defaultCluster: "east",
    managementOnly: true,
    clusters: { east: remote("mtls"), west: remote("mtls"), north: remote("bearerToken") },
  };
  baselineConfig = validateClusterConfig(baseline);
  await putConfigMap(primary, CONFIG_MAP, stringify(baseline));
  const captured = capturingLogger();
  lines = captured.lines;
  registry = new ClusterRegistry({
    kubeConfig: primary,
    namespace: NS,
    identity: "fuzz-registry",
    configMapName: CONFIG_MAP,
    checkIntervalMs: 60_000,
    requestTimeoutMs: 2_000,
    leaseName: "switchyard-fuzz-registry",
    retryPeriodMs: 500,
    logger: captured.logger,
  });
  run = registry.start(stop.signal);
  await registry.ready();
  await eventually("the registry leads", () => registry.isLeader());
  await round((h) => h.find((c) => c.name === "east")?.connected !== undefined);
}, 240_000);

afterAll(async () => {
  stop.abort();
  await run?.catch(() => undefined);
  await set?.stop();
}, 60_000);

/** Writes a credential Secret with raw bytes per key (as `data`, so any bytes survive). */
async function putSecret(cluster: string, values: Record<string, string>): Promise<void> {
  const core = primary.makeApiClient(CoreV1Api);
  const name = credentialSecretName(cluster);
  const data = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, b64(v)]));
  const body = { metadata: { name, namespace: NS, labels: { [CREDENTIALS_LABEL]: "true" } }, data };
  try {
    await core.replaceNamespacedSecret({ name, namespace: NS, body });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
    await core.createNamespacedSecret({ namespace: NS, body });
  }
}

type Health = ReturnType<ClusterRegistry["health"]>;
/** Kicks check rounds until `ok` holds for a round's health; resolves with that health. */
function round(
  ok: (h: Health) => boolean,
  what = "a check round showing the expected state",
): Promise<Health> {
  return eventually(
    what,
    async () => {
      const next = registry.nextRound();
      registry.kickNow();
      const h = await next;
      return ok(h) && h;
    },
    { timeoutMs: 20_000, intervalMs: 20 },
  );
}

function expectNothingSecretIn(text: string, where: string): void {
  expect(text.includes(CANARY), `the canary appears in ${where}`).toBe(false);
  expect(text, where).not.toMatch(/PRIVATE KEY-----/);
  for (const s of written) expect(text.includes(s), `a secret value appears in ${where}`).toBe(false);
}

const rejections = async (source: "configmap" | "secret") => registry.metrics.rejectionCount()[source];

describe(`credential Secrets under fuzz, through the real registry (seed ${FUZZ_SEED})`, () => {
  it("each victim's error names the Secret key and the fix, is counted, leaks nothing, and east stays connected", async () => {
    const arbs = credentialArbitraries(material);
    const mtls = fc.record({
      cluster: fc.constant("west" as const),
      crt: fc.option(arbs.certArb, { freq: 8, nil: undefined }),
      key: fc.option(arbs.keyArb, { freq: 8, nil: undefined }),
    });
    const bearer = fc.record({
      cluster: fc.constant("north" as const),
      token: fc.option(arbs.tokenArb, { freq: 8, nil: undefined }),
      renewed: fc.option(arbs.tokenArb, { freq: 2, nil: undefined }),
    });
    // Material that works, so a victim also recovers between breakages.
    const valid = fc.oneof(
      fc.constant({ cluster: "west" as const, crt: material.pair.certPem, key: material.pair.keyPem }),
      fc.constant({ cluster: "north" as const, token: realToken, renewed: undefined }),
    );
    const explained = new Set<string>();
    const last: Record<string, string | undefined> = {};
    let expectedRejections = await rejections("secret");
    const tally = { refused: 0, usable: 0, connected: 0 };
    await fc.assert(
      fc.asyncProperty(fc.oneof(mtls, bearer, valid), async (c) => {
        const values: Record<string, string> =
          c.cluster === "west"
            ? {
                ...(c.crt !== undefined ? { "tls.crt": c.crt } : {}),
                ...(c.key !== undefined ? { "tls.key": c.key } : {}),
              }
            : {
                ...(c.token !== undefined ? { token: c.token } : {}),
                ...(c.renewed !== undefined ? { "renewed-token": c.renewed } : {}),
              };
        for (const v of Object.values(values)) {
          const body = v.includes("PRIVATE KEY")
            ? (v.split("\n")[1] ?? "")
            : v.split(".").length === 3
              ? v
              : "";
          if (body.length >= 16) written.add(body);
        }
        const authType = c.cluster === "west" ? "mtls" : "bearerToken";
        let expected: ClusterConfigError | undefined;
        try {
          parseCredentialSecret(
            c.cluster,
            authType,
            Object.fromEntries(Object.entries(values).map(([k, v]) => [k, b64(v)])),
          );
        } catch (err) {
          if (!(err instanceof ClusterConfigError)) throw err;
          expected = err;
        }
        await putSecret(c.cluster, values);
        if (expected) {
          tally.refused++;
          if (expected.message !== last[c.cluster]) expectedRejections++;
          last[c.cluster] = expected.message;
          const h = await round(
            (h) => h.find((x) => x.name === c.cluster)?.error === expected.message,
            `${c.cluster}'s error to become: ${expected.message}`,
          );
          expect(expected.field).toMatch(
            new RegExp(
              `^Secret switchyard-cluster-${c.cluster} key (tls\\.crt|tls\\.key|token|renewed-token)$`,
            ),
          );
          expect(expected.fix).not.toBe("");
          expect(h.find((x) => x.name === "east")?.connected, "east stays connected").toBeDefined();
        } else {
          tally.usable++;
          last[c.cluster] = undefined;
          // Usable material replaces the Secret error: the cluster connects, or the API server's
          // refusal is explained (an expired or foreign certificate, a token nobody issued).
          const secretError = `Secret ${credentialSecretName(c.cluster)} `;
          const h = await round((h) => !h.find((x) => x.name === c.cluster)?.error?.includes(secretError));
          const victim = h.find((x) => x.name === c.cluster)!;
          if (victim.connected) tally.connected++;
          else {
            expect(victim.error, JSON.stringify(victim)).toBeDefined();
            explained.add(victim.error!.replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, "<time>"));
          }
          expect(h.find((x) => x.name === "east")?.connected, "east stays connected").toBeDefined();
        }
        expect(await rejections("secret")).toBe(expectedRejections);
        expectNothingSecretIn(JSON.stringify(registry.health()), "the registry's health");
        expectNothingSecretIn(lines.join(""), "the logs");
      }),
      fuzzParameters(60),
    );
    expect(tally.refused).toBeGreaterThan(0);
    expect(tally.usable).toBeGreaterThan(0);
    // The leader publishes it all: no secret bytes in the SwitchyardOperator either.
    const op = await eventually("the operator status with every cluster", async () => {
      const o = await switchyardOperatorClient(primary).get({ name: "operator" });
      return (o?.status?.connectedClusters?.length ?? 0) === 3 && o;
    });
    expectNothingSecretIn(JSON.stringify(op), "the SwitchyardOperator");
    expect(op.status!.connectedClusters!.find((c) => c.name === "east")?.connected).toBeDefined();
    expect(tally.connected).toBeGreaterThan(0);
    console.info(
      `credential Secrets: ${tally.refused} refused naming the key, ${tally.usable} usable (${tally.connected} connected); ` +
        `usable but refused by the cluster:\n  ${[...explained].join("\n  ")}`,
    );
  });
});

describe(`the clusters ConfigMap under fuzz, through the real registry (seed ${FUZZ_SEED})`, () => {
  it("a refused edit names every field and fix in ConfigurationValid, is counted, and changes nothing", async () => {
    const arb = fc.oneof(
      { weight: 6, arbitrary: mutatedJson(baseline, { maxMutations: 2 }).map((m) => stringify(m.value)) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          "enabled: [true",
          "",
          "clusters: 5",
          "- a\n- b",
          "enabled: true\nclusterName: primary\nclusters:\n  east: *x",
          `enabled: true\nclusterName: ${"p".repeat(70_000)}`,
        ),
      },
    );
    const tally = { refused: 0, applied: 0 };
    await fc.assert(
      fc.asyncProperty(arb, async (text) => {
        let errors: ClusterConfigErrors | undefined;
        let parsed: MultiClusterConfig | undefined;
        try {
          parsed = parseClusterConfig(text);
        } catch (err) {
          if (!(err instanceof ClusterConfigErrors)) throw err;
          errors = err;
        }
        const before = await rejections("configmap");
        await putConfigMap(primary, CONFIG_MAP, text);
        if (errors) {
          tally.refused++;
          const cond = await eventually(
            "ConfigurationValid=False with the errors",
            async () => {
              registry.kickNow();
              const o = await switchyardOperatorClient(primary).get({ name: "operator" });
              const c = o?.status?.conditions?.find((x) => x.type === "ConfigurationValid");
              return c?.status === "False" && c.message.startsWith(errors.message.slice(0, 1_000)) && c;
            },
            { timeoutMs: 20_000, intervalMs: 50 },
          );
          for (const e of errors.errors) {
            expect(e.field).not.toBe("");
            expect(cond.message).toContain(e.message.slice(0, 200));
          }
          expect(cond.message.length).toBeLessThanOrEqual(32_768);
          expect(registry.config()).toEqual(baselineConfig);
          expect(await rejections("configmap")).toBe(before + 1);
          await round(
            (h) => h.find((c) => c.name === "east")?.connected !== undefined,
            "east still connected",
          );
        } else {
          tally.applied++;
          await eventually(
            "the new configuration in force",
            () => JSON.stringify(registry.config()) === JSON.stringify(parsed),
          );
          expect(await rejections("configmap")).toBe(before);
        }
        // Back to the baseline, where east is connected again.
        await putConfigMap(primary, CONFIG_MAP, stringify(baseline));
        await eventually(
          "the baseline configuration back",
          () => JSON.stringify(registry.config()) === JSON.stringify(baselineConfig),
        );
        await round(
          (h) => h.find((c) => c.name === "east")?.connected !== undefined,
          "east connected on the baseline",
        );
        expectNothingSecretIn(lines.join(""), "the logs");
      }),
      fuzzParameters(40),
    );
    expect(tally.refused).toBeGreaterThan(0);
    console.info(`clusters ConfigMap: ${tally.refused} edits refused, ${tally.applied} applied`);
    await eventually("ConfigurationValid=True on the baseline", async () => {
      registry.kickNow();
      const op = await switchyardOperatorClient(primary).get({ name: "operator" });
      return op?.status?.conditions?.find((x) => x.type === "ConfigurationValid")?.status === "True";
    });
  });
});
