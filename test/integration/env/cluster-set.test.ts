// The test environment proves itself: several real API servers, isolated from each
// other, with RBAC, client-certificate auth, TokenRequest, and a controller manager.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AppsV1Api,
  AuthenticationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
  VersionApi,
  type KubeConfig,
} from "@kubernetes/client-node";
import {
  createCertificateAuthority,
  kubeconfigYaml,
  loadKubeConfig,
  runPods,
  startClusterSet,
} from "../../env/index.js";
import type { ClusterSet } from "../../env/index.js";
import { eventually, type PollOptions } from "../../support/poll.js";

let set: ClusterSet;

beforeAll(async () => {
  set = await startClusterSet({ clusters: ["primary", "east", "west"] });
});

afterAll(async () => {
  await set?.stop();
});

const core = (kc: KubeConfig) => kc.makeApiClient(CoreV1Api);

function statusOf(err: unknown): number | undefined {
  return (err as { code?: number }).code;
}

const POLL: PollOptions = { timeoutMs: 15_000, intervalMs: 200 };

describe("cluster set", () => {
  it("serves CRUD on every cluster and keeps objects apart", async () => {
    for (const name of ["primary", "east", "west"]) {
      const api = core(set.get(name).kubeConfig());
      await api.createNamespacedConfigMap({
        namespace: "default",
        body: { metadata: { name: `only-in-${name}` }, data: { cluster: name } },
      });
      const read = await api.readNamespacedConfigMap({ name: `only-in-${name}`, namespace: "default" });
      expect(read.data).toEqual({ cluster: name });
      read.data = { cluster: name, updated: "yes" };
      const replaced = await api.replaceNamespacedConfigMap({
        name: `only-in-${name}`,
        namespace: "default",
        body: read,
      });
      expect(replaced.data?.updated).toBe("yes");
    }
    for (const name of ["primary", "east", "west"]) {
      const list = await core(set.get(name).kubeConfig()).listNamespacedConfigMap({ namespace: "default" });
      const ours = list.items.map((c) => c.metadata!.name!).filter((n) => n.startsWith("only-in-"));
      expect(ours).toEqual([`only-in-${name}`]);
    }
    const east = core(set.get("east").kubeConfig());
    await east.deleteNamespacedConfigMap({ name: "only-in-east", namespace: "default" });
    await expect(
      east.readNamespacedConfigMap({ name: "only-in-east", namespace: "default" }),
    ).rejects.toSatisfy((e: unknown) => statusOf(e) === 404);
    // The other clusters still have theirs.
    const west = await core(set.get("west").kubeConfig()).readNamespacedConfigMap({
      name: "only-in-west",
      namespace: "default",
    });
    expect(west.data?.cluster).toBe("west");
  });

  it("reports the real Kubernetes version", async () => {
    const res = await set.get("east").kubeConfig().makeApiClient(VersionApi).getCode();
    expect(res.gitVersion).toMatch(/^v1\.\d+\.\d+$/);
    expect(Number(res.minor)).toBeGreaterThanOrEqual(30);
  });

  it("denies a user without a role (403) and allows them after a RoleBinding", async () => {
    const cluster = set.get("east");
    const alice = await cluster.mintUser("alice", ["developers"]);
    const aliceApi = core(alice.kubeConfig());
    await expect(aliceApi.listNamespacedPod({ namespace: "default" })).rejects.toSatisfy(
      (e: unknown) => statusOf(e) === 403,
    );
    const rbac = cluster.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: "default",
      body: {
        metadata: { name: "pod-reader" },
        rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["get", "list"] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: "default",
      body: {
        metadata: { name: "developers-read-pods" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "pod-reader" },
        subjects: [{ kind: "Group", name: "developers", apiGroup: "rbac.authorization.k8s.io" }],
      },
    });
    const pods = await eventually(
      "alice to list pods",
      () => aliceApi.listNamespacedPod({ namespace: "default" }),
      POLL,
    );
    expect(Array.isArray(pods.items)).toBe(true);
    // Still nothing outside the binding's scope.
    await expect(aliceApi.listNamespacedConfigMap({ namespace: "default" })).rejects.toSatisfy(
      (e: unknown) => statusOf(e) === 403,
    );
  });

  it("issues ServiceAccount tokens through TokenRequest that authenticate as that ServiceAccount", async () => {
    const cluster = set.get("west");
    const admin = cluster.kubeConfig();
    await core(admin).createNamespacedServiceAccount({
      namespace: "default",
      body: { metadata: { name: "robot" } },
    });
    const tr = await core(admin).createNamespacedServiceAccountToken({
      name: "robot",
      namespace: "default",
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const token = tr.status!.token;
    expect(token.split(".")).toHaveLength(3);
    const asRobot = loadKubeConfig(
      kubeconfigYaml({
        clusterName: "west",
        server: cluster.server,
        caPem: cluster.caPem,
        user: "robot",
        token,
      }),
    );
    const review = await asRobot.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe("system:serviceaccount:default:robot");
    // The same token is unknown to another cluster (different signing keys).
    const elsewhere = loadKubeConfig(
      kubeconfigYaml({
        clusterName: "east",
        server: set.get("east").server,
        caPem: set.get("east").caPem,
        user: "robot",
        token,
      }),
    );
    await expect(
      elsewhere.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} }),
    ).rejects.toSatisfy((e: unknown) => statusOf(e) === 401);
  });

  it("authenticates minted client certificates and refuses a certificate from another CA", async () => {
    const cluster = set.get("primary");
    const bob = await cluster.mintUser("bob", ["team-a", "team-b"]);
    const review = await bob
      .kubeConfig()
      .makeApiClient(AuthenticationV1Api)
      .createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe("bob");
    expect(review.status?.userInfo?.groups).toEqual(expect.arrayContaining(["team-a", "team-b"]));

    const rogueCa = await createCertificateAuthority("rogue");
    const rogue = await rogueCa.issue({
      commonName: "bob",
      organizations: ["system:masters"],
      usage: "client",
    });
    const rogueKc = loadKubeConfig(
      kubeconfigYaml({
        clusterName: "primary",
        server: cluster.server,
        caPem: cluster.caPem,
        user: "bob",
        ...rogue,
      }),
    );
    await expect(rogueKc.makeApiClient(CoreV1Api).listNamespace()).rejects.toSatisfy(
      (e: unknown) => statusOf(e) === 401,
    );
  });

  it("turns a Deployment into a ReplicaSet and Pods through the controller manager", async () => {
    const kc = set.get("east").kubeConfig();
    const apps = kc.makeApiClient(AppsV1Api);
    await apps.createNamespacedDeployment({
      namespace: "default",
      body: {
        metadata: { name: "web" },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: "web" } },
          template: {
            metadata: { labels: { app: "web" } },
            spec: {
              containers: [{ name: "web", image: "example.invalid/web:1", ports: [{ containerPort: 8080 }] }],
            },
          },
        },
      },
    });
    const rs = await eventually(
      "the Deployment's ReplicaSet",
      async () => {
        const list = await apps.listNamespacedReplicaSet({ namespace: "default", labelSelector: "app=web" });
        if (list.items.length !== 1) throw new Error("no ReplicaSet yet");
        return list.items[0]!;
      },
      POLL,
    );
    expect(rs.metadata?.ownerReferences?.[0]?.name).toBe("web");
    const pods = await runPods(kc, "default", "app=web", 2);
    expect(pods).toHaveLength(2);
    for (const p of pods) {
      expect(p.status?.phase).toBe("Running");
      expect(p.status?.podIP).toMatch(/^10\.244\./);
      expect(p.metadata?.ownerReferences?.[0]?.name).toBe(rs.metadata?.name);
    }
    const dep = await eventually(
      "two ready replicas",
      async () => {
        const d = await apps.readNamespacedDeployment({ name: "web", namespace: "default" });
        if (d.status?.readyReplicas !== 2) throw new Error(`readyReplicas=${d.status?.readyReplicas}`);
        return d;
      },
      POLL,
    );
    expect(dep.status?.availableReplicas).toBe(2);
  });

  it("stops one API server and starts it again on the same port with its data", async () => {
    const west = set.get("west");
    await west.stopApiServer();
    expect(west.isApiServerRunning()).toBe(false);
    await expect(core(west.kubeConfig()).listNamespace()).rejects.toBeDefined();
    // The others keep serving.
    await core(set.get("east").kubeConfig()).listNamespace();
    await west.startApiServer();
    const cm = await core(west.kubeConfig()).readNamespacedConfigMap({
      name: "only-in-west",
      namespace: "default",
    });
    expect(cm.data?.cluster).toBe("west");
  });
});
