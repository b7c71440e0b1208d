// A restart after the first bearer token expired, with real API servers, the real chart and
// the control plane as a user runs it (control-plane/src/main.ts, primary mode) under the
// chart's own ServiceAccount. The Secret's token is a real ServiceAccount token of east that
// lived 30 s and expired 15 s before the test starts: east still takes it for the rest of its
// 60 s of clock leeway, so the wait for its refusal is 45 s, not 90. The first control plane
// renews it through TokenRequest and saves the renewal in the Secret (RBAC: the chart's patch on
// that Secret by name); once east refuses the first token, a second control plane started from
// the same Secret still reaches east. No token ever appears in a log or in the SwitchyardOperator.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, VersionApi } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  credentialSecretName,
  RENEWED_TOKEN_KEY,
} from "../../../control-plane/src/config/credential-secret.js";
import {
  RenewedTokenWriteError,
  RenewedTokenWriter,
} from "../../../control-plane/src/config/renewed-token-writer.js";
import { readServiceAccountClaims } from "../../../control-plane/src/credentials/jwt-claims.js";
import { switchyardOperatorClient, type SwitchyardOperator } from "../../../proto/api/v1alpha1/index.js";
import { startClusterSet, writeKubeconfig, type ClusterSet, type TestCluster } from "../../env/index.js";
import { chartDir, Helm } from "../../env/stack/helm.js";
import { launch, tsx, type LaunchedProcess, type LogLine } from "../../support/launch.js";
import { eventually } from "../../support/poll.js";
import { b64, forgeShortLivedToken, installMemberRbac, NS, putCredentialSecret } from "./remote-fixtures.js";

const LIFETIME_SECONDS = 30;
/** Issued this long ago: past its exp, inside the API server's leeway for another 45 s. */
const AGE_SECONDS = 45;
const JWT = /eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./;

let set: ClusterSet;
let helm: Helm;
let dir: string;
let primary: TestCluster;
let east: TestCluster;
let cpKubeconfig: string;
const running: LaunchedProcess<LogLine>[] = [];

function bearer(cluster: TestCluster, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: cluster.name, server: cluster.server, caData: b64(cluster.caPem) }],
    users: [{ name: "token", token }],
    contexts: [{ name: "ctx", cluster: cluster.name, user: "token" }],
    currentContext: "ctx",
  });
  return kc;
}

/** The HTTP status east answers a request authenticated with `token`. */
async function eastAnswers(token: string): Promise<number> {
  try {
    await bearer(east, token).makeApiClient(VersionApi).getCode();
    return 200;
  } catch (err) {
    return (err as { code?: number }).code ?? 0;
  }
}

async function secretData(): Promise<Record<string, string>> {
  const s = await primary
    .kubeConfig()
    .makeApiClient(CoreV1Api)
    .readNamespacedSecret({ name: credentialSecretName("east"), namespace: NS });
  return Object.fromEntries(
    Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]),
  );
}

/** The control plane as the chart runs it, in primary mode, under the chart's ServiceAccount. */
async function startControlPlane(identity: string): Promise<LaunchedProcess<LogLine>> {
  const cp = await launch({
    name: `control-plane-${identity}`,
    ...tsx("control-plane/src/main.ts", [
      "--mode=primary",
      "--cluster-name=primary",
      `--kubeconfig=${cpKubeconfig}`,
      `--namespace=${NS}`,
      `--identity=${identity}`,
      "--grpc-listen=127.0.0.1:0",
      "--metrics-listen=127.0.0.1:0",
      "--grpc-plaintext",
      `--router-service-account=${NS}/switchyard-router`,
      "--health-check-interval-seconds=1",
      "--leader-lease-duration-seconds=3",
      "--leader-renew-deadline-seconds=2",
      "--leader-retry-period-seconds=0.5",
    ]),
    ready: (p) => p.logs.find((l) => l.msg === "control plane started"),
    readyTimeoutMs: 60_000,
    readyIntervalMs: 200,
  });
  running.push(cp);
  return cp;
}

function expectNoTokenIn(text: string, tokens: string[]): void {
  for (const t of tokens) expect(text.includes(t), "a token appears").toBe(false);
  expect(text).not.toMatch(JWT);
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-token-persistence-"));
  [helm, set] = await Promise.all([
    Helm.create(),
    startClusterSet({ clusters: ["primary", "east"], controllerManager: false }),
  ]);
  primary = set.get("primary");
  east = set.get("east");
  await installMemberRbac(east.kubeConfig(), { sa: true });
}, 240_000);

afterAll(async () => {
  for (const p of running) await p.stop();
  helm?.close();
  await set?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("renewed bearer tokens", () => {
  it("are saved in the cluster's Secret, so a control plane started after the first token expired reaches the cluster", async () => {
    const original = await forgeShortLivedToken(east, LIFETIME_SECONDS, { ageSeconds: AGE_SECONDS });
    const tokens = [original];
    const values = {
      multiCluster: {
        enabled: true,
        clusterName: "primary",
        managementOnly: true,
        defaultCluster: "east",
        clusters: {
          east: { authType: "bearerToken", server: east.server, caData: b64(east.caPem), token: original },
        },
      },
    };
    const kubeconfigFlag = ["--kubeconfig", primary.adminKubeconfigPath, "--namespace", NS];
    const installed = await helm.run(
      ["install", "sy", chartDir, ...kubeconfigFlag, "--create-namespace"],
      [values],
    );
    expect(installed.code, installed.stderr).toBe(0);
    // The chart's control-plane identity, as its pods would have it.
    const sa = await primary
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespacedServiceAccountToken({
        name: "switchyard-control-plane",
        namespace: NS,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
    cpKubeconfig = writeKubeconfig(join(dir, "control-plane.kubeconfig"), {
      clusterName: primary.name,
      server: primary.server,
      caPem: primary.caPem,
      user: "switchyard-control-plane",
      token: sa.status!.token,
    });
    tokens.push(sa.status!.token);

    // First control plane: renews (a fifth of the lifetime before expiry) and saves the renewal.
    const first = await startControlPlane("cp-a");
    const saved = await eventually(
      "the renewed token in the Secret",
      async () => (await secretData())[RENEWED_TOKEN_KEY],
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    tokens.push(saved);
    const before = readServiceAccountClaims(original);
    const renewed = readServiceAccountClaims(saved);
    expect(renewed.iat).toBeGreaterThan(before.iat);
    expect(renewed.exp - renewed.iat).toBe(600); // TokenRequest's minimum, not the 30 s asked for
    expect(renewed.serviceAccount).toBe(before.serviceAccount);
    expect((await secretData()).token).toBe(original); // what Helm wrote stays as it was
    await first.stop();
    expectNoTokenIn(first.output(), tokens);

    // Helm never renders renewed-token: an upgrade keeps it.
    const upgraded = await helm.run(
      ["upgrade", "sy", chartDir, ...kubeconfigFlag, "--reuse-values"],
      [{ router: { replicas: 3 } }],
    );
    expect(upgraded.code, upgraded.stderr).toBe(0);
    expect((await secretData())[RENEWED_TOKEN_KEY]).toBe(saved);

    // The first token really expires: east refuses it (after the API server's clock leeway).
    await eventually("east to refuse the first token", async () => (await eastAnswers(original)) === 401, {
      timeoutMs: 150_000,
      intervalMs: 1_000,
    });
    expect(await eastAnswers(saved)).toBe(200);

    // A new control plane, from the same Secret, reaches east.
    const ops = switchyardOperatorClient(primary.kubeConfig());
    await ops.delete({ name: "operator" });
    const startedAt = Date.now();
    const second = await startControlPlane("cp-b");
    const op = await eventually(
      "east connected in the operator status",
      async (): Promise<SwitchyardOperator | undefined> => {
        const o = await ops.get({ name: "operator" });
        const e = o?.status?.connectedClusters?.find((c) => c.name === "east");
        return e?.connected && Date.parse(e.lastCheck) >= startedAt - 1_000 ? o : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const entry = op.status!.connectedClusters!.find((c) => c.name === "east")!;
    expect(entry.error).toBeUndefined();
    expect(Date.parse(entry.credentialExpiresAt!)).toBe(renewed.exp * 1000);
    expectNoTokenIn(JSON.stringify(op), tokens);
    expectNoTokenIn(second.output(), tokens);
  }, 300_000);

  it("the Secret only ever moves to a newer token, whoever writes and in whatever order", async () => {
    const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
    const token = (iat: number) =>
      `${part({ alg: "ES256" })}.${part({ iat, exp: iat + 600, sub: "system:serviceaccount:switchyard:sa" })}.sig`;
    const admin = primary.kubeConfig();
    await putCredentialSecret(admin, "west", { token: token(1) });
    const writer = new RenewedTokenWriter({ kubeConfig: admin, namespace: NS });
    const stored = async () => {
      const s = await admin
        .makeApiClient(CoreV1Api)
        .readNamespacedSecret({ name: credentialSecretName("west"), namespace: NS });
      return {
        token: Buffer.from(s.data!.token!, "base64").toString(),
        renewed: Buffer.from(s.data![RENEWED_TOKEN_KEY]!, "base64").toString(),
      };
    };
    expect(await writer.save("west", token(200))).toBe("saved");
    expect(await writer.save("west", token(100))).toBe("newer-stored");
    expect(await stored()).toEqual({ token: token(1), renewed: token(200) });
    // Replicas renewing at once: conflicts are re-read, and the newest wins.
    const writers = [1, 2, 3, 4].map(
      () => new RenewedTokenWriter({ kubeConfig: admin, namespace: NS, attempts: 10 }),
    );
    await Promise.all(writers.map((w, i) => w.save("west", token(300 + i))));
    expect(await stored()).toEqual({ token: token(1), renewed: token(303) });
    // A cluster without a Secret: the error names it, never the token.
    const err = await writer.save("nowhere", token(400)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RenewedTokenWriteError);
    expect((err as Error).message).toMatch(
      /Secret switchyard\/switchyard-cluster-nowhere failed: reading it: API server answered 404/,
    );
    expect((err as Error).message).not.toContain(token(400));
  });
});
