// Test fixtures for the cluster-registry suite: what Helm's multiClusterMember=true
// would create on each remote cluster (the ServiceAccount the Primary uses, the member
// ClusterRole, bindings to the SA or to a group for eks/mtls), tokens for that SA (bound to a
// Secret, or short-lived), the Primary's ConfigMap and credential Secrets, and a log sink that
// keeps every line for the secrets check.
import { createPrivateKey, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import {
  CREDENTIALS_LABEL,
  credentialSecretName,
} from "../../../control-plane/src/config/credential-secret.js";

export const NS = "switchyard";
export const MEMBER_SA = "switchyard-remote";
export const MEMBER_GROUP = "switchyard-members";

export async function ensureNamespace(kc: KubeConfig, name = NS): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  try {
    await core.createNamespace({ body: { metadata: { name } } });
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw err;
  }
}

/** Member RBAC: read Switchyard kinds; the SA may mint tokens for itself (TokenRequest renewal). */
export async function installMemberRbac(
  kc: KubeConfig,
  subject: { sa?: boolean; group?: boolean },
): Promise<void> {
  await ensureNamespace(kc);
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const subjects = [
    ...(subject.sa ? [{ kind: "ServiceAccount", name: MEMBER_SA, namespace: NS }] : []),
    ...(subject.group ? [{ kind: "Group", name: MEMBER_GROUP, apiGroup: "rbac.authorization.k8s.io" }] : []),
  ];
  if (subject.sa)
    await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: MEMBER_SA } } });
  await rbac.createClusterRole({
    body: {
      metadata: { name: "switchyard-member" },
      rules: [{ apiGroups: ["switchyard.dev"], resources: ["*"], verbs: ["get", "list", "watch"] }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: "switchyard-member" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "switchyard-member" },
      subjects,
    },
  });
  if (subject.sa) {
    await rbac.createNamespacedRole({
      namespace: NS,
      body: {
        metadata: { name: "switchyard-token-renewal" },
        rules: [
          {
            apiGroups: [""],
            resources: ["serviceaccounts/token"],
            resourceNames: [MEMBER_SA],
            verbs: ["create"],
          },
        ],
      },
    });
    await grantTokenRenewal(kc);
  }
}

export async function grantTokenRenewal(kc: KubeConfig): Promise<void> {
  await kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: NS,
    body: {
      metadata: { name: "switchyard-token-renewal" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "switchyard-token-renewal" },
      subjects: [{ kind: "ServiceAccount", name: MEMBER_SA, namespace: NS }],
    },
  });
}

export async function revokeTokenRenewal(kc: KubeConfig): Promise<void> {
  await kc
    .makeApiClient(RbacAuthorizationV1Api)
    .deleteNamespacedRoleBinding({ namespace: NS, name: "switchyard-token-renewal" });
}

/** `kubectl create token` bound to a Secret, so deleting that Secret invalidates the token. */
export async function mintBoundToken(kc: KubeConfig, anchorSecret: string, seconds = 600): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const anchor = await core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: anchorSecret } },
  });
  const res = await core.createNamespacedServiceAccountToken({
    namespace: NS,
    name: MEMBER_SA,
    body: {
      spec: {
        expirationSeconds: seconds,
        audiences: [],
        boundObjectRef: { apiVersion: "v1", kind: "Secret", name: anchorSecret, uid: anchor.metadata!.uid! },
      },
    },
  });
  return res.status!.token;
}

/**
 * A ServiceAccount token valid for only `seconds`, signed with the cluster's own
 * ServiceAccount key (test/env writes it as sa.key in the cluster's directory), with the
 * claims TokenRequest would give it. The API server verifies it like any token it issued,
 * and it really expires — TokenRequest itself refuses lifetimes under 10 minutes. With `ageSeconds`
 * it was issued that long ago: its `exp` may already have passed while the API server still takes
 * it, for the minute of clock leeway it grants.
 */
export async function forgeShortLivedToken(
  cluster: { dir: string; name: string; kubeConfig(): KubeConfig },
  seconds: number,
  { serviceAccount = MEMBER_SA, ageSeconds = 0 }: { serviceAccount?: string; ageSeconds?: number } = {},
): Promise<string> {
  const sa = await cluster
    .kubeConfig()
    .makeApiClient(CoreV1Api)
    .readNamespacedServiceAccount({ name: serviceAccount, namespace: NS });
  const issuer = `https://${cluster.name}.switchyard.test`;
  const now = Math.floor(Date.now() / 1000) - ageSeconds;
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const unsigned = `${part({ alg: "ES256", typ: "JWT" })}.${part({
    iss: issuer,
    aud: [issuer],
    sub: `system:serviceaccount:${NS}:${serviceAccount}`,
    iat: now,
    nbf: now,
    exp: now + seconds,
    "kubernetes.io": { namespace: NS, serviceaccount: { name: serviceAccount, uid: sa.metadata!.uid! } },
  })}`;
  const key = createPrivateKey(readFileSync(join(cluster.dir, "sa.key")));
  const signature = sign("sha256", Buffer.from(unsigned), { key, dsaEncoding: "ieee-p1363" });
  return `${unsigned}.${signature.toString("base64url")}`;
}

export async function putConfigMap(kc: KubeConfig, name: string, yamlText: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const body = { metadata: { name, namespace: NS }, data: { "clusters-config.yaml": yamlText } };
  try {
    await core.replaceNamespacedConfigMap({ name, namespace: NS, body });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
    await core.createNamespacedConfigMap({ namespace: NS, body });
  }
}

export async function putCredentialSecret(
  kc: KubeConfig,
  cluster: string,
  data: Record<string, string>,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = credentialSecretName(cluster);
  const body = {
    metadata: { name, namespace: NS, labels: { [CREDENTIALS_LABEL]: "true" } },
    stringData: data,
  };
  try {
    await core.replaceNamespacedSecret({ name, namespace: NS, body });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
    await core.createNamespacedSecret({ namespace: NS, body });
  }
}

export const b64 = (s: string): string => Buffer.from(s).toString("base64");

/** A pino logger whose every line is also kept in `lines`. */
export function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { logger: pino({ level: "debug" }, sink), lines };
}
