// An EKS cluster configured under its EKS name as AWS spells it (capitals, '_'), against real
// API servers: the remote's authenticator (eks-token-webhook.ts, as EKS would) accepts only
// tokens that sign exactly "Prod_EKS", and everything the Primary writes names the cluster by
// the label derived from it, "prod-eks" (control-plane/src/config/cluster-name.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { ClusterRegistry } from "../../../control-plane/src/primary/cluster-registry.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import { switchyardOperatorClient } from "../../../proto/api/v1alpha1/index.js";
import { startClusterSet, type ClusterSet } from "../../env/index.js";
import { eventually } from "../../support/poll.js";
import { startEksTokenWebhook, type EksTokenWebhook } from "./eks-token-webhook.js";
import {
  b64,
  capturingLogger,
  ensureNamespace,
  installMemberRbac,
  MEMBER_GROUP,
  NS,
  putConfigMap,
} from "./remote-fixtures.js";

const EKS_NAME = "Prod_EKS";
const AWS = { accessKeyId: "AKIASWITCHYARDTEST02", secretAccessKey: "test/Eks+Name/DoNotUse0123456789abcd" };

let set: ClusterSet;
let webhook: EksTokenWebhook;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "switchyard-eks-name-"));
  webhook = await startEksTokenWebhook({
    clusterId: EKS_NAME,
    identities: [
      { ...AWS, arn: "arn:aws:iam::123456789012:role/switchyard-primary", groups: [MEMBER_GROUP] },
    ],
  });
  set = await startClusterSet({
    clusters: ["primary", "eks"],
    controllerManager: false,
    apiServerArgs: {
      eks: [
        `--authentication-token-webhook-config-file=${webhook.writeConfig(join(dir, "eks-webhook.kubeconfig"))}`,
        "--authentication-token-webhook-version=v1",
        "--authentication-token-webhook-cache-ttl=1s",
      ],
    },
  });
  await Promise.all([
    installCrds(set.get("primary").kubeConfig()),
    ensureNamespace(set.get("primary").kubeConfig()),
    installMemberRbac(set.get("eks").kubeConfig(), { group: true }),
  ]);
}, 240_000);

afterAll(async () => {
  await set?.stop();
  await webhook?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("an eks cluster keyed by its EKS name", () => {
  it("is reached with tokens signing that name and reported under the derived label", async () => {
    const primary = set.get("primary").kubeConfig();
    const eks = set.get("eks");
    await putConfigMap(
      primary,
      "switchyard-clusters",
      stringify({
        enabled: true,
        clusterName: "primary",
        managementOnly: true,
        defaultCluster: EKS_NAME,
        clusters: {
          [EKS_NAME]: { authType: "eks", server: eks.server, caData: b64(eks.caPem), region: "eu-north-1" },
        },
      }),
    );
    const { logger, lines } = capturingLogger();
    const stop = new AbortController();
    const registry = new ClusterRegistry({
      kubeConfig: primary,
      namespace: NS,
      identity: "cp-1",
      checkIntervalMs: 1_000,
      requestTimeoutMs: 2_000,
      leaseDurationMs: 4_000,
      renewDeadlineMs: 3_000,
      retryPeriodMs: 500,
      awsCredentialProvider: async () => AWS,
      logger,
    });
    const run = registry.start(stop.signal);
    try {
      await registry.ready();
      expect(registry.config()!.remotes.map((r) => [r.name, r.eksClusterName])).toEqual([
        ["prod-eks", EKS_NAME],
      ]);
      expect(registry.config()!.defaultCluster).toBe("prod-eks");
      const op = await eventually("prod-eks connected in the operator status", async () => {
        const o = await switchyardOperatorClient(primary).get({ name: "operator" });
        return o?.status?.connectedClusters?.find((c) => c.name === "prod-eks")?.connected ? o : undefined;
      });
      expect(op.spec).toMatchObject({
        defaultCluster: "prod-eks",
        clusters: [{ name: "prod-eks", authType: "eks", server: eks.server }],
      });
      expect(op.status!.connectedClusters!.map((c) => [c.name, c.error])).toEqual([["prod-eks", undefined]]);
      // The remote authenticated every request by the EKS name the token signs.
      expect(webhook.reviews.length).toBeGreaterThan(0);
      expect(webhook.reviews.every((r) => r.authenticated)).toBe(true);
      expect(lines.join("")).not.toContain("k8s-aws-v1.");

      // Renamed as AWS spells it, same derived label: the registry signs the new name at once
      // (the remote accepts only "Prod_EKS", so the cluster now reports the refusal).
      await putConfigMap(
        primary,
        "switchyard-clusters",
        stringify({
          enabled: true,
          clusterName: "primary",
          managementOnly: true,
          defaultCluster: "PROD_eks",
          clusters: {
            PROD_eks: { authType: "eks", server: eks.server, caData: b64(eks.caPem), region: "eu-north-1" },
          },
        }),
      );
      await eventually(
        "the new EKS name configured",
        () => registry.config()?.remotes[0]?.eksClusterName === "PROD_eks",
      );
      const refused = await eventually("prod-eks refused under the new name", async () => {
        const o = await switchyardOperatorClient(primary).get({ name: "operator" });
        const c = o?.status?.connectedClusters?.find((x) => x.name === "prod-eks");
        return c && !c.connected ? c : undefined;
      });
      expect(refused.error).toMatch(/401|[Uu]nauthorized/);
      expect(webhook.reviews.some((r) => !r.authenticated)).toBe(true);
    } finally {
      stop.abort();
      await run.catch(() => undefined);
    }
  });
});
