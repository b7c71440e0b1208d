// The cluster registry against real API servers: a Primary and three remotes, one per
// auth type (east: bearerToken, eks: EKS tokens checked by our webhook authenticator,
// onprem: mtls), plus "west", a configured cluster whose Secret is broken. Time for
// bearer renewal is a ManualClock; every API call is real.
// The clusters, the webhook and the remotes' RBAC are started once for the file; every
// registry test then starts from the same baseline of its own (the ConfigMap, fresh
// credential Secrets with a newly minted token, token renewal granted, no operator
// status yet, a new registry, clock and log), so the tests pass in any order and alone.
import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoordinationV1Api, CoreV1Api, KubeConfig, VersionApi } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import {
  ClusterConfigError,
  ClusterConfigErrors,
} from "../../../control-plane/src/config/cluster-config-error.js";
import { ClusterConfigSource } from "../../../control-plane/src/config/cluster-config-source.js";
import { checkClusterHealth } from "../../../control-plane/src/clusters/cluster-health-checker.js";
import { RemoteClusterClient } from "../../../control-plane/src/clusters/remote-cluster-client.js";
import { switchyardOperatorClient } from "../../../proto/api/v1alpha1/index.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import type { BearerTokenSource } from "../../../control-plane/src/credentials/bearer-token-source.js";
import { ManualClock } from "../../../control-plane/src/credentials/clock.js";
import { EksTokenSource } from "../../../control-plane/src/credentials/eks-token-source.js";
import { MtlsCredentialSource } from "../../../control-plane/src/credentials/mtls-credential-source.js";
import { createEksToken } from "../../../control-plane/src/credentials/eks-token.js";
import { LeaseElector } from "../../../control-plane/src/leader/lease-elector.js";
import { ClusterRegistry } from "../../../control-plane/src/primary/cluster-registry.js";
import { createCertificateAuthority, startClusterSet, type ClusterSet } from "../../env/index.js";
import { startEksTokenWebhook, type EksTokenWebhook } from "./eks-token-webhook.js";
import {
  NS,
  b64,
  capturingLogger,
  ensureNamespace,
  grantTokenRenewal,
  installMemberRbac,
  mintBoundToken,
  putConfigMap,
  putCredentialSecret,
  revokeTokenRenewal,
  MEMBER_GROUP,
} from "./remote-fixtures.js";
import { eventually } from "../../support/poll.js";

const AWS = {
  accessKeyId: "AKIASWITCHYARDTEST01",
  secretAccessKey: "test/Secret+Key/DoNotUse0123456789abcdEF",
};
const AWS_ARN = "arn:aws:iam::123456789012:role/switchyard-primary";

// Started once for the file.
let set: ClusterSet;
let webhook: EksTokenWebhook;
let dir: string;
let primary: KubeConfig;
let onpremClient: { certPem: string; keyPem: string };

// Started anew for every registry test (startRegistry).
let registry: ClusterRegistry;
let stop: AbortController;
let run: Promise<void>;
let clock: ManualClock;
let lines: string[];
let logger: ReturnType<typeof capturingLogger>["logger"];
let eastTokenAnchor: string; // the east Secret the registry's first token is bound to
let secrets: string[]; // every secret value handed to the registry, for the log check
let anchors = 0;

function configYaml(extra: Record<string, unknown> = {}): string {
  const east = set.get("east");
  const eks = set.get("eks");
  const onprem = set.get("onprem");
  return stringify({
    enabled: true,
    clusterName: "primary",
    defaultCluster: "east",
    managementOnly: false,
    clusters: {
      east: { authType: "bearerToken", server: east.server, caData: b64(east.caPem), namespace: NS },
      eks: { authType: "eks", server: eks.server, caData: b64(eks.caPem), region: "eu-north-1" },
      onprem: { authType: "mtls", server: onprem.server, caData: b64(onprem.caPem) },
      west: { authType: "mtls", server: onprem.server, caData: b64(onprem.caPem) },
      ...extra,
    },
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-cp-"));
  webhook = await startEksTokenWebhook({
    clusterId: "eks",
    identities: [{ ...AWS, arn: AWS_ARN, groups: [MEMBER_GROUP] }],
    // The ManualClock may run minutes ahead of real time; the expiry check is what we test.
    maxSkewMs: 3_600_000,
  });
  set = await startClusterSet({
    clusters: ["primary", "east", "eks", "onprem"],
    controllerManager: false,
    apiServerArgs: {
      eks: [
        `--authentication-token-webhook-config-file=${webhook.writeConfig(join(dir, "eks-webhook.kubeconfig"))}`,
        "--authentication-token-webhook-version=v1",
        "--authentication-token-webhook-cache-ttl=1s",
      ],
    },
  });
  primary = set.get("primary").kubeConfig();
  const eastAdmin = set.get("east").kubeConfig();
  await Promise.all([
    installCrds(primary),
    installCrds(eastAdmin),
    installMemberRbac(eastAdmin, { sa: true }),
    installMemberRbac(set.get("eks").kubeConfig(), { group: true }),
    installMemberRbac(set.get("onprem").kubeConfig(), { group: true }),
    ensureNamespace(primary),
  ]);
  // east runs a Switchyard control plane of its own: the Primary reports its versions.
  const eastOp = switchyardOperatorClient(eastAdmin);
  await eastOp.create({
    metadata: { name: "operator" },
    spec: { clusterName: "east", managementOnly: false, multiCluster: false },
  });
  await eastOp.patchStatus(
    { name: "operator" },
    { operatorVersion: "0.1.0", protocolVersion: "1.0.0", supportedFeatures: ["MultiClusterMember"] },
  );
  onpremClient = await set.get("onprem").ca.issue({
    commonName: "switchyard-primary",
    organizations: [MEMBER_GROUP],
    usage: "client",
    validForSeconds: 30 * 86_400,
  });
}, 240_000);

afterAll(async () => {
  await set?.stop();
  await webhook?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/**
 * The baseline of every registry test: the four-cluster ConfigMap, a freshly minted east
 * token, the long-lived onprem certificate, west's Secret without tls.key, token renewal
 * granted, no SwitchyardOperator `operator` on the Primary (so status seen later is this
 * registry's), and a registry (cp-1) with its own ManualClock and log.
 */
async function startRegistry(): Promise<void> {
  const eastAdmin = set.get("east").kubeConfig();
  eastTokenAnchor = `token-anchor-${++anchors}`;
  const token = await mintBoundToken(eastAdmin, eastTokenAnchor);
  secrets = [token, onpremClient.keyPem, AWS.secretAccessKey];
  await grantTokenRenewal(eastAdmin).catch((err: { code?: number }) => {
    if (err.code !== 409) throw err;
  });
  await putConfigMap(primary, "switchyard-clusters", configYaml());
  await putCredentialSecret(primary, "east", { token });
  await putCredentialSecret(primary, "onprem", {
    "tls.crt": onpremClient.certPem,
    "tls.key": onpremClient.keyPem,
  });
  await putCredentialSecret(primary, "west", { "tls.crt": onpremClient.certPem }); // tls.key missing
  await switchyardOperatorClient(primary).delete({ name: "operator" });

  clock = new ManualClock();
  ({ logger, lines } = capturingLogger());
  stop = new AbortController();
  registry = new ClusterRegistry({
    kubeConfig: primary,
    namespace: NS,
    identity: "cp-1",
    checkIntervalMs: 1_000,
    requestTimeoutMs: 2_000,
    leaseDurationMs: 4_000,
    renewDeadlineMs: 3_000,
    retryPeriodMs: 500,
    clock,
    awsCredentialProvider: async () => AWS,
    bearerRenewBeforeExpiryMs: 120_000,
    mtlsWarnBeforeExpiryMs: 86_400_000,
    logger,
  });
  run = registry.start(stop.signal);
  await registry.ready();
}

async function stopRegistry(): Promise<void> {
  stop?.abort();
  await run?.catch(() => undefined);
}

function expectNoSecretLogged(): void {
  const all = (lines ?? []).join("");
  for (const s of secrets) {
    const probe = s.includes("PRIVATE KEY") ? s.split("\n")[1]! : s;
    expect(all.includes(probe), "a secret value appears in the logs").toBe(false);
  }
  expect(all).not.toContain("k8s-aws-v1.");
  expect(all).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./); // no JWT at all
}

const healthOf = (name: string) => registry.health().find((h) => h.name === name);
const eastSource = () => registry.client("east")!.credential as BearerTokenSource;

/** Moves the clock to east's renewal point; the renewal itself is a real TokenRequest. Returns the new token. */
async function renewEastToken(): Promise<string> {
  await eventually("east connected", () => healthOf("east")?.connected);
  const source = eastSource();
  const before = source.status();
  // Move the clock to the renewal point (120 s before expiry); the renewal itself is a real call.
  await clock.whenSleeping();
  clock.set(source.renewAt());
  const after = await eventually("renewal", () =>
    source.status().obtainedAt! > before.obtainedAt! ? source.status() : undefined,
  );
  expect(after.error).toBeUndefined();
  expect(after.expiresAt! - after.obtainedAt!).toBe(before.expiresAt! - before.obtainedAt!); // same lifetime
  const headers: { headers?: Record<string, unknown> } = {};
  await source.apply(headers);
  const newToken = String(headers.headers!.Authorization).replace(/^Bearer /, "");
  secrets.push(newToken);
  return newToken;
}

/** Puts a new onprem client certificate valid for an hour in its Secret; resolves once the registry uses it. */
async function rotateOnpremCertificate(): Promise<number> {
  const soon = await set.get("onprem").ca.issue({
    commonName: "switchyard-primary",
    organizations: [MEMBER_GROUP],
    usage: "client",
    validForSeconds: 3_600,
  });
  secrets.push(soon.keyPem);
  await putCredentialSecret(primary, "onprem", { "tls.crt": soon.certPem, "tls.key": soon.keyPem });
  const notAfter = Date.parse(new X509Certificate(soon.certPem).validTo);
  await eventually(
    "new certificate in use",
    () => registry.client("onprem")?.credential.status().expiresAt === notAfter,
  );
  return notAfter;
}

describe("cluster configuration", () => {
  it("rejects each invalid configuration at start-up with the cluster, field and fix", async () => {
    const east = set.get("east");
    const ca = b64(east.caPem);
    const cases: Array<{
      name: string;
      doc: Record<string, unknown>;
      cluster?: string;
      field: string;
      text: RegExp;
    }> = [
      {
        name: "management-only with itself as default",
        doc: {
          enabled: true,
          clusterName: "primary",
          managementOnly: true,
          defaultCluster: "primary",
          clusters: { east: { authType: "mtls", server: east.server } },
        },
        field: "defaultCluster",
        text: /managementOnly.*Fix: set defaultCluster to one of the remote clusters \(east\)/,
      },
      {
        name: "unknown default",
        doc: {
          enabled: true,
          clusterName: "primary",
          defaultCluster: "nowhere",
          clusters: { east: { authType: "mtls", server: east.server } },
        },
        field: "defaultCluster",
        text: /"nowhere" is not a configured cluster.*Fix: set defaultCluster to one of: primary, east/,
      },
      {
        name: "missing authType",
        doc: {
          enabled: true,
          clusterName: "primary",
          defaultCluster: "east",
          clusters: { east: { server: east.server } },
        },
        cluster: "east",
        field: "clusters.east.authType",
        text: /is required \(there is no default\).*Fix: set authType to one of bearerToken, eks, mtls/,
      },
      {
        name: "unknown authType",
        doc: {
          enabled: true,
          clusterName: "primary",
          defaultCluster: "east",
          clusters: { east: { authType: "token", server: east.server } },
        },
        cluster: "east",
        field: "clusters.east.authType",
        text: /"token" is not supported/,
      },
      {
        name: "eks without caData",
        doc: {
          enabled: true,
          clusterName: "primary",
          defaultCluster: "east",
          clusters: { east: { authType: "eks", server: east.server, region: "eu-north-1" } },
        },
        cluster: "east",
        field: "clusters.east.caData",
        text: /is required for authType eks/,
      },
      {
        name: "bad cluster name",
        doc: {
          enabled: true,
          clusterName: "primary",
          defaultCluster: "East_1",
          clusters: { East_1: { authType: "mtls", server: east.server, caData: ca } },
        },
        cluster: "East_1",
        field: "clusters.East_1",
        text: /"East_1" is not an RFC 1123 label/,
      },
    ];
    for (const [i, c] of cases.entries()) {
      const name = `bad-config-${i}`;
      await putConfigMap(primary, name, stringify(c.doc));
      const err = await new ClusterConfigSource({ kubeConfig: primary, namespace: NS, configMapName: name })
        .load()
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err, c.name).toBeInstanceOf(ClusterConfigErrors);
      const first = (err as ClusterConfigErrors).errors[0]!;
      expect(first.code, c.name).toBe("SWITCHYARD_CLUSTER_CONFIG_INVALID");
      expect(first.cluster, c.name).toBe(c.cluster);
      expect(first.field, c.name).toBe(c.field);
      expect(first.message, c.name).toMatch(c.text);
    }
    // The Secret case: the config is valid, the one cluster's credentials are not.
    await putCredentialSecret(primary, "west", { "tls.crt": onpremClient.certPem }); // tls.key missing
    await putConfigMap(
      primary,
      "bad-secret",
      stringify({
        enabled: true,
        clusterName: "primary",
        defaultCluster: "primary",
        clusters: { west: { authType: "mtls", server: east.server, caData: ca } },
      }),
    );
    const snap = await new ClusterConfigSource({
      kubeConfig: primary,
      namespace: NS,
      configMapName: "bad-secret",
    }).load();
    const west = snap.credentials.get("west");
    expect(west).toBeInstanceOf(ClusterConfigError);
    expect((west as ClusterConfigError).code).toBe("SWITCHYARD_CLUSTER_SECRET_INVALID");
    expect((west as ClusterConfigError).field).toBe("Secret switchyard-cluster-west key tls.key");
  });
});

describe("leader election", () => {
  // How fast the takeover is, is measured by `npm run bench -- failover`, not asserted here.
  it("elects one leader among two replicas and the other takes over when the leader crashes", async () => {
    const lease = `failover-test-${Date.now().toString(36)}`; // a Lease no other test or run has touched
    const mk = (identity: string) =>
      new LeaseElector({
        kubeConfig: primary,
        namespace: NS,
        name: lease,
        identity,
        leaseDurationMs: 3_000,
        renewDeadlineMs: 2_000,
        retryPeriodMs: 250,
        releaseOnStop: false, // stopping is a crash: the successor must wait the lease out
      });
    const a = mk("replica-a");
    const b = mk("replica-b");
    const stopA = new AbortController();
    const stopB = new AbortController();
    const runA = a.start(stopA.signal);
    const runB = b.start(stopB.signal);
    try {
      const first = await eventually("a leader", () => (a.isLeader() ? a : b.isLeader() ? b : undefined));
      const other = first === a ? b : a;
      // Several retry periods later there is still exactly one.
      for (let i = 0; i < 8; i++) {
        await new Promise((r) => setTimeout(r, 250));
        expect([a.isLeader(), b.isLeader()].filter(Boolean)).toHaveLength(1);
      }
      expect(other.leader()).toBe(first === a ? "replica-a" : "replica-b");
      (first === a ? stopA : stopB).abort();
      await (first === a ? runA : runB);
      expect(first.isLeader()).toBe(false);
      // Generous: the takeover needs the lease to run out (3 s) and a retry; the bench has the figures.
      await eventually("failover", () => other.isLeader(), { timeoutMs: 60_000 });
      const held = await primary
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ name: lease, namespace: NS });
      expect(held.spec?.holderIdentity).toBe(first === a ? "replica-b" : "replica-a");
      expect(held.spec?.leaseTransitions).toBe(1);
    } finally {
      stopA.abort();
      stopB.abort();
      await Promise.all([runA, runB]);
    }
  });
});

describe("cluster registry", () => {
  beforeEach(startRegistry, 60_000);
  afterEach(async () => {
    await stopRegistry();
    expectNoSecretLogged();
  });

  it("connects all three auth types, marks only the bad-Secret cluster broken, and publishes status", async () => {
    await eventually("east, eks and onprem connected", () =>
      ["east", "eks", "onprem"].every((n) => healthOf(n)?.connected && !healthOf(n)?.error),
    );
    expect(healthOf("east")!.connected).toMatchObject({
      kubernetesVersion: "v1.36.3",
      operatorVersion: "0.1.0",
      protocolVersion: "1.0.0",
      supportedFeatures: ["MultiClusterMember"],
    });
    expect(healthOf("eks")!.connected!.switchyardResources).toEqual([]);
    expect(webhook.reviews.some((r) => r.authenticated && r.username === AWS_ARN)).toBe(true);
    const west = healthOf("west")!;
    expect(west.connected).toBeUndefined();
    expect(west.error).toContain("Secret switchyard-cluster-west key tls.key");
    expect(west.error).toContain("Fix: add key tls.key");

    await eventually("leadership", () => registry.isLeader());
    const op = await eventually("status with four clusters", async () => {
      const o = await switchyardOperatorClient(primary).get({ name: "operator" });
      return o?.status?.connectedClusters?.length === 4 &&
        o.status.connectedClusters.every((c) => c.name !== "east" || c.connected)
        ? o
        : undefined;
    });
    expect(op.spec).toMatchObject({
      clusterName: "primary",
      defaultCluster: "east",
      multiCluster: true,
      managementOnly: false,
    });
    expect(op.spec.clusters?.map((c) => `${c.name}:${c.authType}`).sort()).toEqual([
      "east:bearerToken",
      "eks:eks",
      "onprem:mtls",
      "west:mtls",
    ]);
    const byName = Object.fromEntries(op.status!.connectedClusters!.map((c) => [c.name, c]));
    expect(byName.east!.connected).toMatchObject({ kubernetesVersion: "v1.36.3", operatorVersion: "0.1.0" });
    expect(byName.onprem!.latencyMs).toBeGreaterThanOrEqual(0);
    // Expiry of the credential in use: the bearer token's exp and the client certificate's notAfter.
    expect(Date.parse(byName.east!.credentialExpiresAt!)).toBeGreaterThan(Date.now());
    expect(Date.parse(byName.onprem!.credentialExpiresAt!)).toBeGreaterThan(Date.now());
    expect(Date.parse(byName.eks!.lastCheck)).toBeGreaterThan(Date.now() - 60_000);
    expect(byName.west!.error).toMatch(/tls\.key/);
    const ready = op.status!.conditions!.find((c) => c.type === "RemoteClustersReady")!;
    expect(ready.status).toBe("False");
    expect(ready.message).toContain("west");
    expect(ready.message).not.toContain("east:");
  });

  it("renews a bearer token near expiry through the real TokenRequest API and uses the new one", async () => {
    const oldToken = secrets[0]!;
    const newToken = await renewEastToken();
    expect(newToken).not.toBe(oldToken);

    // Invalidate the original token (it was bound to this Secret) and show the registry still gets in.
    await set
      .get("east")
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .deleteNamespacedSecret({ namespace: NS, name: eastTokenAnchor });
    const oldClient = new KubeConfig();
    oldClient.loadFromOptions({
      clusters: [{ name: "east", server: set.get("east").server, caData: b64(set.get("east").caPem) }],
      users: [{ name: "old", token: oldToken }],
      contexts: [{ name: "east", cluster: "east", user: "old" }],
      currentContext: "east",
    });
    await eventually("old token refused", () =>
      oldClient
        .makeApiClient(CoreV1Api)
        .listNamespacedServiceAccount({ namespace: NS })
        .then(
          () => false,
          (e: { code?: number }) => e.code === 401,
        ),
    );
    await registry.nextRound();
    const h = (await registry.nextRound()).find((x) => x.name === "east")!;
    expect(h.error).toBeUndefined();
    expect(h.connected).toBeDefined();
  });

  it("shows a failing renewal in status before the old token expires, then recovers", async () => {
    const east = set.get("east").kubeConfig();
    const source = eastSource();
    await revokeTokenRenewal(east);
    try {
      await clock.whenSleeping();
      clock.set(source.renewAt());
      const failing = await eventually("renewal failure in status", () =>
        source.status().error ? source.status() : undefined,
      );
      expect(failing.error).toMatch(
        /token renewal via TokenRequest for serviceaccount switchyard\/switchyard-remote failed/,
      );
      expect(failing.error).toMatch(/403|forbidden/i);
      expect(failing.error).toMatch(/the current token expires in \d+s/);
      expect(failing.expiresAt!).toBeGreaterThan(clock.now());
      const cond = await eventually("RemoteCredentialsExpiring=True", async () => {
        const o = await switchyardOperatorClient(primary).get({ name: "operator" });
        const c = o?.status?.conditions?.find((x) => x.type === "RemoteCredentialsExpiring");
        return c?.status === "True" && c.message.includes("east:") ? c : undefined;
      });
      expect(cond.message).toContain("token renewal");
      expect(healthOf("east")!.connected).toBeDefined(); // the old token still works
    } finally {
      await grantTokenRenewal(east);
    }
    // Next retry (backoff on the same clock) succeeds.
    await eventually(
      "renewal recovered",
      async () => {
        if (clock.pending() > 0) clock.advance(60_000);
        return source.status().error === undefined && source.status().failures === 0;
      },
      { timeoutMs: 30_000 },
    );
  });

  it("fails mTLS with a wrong CA with a clear error, either side", async () => {
    const onprem = set.get("onprem");
    const good = registry.client("onprem")!;
    // Wrong caData: the server's certificate cannot be verified.
    const wrongCa = new RemoteClusterClient({
      cluster: { ...good.cluster, name: "onprem-wrong-ca", caPem: set.get("primary").caPem },
      credential: good.credential,
      requestTimeoutMs: 2_000,
    });
    const h1 = await checkClusterHealth(wrongCa);
    expect(h1.connected).toBeUndefined();
    expect(h1.error).toMatch(
      /^TLS: the certificate of https:\/\/127\.0\.0\.1:\d+ is not signed by the CA in caData .*set caData/,
    );
    // A client certificate from a CA the cluster does not trust.
    const foreign = await (
      await createCertificateAuthority("not-onprem")
    ).issue({ commonName: "x", usage: "client" });
    const wrongClientCa = new RemoteClusterClient({
      cluster: { ...good.cluster, name: "onprem-foreign-cert", caPem: onprem.caPem },
      credential: new MtlsCredentialSource({
        cluster: "onprem-foreign-cert",
        certPem: foreign.certPem,
        keyPem: foreign.keyPem,
      }),
    });
    const h2 = await checkClusterHealth(wrongClientCa);
    expect(h2.error).toMatch(/401 Unauthorized.*client certificate is not signed by a CA the cluster trusts/);
  });

  it("reloads an mTLS Secret without restart and warns before the certificate lapses", async () => {
    const notAfter = await rotateOnpremCertificate();
    expect(registry.client("onprem")!.credential.status().warning).toMatch(
      /client certificate expires at .*rotate tls\.crt/,
    );
    const cond = await eventually("warning condition", async () => {
      const o = await switchyardOperatorClient(primary).get({ name: "operator" });
      const c = o?.status?.conditions?.find((x) => x.type === "RemoteCredentialsExpiring");
      return c?.message.includes(`onprem: client certificate expires at ${new Date(notAfter).toISOString()}`)
        ? c
        : undefined;
    });
    expect(cond.status).toBe("True");
    expect(cond.message).toContain(new Date(notAfter).toISOString());
    const h = await registry.nextRound().then(() => registry.nextRound());
    expect(h.find((x) => x.name === "onprem")!.connected).toBeDefined();
  });

  it("authenticates to the EKS-style cluster and the webhook refuses tampered, expired and foreign tokens", async () => {
    const eks = set.get("eks");
    const call = async (token: string) => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: "eks", server: eks.server, caData: b64(eks.caPem) }],
        users: [{ name: "t", token }],
        contexts: [{ name: "eks", cluster: "eks", user: "t" }],
        currentContext: "eks",
      });
      return kc
        .makeApiClient(CoreV1Api)
        .listNamespacedServiceAccount({ namespace: NS })
        .then(
          () => 200,
          (e: { code?: number }) => e.code ?? -1,
        );
    };
    // Accepted: through the registry's own client, group-mapped RBAC.
    const h = await checkClusterHealth(registry.client("eks")!);
    expect(h.error).toBeUndefined();
    const good = await createEksToken({ clusterName: "eks", region: "eu-north-1", credentials: AWS });
    expect(await call(good)).not.toBe(401);
    // Tampered: one character of the signature changed.
    const url = Buffer.from(good.slice("k8s-aws-v1.".length), "base64url").toString();
    const tamperedUrl = url.replace(
      /X-Amz-Signature=([0-9a-f])/,
      (_m, c: string) => `X-Amz-Signature=${c === "0" ? "1" : "0"}`,
    );
    expect(tamperedUrl).not.toBe(url);
    const n = webhook.reviews.length;
    expect(await call("k8s-aws-v1." + Buffer.from(tamperedUrl).toString("base64url"))).toBe(401);
    expect(webhook.reviews.slice(n).map((r) => r.reason)).toContain(
      "signature does not match (tampered, wrong secret, or signed for another cluster)",
    );
    // Expired: signed 20 minutes ago (URL valid 15).
    const past = new ManualClock(Date.now() - 20 * 60_000);
    const oldSource = new EksTokenSource({
      cluster: "eks",
      region: "eu-north-1",
      credentialProvider: async () => AWS,
      clock: past,
    });
    const m = webhook.reviews.length;
    expect(await call(await oldSource.current())).toBe(401);
    expect(webhook.reviews.slice(m).map((r) => r.reason)).toContain(
      "token expired (X-Amz-Date + X-Amz-Expires passed)",
    );
    // Signed for another cluster: x-k8s-aws-id does not match.
    const foreign = await createEksToken({ clusterName: "other", region: "eu-north-1", credentials: AWS });
    expect(await call(foreign)).toBe(401);
  });

  it("flips only the stopped cluster to error and back when its API server returns", async () => {
    const east = set.get("east");
    await eventually("all connected", () => ["east", "eks", "onprem"].every((n) => healthOf(n)?.connected));
    await east.stopApiServer();
    try {
      const during = await eventually("east in error", () => {
        const e = healthOf("east");
        return e?.error ? registry.health() : undefined;
      });
      const byName = Object.fromEntries(during.map((x) => [x.name, x]));
      expect(byName.east!.error).toMatch(/unreachable|no answer/);
      expect(byName.eks!.error).toBeUndefined();
      expect(byName.onprem!.error).toBeUndefined();
      await eventually("east error published", async () => {
        const o = await switchyardOperatorClient(primary).get({ name: "operator" });
        const e = o?.status?.connectedClusters?.find((c) => c.name === "east");
        const k = o?.status?.connectedClusters?.find((c) => c.name === "eks");
        return e?.error && !e.connected && k?.connected ? true : undefined;
      });
    } finally {
      await east.startApiServer();
    }
    await eventually("east recovered", () => healthOf("east")?.connected && !healthOf("east")?.error, {
      timeoutMs: 60_000,
    });
    // And the version call really is answered again.
    expect((await registry.client("east")!.makeApiClient(VersionApi).getCode()).gitVersion).toBe("v1.36.3");
  });

  it("picks up ConfigMap edits without a restart and keeps the last valid config on a bad edit", async () => {
    const east = set.get("east");
    const eks = set.get("eks");
    const onprem = set.get("onprem");
    const without = stringify({
      enabled: true,
      clusterName: "primary",
      defaultCluster: "east",
      clusters: {
        east: { authType: "bearerToken", server: east.server, caData: b64(east.caPem), namespace: NS },
        eks: { authType: "eks", server: eks.server, caData: b64(eks.caPem), region: "eu-north-1" },
        onprem: { authType: "mtls", server: onprem.server, caData: b64(onprem.caPem) },
      },
    });
    await putConfigMap(primary, "switchyard-clusters", without);
    await eventually("west dropped from status", async () => {
      const o = await switchyardOperatorClient(primary).get({ name: "operator" });
      const names = o?.status?.connectedClusters?.map((c) => c.name).sort();
      const ready = o?.status?.conditions?.find((c) => c.type === "RemoteClustersReady");
      return (
        names?.join() === "east,eks,onprem" && o?.spec.clusters?.length === 3 && ready?.status === "True"
      );
    });
    expect(registry.client("west")).toBeUndefined();
    // A bad edit is refused; the registry keeps running on the previous configuration.
    await putConfigMap(primary, "switchyard-clusters", without.replace("authType: mtls", "authType: tls"));
    await eventually("rejection logged", () =>
      lines.some(
        (l) => l.includes("configuration change rejected") && l.includes("clusters.onprem.authType"),
      ),
    );
    expect(registry.config()!.remotes.map((r) => r.name)).toEqual(["east", "eks", "onprem"]);
    expect(registry.client("onprem")).toBeDefined();
  });

  it("only the leader replica writes status; the other takes over when it stops", async () => {
    await eventually(
      "cp-1 leads and writes",
      () => registry.isLeader() && registry.metrics.statusWriteCount().success > 0,
    );
    const second = new ClusterRegistry({
      kubeConfig: primary,
      namespace: NS,
      identity: "cp-2",
      checkIntervalMs: 1_000,
      requestTimeoutMs: 2_000,
      leaseDurationMs: 4_000,
      renewDeadlineMs: 3_000,
      retryPeriodMs: 500,
      awsCredentialProvider: async () => AWS,
      logger,
    });
    const stop2 = new AbortController();
    const run2 = second.start(stop2.signal);
    try {
      await second.ready();
      await second.nextRound();
      await second.nextRound();
      expect(registry.isLeader()).toBe(true);
      expect(second.isLeader()).toBe(false);
      expect(second.metrics.statusWriteCount()).toEqual({ success: 0, failure: 0 });
      expect(registry.metrics.statusWriteCount().success).toBeGreaterThan(0);
      expect(await second.metrics.registry.metrics()).toContain("switchyard_control_plane_leader 0");
      // The leader replica goes away: the other takes over and keeps status current.
      await stopRegistry();
      expect(registry.isLeader()).toBe(false);
      await eventually(
        "second replica leads and writes",
        () => second.isLeader() && second.metrics.statusWriteCount().success > 0,
        { timeoutMs: 15_000 },
      );
      const before = Date.now();
      const fresh = await eventually("status refreshed by the new leader", async () => {
        const o = await switchyardOperatorClient(primary).get({ name: "operator" });
        const e = o?.status?.connectedClusters?.find((x) => x.name === "eks");
        return e && Date.parse(e.lastCheck) >= before - 1_000 ? e : undefined;
      });
      expect(fresh.connected).toBeDefined();
    } finally {
      stop2.abort();
      await run2;
    }
  });

  it("never logs a token, key or AWS secret", async () => {
    // What handles secret values: start-up (above), a bearer renewal, an mTLS Secret reload.
    await renewEastToken();
    await rotateOnpremCertificate();
    await registry.nextRound();
    // The log is really captured, and each path that handles a secret wrote to it.
    const all = lines.join("");
    for (const event of [
      "cluster registry started",
      "eks token minted",
      "bearer token renewed",
      "credentials reloaded from Secret",
    ])
      expect(all).toContain(event);
    expectNoSecretLogged();
  });
});
