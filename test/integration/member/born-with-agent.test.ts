// Pods born with the agent, against a real kube-apiserver with kube-controller-manager: the API
// server itself calls the admission webhook (control-plane/src/injection) over HTTPS, verified
// against a CA bundle, for the pods the ReplicaSet and StatefulSet controllers create. Opted-in
// workloads' pods get the agent at birth with the target's agent secret; others are untouched;
// the first session on a born target is Ready with no template change; with the webhook down
// (failurePolicy Ignore) pods are still created, without the agent.
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Pod,
} from "@kubernetes/client-node";
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clusterSessionClient } from "../../../proto/api/v1alpha1/index.js";
import { hashSecret } from "../../../proto/session-auth.js";
import { installCrds } from "../../../control-plane/src/runtime/index.js";
import {
  AGENT_CONTAINER,
  agentSecretName,
  SECRET_HASH_ANNOTATION,
  SidecarAgentProvisioner,
} from "../../../control-plane/src/member/index.js";
import {
  BORN_WITH_AGENT_ANNOTATION,
  INJECT_ANNOTATION,
} from "../../../control-plane/src/member/agent-annotations.js";
import { AdmissionServer, INJECTION_PATH } from "../../../control-plane/src/injection/admission-server.js";
import { InjectionPolicy } from "../../../control-plane/src/injection/injection-policy.js";
import { markPodRunning, startClusterSet, type ClusterSet } from "../../env/index.js";
import { createCertificateAuthority } from "../../env/pki.js";
import { startMember } from "./member-harness.js";
import { eventually } from "../../support/poll.js";

const NS = "born-tests";
const WEBHOOK = "switchyard-born-tests";
let set: ClusterSet;
let kc: KubeConfig;
let apps: AppsV1Api;
let core: CoreV1Api;
let server: AdmissionServer | undefined;

const settings = {
  agentImage: "example.test/switchyard-agent:1",
  redirectImage: "example.test/switchyard-iptables:1",
};

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["east"], controllerManager: true });
  kc = set.get("east").kubeConfig();
  apps = kc.makeApiClient(AppsV1Api);
  core = kc.makeApiClient(CoreV1Api);
  await installCrds(kc);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  const ca = await createCertificateAuthority("born-tests-ca");
  const tls = await ca.issue({
    commonName: "switchyard-webhook",
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  server = new AdmissionServer({
    policy: new InjectionPolicy({ kubeConfig: kc, settings, allowList: { namespaces: [NS] } }),
    tls,
    host: "127.0.0.1",
    port: 0,
  });
  const port = await server.listen();
  await kc.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
    body: {
      metadata: { name: WEBHOOK },
      webhooks: [
        {
          name: "inject-agent.switchyard.dev",
          clientConfig: {
            url: `https://127.0.0.1:${port}${INJECTION_PATH}`,
            caBundle: Buffer.from(ca.certPem).toString("base64"),
          },
          rules: [{ operations: ["CREATE"], apiGroups: [""], apiVersions: ["v1"], resources: ["pods"] }],
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": NS } },
          failurePolicy: "Ignore",
          sideEffects: "NoneOnDryRun",
          admissionReviewVersions: ["v1"],
          timeoutSeconds: 5,
        },
      ],
    },
  });
});

afterAll(async () => {
  await server?.close();
  await set?.stop();
});

const podSpec = {
  automountServiceAccountToken: false,
  containers: [{ name: "app", image: "example.test/app:1", ports: [{ containerPort: 8080 }] }],
};

async function deployment(name: string, annotations: Record<string, string> = {}) {
  await apps.createNamespacedDeployment({
    namespace: NS,
    body: {
      metadata: { name, annotations },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name } }, spec: podSpec },
      },
    },
  });
}

const pods = async (app: string) =>
  (await core.listNamespacedPod({ namespace: NS, labelSelector: `app=${app}` })).items.filter(
    (p) => !p.metadata!.deletionTimestamp,
  );
const bornWithAgent = (p: V1Pod) =>
  p.spec!.initContainers?.some((c) => c.name === AGENT_CONTAINER) === true &&
  p.metadata!.annotations?.[BORN_WITH_AGENT_ANNOTATION] !== undefined;

async function agentSecretHash(id: string): Promise<string> {
  const s = await core.readNamespacedSecret({ namespace: NS, name: agentSecretName(id) });
  return hashSecret(Buffer.from(s.data!.secret!, "base64").toString("utf8"));
}

describe("pods born with the agent", () => {
  it("gives opted-in Deployments' and StatefulSets' pods the agent at birth, with the target's secret", async () => {
    // The API server picks the webhook configuration up within a moment: a probe shows when.
    await deployment("born", { [INJECT_ANNOTATION]: "true" });
    const [born] = await eventually("born's pod with the agent", async () => {
      const list = await pods("born");
      return list.length === 1 && bornWithAgent(list[0]!) && list;
    });
    expect(born!.metadata!.annotations![SECRET_HASH_ANNOTATION]).toBe(
      await agentSecretHash(`${NS}/deployment/born`),
    );
    // The template is the owner's: nothing of ours in it.
    const d = await apps.readNamespacedDeployment({ namespace: NS, name: "born" });
    expect(d.spec!.template.spec!.initContainers ?? []).toEqual([]);

    await apps.createNamespacedStatefulSet({
      namespace: NS,
      body: {
        metadata: { name: "ledger", annotations: { [INJECT_ANNOTATION]: "true" } },
        spec: {
          replicas: 1,
          serviceName: "ledger",
          selector: { matchLabels: { app: "ledger" } },
          template: { metadata: { labels: { app: "ledger" } }, spec: podSpec },
        },
      },
    });
    const [ledger] = await eventually("ledger-0 with the agent", async () => {
      const list = await pods("ledger");
      return list.length === 1 && bornWithAgent(list[0]!) && list;
    });
    expect(ledger!.metadata!.annotations![SECRET_HASH_ANNOTATION]).toBe(
      await agentSecretHash(`${NS}/statefulset/ledger`),
    );

    // Not opted in: untouched.
    await deployment("plain");
    const [plain] = await eventually("plain's pod", async () => {
      const list = await pods("plain");
      return list.length === 1 && list;
    });
    expect(plain!.spec!.initContainers ?? []).toEqual([]);
    expect(plain!.metadata!.annotations?.[BORN_WITH_AGENT_ANNOTATION]).toBeUndefined();
  });

  it("serves the first session on a born target with no template change", async () => {
    const [pod] = await pods("born");
    await markPodRunning(kc, NS, pod!.metadata!.name!);
    const before = await apps.readNamespacedDeployment({ namespace: NS, name: "born" });
    const m = startMember(
      kc,
      new SidecarAgentProvisioner({ kubeConfig: kc, ...settings, lingerSeconds: 600 }),
    );
    try {
      const sessions = clusterSessionClient(kc);
      await sessions.create({
        metadata: { name: "first", namespace: NS },
        spec: { clientKeyHash: createHash("sha256").update("x").digest("hex"), target: "deployment/born" },
      });
      await eventually(
        "the first session Ready",
        async () => (await sessions.get({ namespace: NS, name: "first" }))?.status?.phase === "Ready",
      );
      const after = await apps.readNamespacedDeployment({ namespace: NS, name: "born" });
      expect(JSON.stringify(after.spec!.template)).toBe(JSON.stringify(before.spec!.template));
      expect((await pods("born")).map((p) => p.metadata!.uid)).toEqual([pod!.metadata!.uid]);
      expect(m.routes.get(`${NS}:first`)!.upstreams).toHaveLength(1);
      // The last session ends: the pods keep the agent they were born with, and their secret stays.
      await sessions.delete({ namespace: NS, name: "first" });
      await eventually(
        "first gone",
        async () => (await sessions.get({ namespace: NS, name: "first" })) === undefined,
      );
      expect(await agentSecretHash(`${NS}/deployment/born`)).toBe(
        pod!.metadata!.annotations![SECRET_HASH_ANNOTATION],
      );
    } finally {
      await m.stop();
    }
  });

  it("still creates pods when the webhook is down (failurePolicy Ignore), without the agent", async () => {
    await server!.close();
    server = undefined;
    const [old] = await pods("born");
    await core.deleteNamespacedPod({ namespace: NS, name: old!.metadata!.name!, gracePeriodSeconds: 0 });
    const [replacement] = await eventually(
      "a replacement pod",
      async () => {
        const list = await pods("born");
        return list.length === 1 && list[0]!.metadata!.uid !== old!.metadata!.uid && list;
      },
      { timeoutMs: 30_000 },
    );
    expect(bornWithAgent(replacement!)).toBe(false);
  });
});
