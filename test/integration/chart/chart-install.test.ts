// `helm install` of charts/switchyard into real API servers from test/env (no kubelet, so no
// --wait and no pods): CRDs become Established; RBAC, ConfigMap and credential Secrets exist; the
// real authorizer (SubjectAccessReview, and real tokens) proves the router can do nothing, the
// control plane only what it needs, and a member install grants a Primary's identity exactly the
// member roles, to a group when asked; a member splitting SQS queues reads QueueConsumers under
// the chart's own identity (and one that does not, cannot); `helm upgrade` of router.replicas
// touches only the router.
import {
  ApiextensionsV1Api,
  AppsV1Api,
  AuthenticationV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  RbacAuthorizationV1Api,
  VersionApi,
  type V1ResourceAttributes,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseClusterConfig } from "../../../control-plane/src/config/cluster-config.js";
import { queueConsumerClient } from "../../../proto/api/v1alpha1/index.js";
import {
  createCertificateAuthority,
  startClusterSet,
  type ClusterSet,
  type TestCluster,
} from "../../env/index.js";
import { chartDir, Helm, parseManifests, type Manifest } from "../../env/stack/helm.js";
import { eventually } from "../../support/poll.js";
import { valuesShapes } from "./values-shapes.js";

const NS = "switchyard";
const CP_SA = `system:serviceaccount:${NS}:switchyard-control-plane`;
const ROUTER_SA = `system:serviceaccount:${NS}:switchyard-router`;
const MEMBER_GROUP = "eks:switchyard-primaries";
const jwt = ["eyJhbGciOiJSUzI1NiJ9", Buffer.from('{"iat":1,"exp":3601}').toString("base64url"), "c2ln"].join(
  ".",
);

let set: ClusterSet;
let helm: Helm;
let primary: TestCluster;
let east: TestCluster;

beforeAll(async () => {
  [helm, set] = await Promise.all([
    Helm.create(),
    startClusterSet({ clusters: ["primary", "east"], controllerManager: false }),
  ]);
  primary = set.get("primary");
  east = set.get("east");
});

afterAll(async () => {
  helm?.close();
  await set?.stop();
});

async function install(
  cluster: TestCluster,
  release: string,
  namespace: string,
  values: object,
  verb: "install" | "upgrade" = "install",
): Promise<void> {
  const args = [
    verb,
    release,
    chartDir,
    "--namespace",
    namespace,
    "--kubeconfig",
    cluster.adminKubeconfigPath,
  ];
  const r = await helm.run(
    verb === "install" ? [...args, "--create-namespace"] : [...args, "--reuse-values"],
    [values],
  );
  expect(r.code, `helm ${verb} failed:\n${r.stderr}`).toBe(0);
}

async function createNamespaces(cluster: TestCluster, names: string[]): Promise<void> {
  const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
  for (const name of names) await core.createNamespace({ body: { metadata: { name } } });
}

/** Asks the cluster's real authorizer whether `user` (with `groups`) may do `attrs`. */
async function can(
  cluster: TestCluster,
  user: string,
  attrs: V1ResourceAttributes,
  groups?: string[],
): Promise<boolean> {
  const authz = cluster.kubeConfig().makeApiClient(AuthorizationV1Api);
  const sar = await authz.createSubjectAccessReview({
    body: {
      apiVersion: "authorization.k8s.io/v1",
      kind: "SubjectAccessReview",
      spec: {
        user,
        groups:
          groups ??
          (user.startsWith("system:serviceaccount:")
            ? [
                "system:serviceaccounts",
                `system:serviceaccounts:${user.split(":")[2]}`,
                "system:authenticated",
              ]
            : ["system:authenticated"]),
        resourceAttributes: attrs,
      },
    },
  });
  return sar.status?.allowed === true;
}

type Check = [attrs: V1ResourceAttributes, allowed: boolean];
const sd = "switchyard.dev";

async function expectAccess(
  cluster: TestCluster,
  user: string,
  checks: Check[],
  groups?: string[],
): Promise<void> {
  const got = await Promise.all(checks.map(async ([a]) => can(cluster, user, a, groups)));
  const wrong = checks
    .map(([a, want], i) => ({ a, want, got: got[i] }))
    .filter((c) => c.want !== c.got)
    .map((c) => `${c.want ? "denied" : "ALLOWED"}: ${JSON.stringify(c.a)}`);
  expect(wrong, `${user} has the wrong permissions`).toEqual([]);
}

function bearerKubeConfig(cluster: TestCluster, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: cluster.name, server: cluster.server, caData: Buffer.from(cluster.caPem).toString("base64") },
    ],
    users: [{ name: "token", token }],
    contexts: [{ name: "ctx", cluster: cluster.name, user: "token" }],
    currentContext: "ctx",
  });
  return kc;
}

async function releaseObjects(cluster: TestCluster, release: string, namespace: string): Promise<Manifest[]> {
  const r = await helm.run([
    "get",
    "manifest",
    release,
    "--namespace",
    namespace,
    "--kubeconfig",
    cluster.adminKubeconfigPath,
  ]);
  expect(r.code, r.stderr).toBe(0);
  return parseManifests(r.stdout);
}

/** resourceVersion of every object of a release, read from the API server. */
async function resourceVersions(
  cluster: TestCluster,
  objects: readonly Manifest[],
): Promise<Map<string, string>> {
  const kc = cluster.kubeConfig();
  const api = KubernetesObjectApi.makeApiClient(kc);
  const out = new Map<string, string>();
  for (const o of objects) {
    const live = await api.read({
      apiVersion: o.apiVersion,
      kind: o.kind,
      metadata: { name: o.metadata.name, namespace: o.metadata.namespace },
    });
    out.set(`${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`, live.metadata!.resourceVersion!);
  }
  return out;
}

describe("Primary install", () => {
  let mtlsCert: { certPem: string; keyPem: string };
  beforeAll(async () => {
    await createNamespaces(primary, ["team-a", "team-b"]);
    const ca = await createCertificateAuthority("remote-ca");
    mtlsCert = await ca.issue({ commonName: "switchyard-primary", usage: "client" });
    await install(primary, "sy", NS, {
      multiCluster: {
        enabled: true,
        clusterName: "primary",
        defaultCluster: "east",
        clusters: {
          east: {
            authType: "bearerToken",
            server: east.server,
            caData: Buffer.from(east.caPem).toString("base64"),
            token: jwt,
          },
          south: {
            authType: "mtls",
            server: "https://south.example.com",
            tls: { cert: mtlsCert.certPem, key: mtlsCert.keyPem },
          },
          north: { authType: "bearerToken", server: "https://north.example.com" },
        },
      },
      sessions: { allowedNamespaces: ["team-a"] },
    });
  });

  it("creates the CRDs and they become Established", async () => {
    const ext = primary.kubeConfig().makeApiClient(ApiextensionsV1Api);
    const names = [
      "clustersessions.switchyard.dev",
      "multiclustersessions.switchyard.dev",
      "switchyardoperators.switchyard.dev",
      "pgbranchdatabases.switchyard.dev",
      "mysqlbranchdatabases.switchyard.dev",
      "queueconsumers.switchyard.dev",
    ];
    const deadline = Date.now() + 30_000;
    for (const name of names) {
      await eventually(
        `CRD ${name} to become Established`,
        async () => {
          const crd = await ext.readCustomResourceDefinition({ name });
          return crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
        },
        { timeoutMs: Math.max(0, deadline - Date.now()), intervalMs: 200 },
      );
    }
  });

  it("creates the configuration ConfigMap and the credential Secrets from values", async () => {
    const core = primary.kubeConfig().makeApiClient(CoreV1Api);
    const cm = await core.readNamespacedConfigMap({ name: "switchyard-clusters", namespace: NS });
    const cfg = parseClusterConfig(cm.data!["clusters-config.yaml"]!);
    expect(cfg.remotes.map((r) => [r.name, r.authType])).toEqual([
      ["east", "bearerToken"],
      ["north", "bearerToken"],
      ["south", "mtls"],
    ]);
    const secrets = await core.listNamespacedSecret({
      namespace: NS,
      labelSelector: "switchyard.dev/remote-cluster-credentials=true",
    });
    expect(secrets.items.map((s) => s.metadata!.name).sort()).toEqual([
      "switchyard-cluster-east",
      "switchyard-cluster-south",
    ]);
  });

  it("the router ServiceAccount can do nothing at all", async () => {
    const nothing: Check[] = [
      [{ verb: "get", resource: "pods", namespace: NS }, false],
      [{ verb: "list", resource: "pods" }, false],
      [{ verb: "get", resource: "secrets", namespace: NS }, false],
      [{ verb: "list", resource: "configmaps", namespace: NS }, false],
      [{ verb: "create", group: "authentication.k8s.io", resource: "tokenreviews" }, false],
      [{ verb: "get", group: sd, resource: "clustersessions", namespace: "team-a" }, false],
      [{ verb: "list", group: sd, resource: "multiclustersessions" }, false],
      [{ verb: "get", group: sd, resource: "switchyardoperators", name: "operator" }, false],
      [{ verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: NS }, false],
      [
        {
          verb: "create",
          resource: "serviceaccounts",
          subresource: "token",
          name: "switchyard-router",
          namespace: NS,
        },
        false,
      ],
      [{ verb: "*", group: "*", resource: "*" }, false],
    ];
    await expectAccess(primary, ROUTER_SA, nothing);
    const roles = primary.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    const bindings = [
      ...(await roles.listClusterRoleBinding()).items,
      ...(await roles.listRoleBindingForAllNamespaces()).items,
    ];
    expect(bindings.filter((b) => b.subjects?.some((s) => s.name === "switchyard-router"))).toEqual([]);
  });

  it("a token of the route-discovery audience is refused by the API server and accepted by TokenReview for that audience", async () => {
    const admin = primary.kubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    const tr = await core.createNamespacedServiceAccountToken({
      name: "switchyard-router",
      namespace: NS,
      body: { spec: { audiences: ["switchyard-route-discovery"], expirationSeconds: 3600 } },
    });
    const token = tr.status!.token;
    // Against the API server (audience = its issuer): 401 even for the unauthenticated-readable /version.
    const asRouter = bearerKubeConfig(primary, token).makeApiClient(VersionApi);
    const err = await asRouter.getCode().then(
      () => undefined,
      (e: unknown) => e as { code?: number },
    );
    expect(err?.code).toBe(401);
    // The control plane's TokenReview with the dedicated audience accepts it as the router SA.
    const review = await admin.makeApiClient(AuthenticationV1Api).createTokenReview({
      body: { spec: { token, audiences: ["switchyard-route-discovery"] } },
    });
    expect(review.status?.authenticated).toBe(true);
    expect(review.status?.user?.username).toBe(ROUTER_SA);
  });

  it("the control-plane ServiceAccount can do what it needs and nothing more", async () => {
    await expectAccess(primary, CP_SA, [
      // Needs.
      [{ verb: "watch", group: sd, resource: "multiclustersessions" }, true],
      [{ verb: "create", group: sd, resource: "clustersessions", namespace: "team-a" }, true],
      [
        {
          verb: "patch",
          group: sd,
          resource: "multiclustersessions",
          subresource: "status",
          namespace: "team-a",
        },
        true,
      ],
      [
        {
          verb: "update",
          group: sd,
          resource: "switchyardoperators",
          subresource: "status",
          name: "operator",
        },
        true,
      ],
      [{ verb: "list", resource: "pods" }, true],
      [{ verb: "watch", group: "apps", resource: "deployments" }, true],
      [{ verb: "patch", group: "apps", resource: "deployments", namespace: "team-a" }, true],
      // Sidecar: the namespace's PodSecurity level, and Services' named targetPorts.
      [{ verb: "get", resource: "namespaces", name: "team-a" }, true],
      [{ verb: "list", resource: "services", namespace: "team-a" }, true],
      [{ verb: "update", resource: "namespaces", name: "team-a" }, false],
      [{ verb: "patch", resource: "services", namespace: "team-a" }, false],
      [{ verb: "create", group: "authentication.k8s.io", resource: "tokenreviews" }, true],
      [{ verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: NS }, true],
      [{ verb: "watch", resource: "secrets", namespace: NS }, true],
      [{ verb: "watch", resource: "configmaps", namespace: NS }, true],
      [{ verb: "create", resource: "secrets", namespace: "team-a" }, true],
      [{ verb: "get", resource: "secrets", namespace: "team-a" }, true],
      [{ verb: "delete", resource: "secrets", namespace: "team-a" }, true],
      // Branch sync: branch CRs, their status and finalizer, the credentials Secret copied into
      // the branch's namespace (owned by the CR).
      [{ verb: "update", resource: "secrets", namespace: "team-a" }, true],
      [{ verb: "delete", group: sd, resource: "pgbranchdatabases", namespace: "team-a" }, true],
      [
        {
          verb: "patch",
          group: sd,
          resource: "mysqlbranchdatabases",
          subresource: "status",
          namespace: "team-a",
        },
        true,
      ],
      [
        {
          verb: "update",
          group: sd,
          resource: "pgbranchdatabases",
          subresource: "finalizers",
          namespace: "team-a",
        },
        true,
      ],
      // Mode "both": the member part keeps one agent secret per target in its own namespace.
      [{ verb: "create", resource: "secrets", namespace: NS }, true],
      [{ verb: "delete", resource: "secrets", namespace: NS }, true],
      // Renewed bearer tokens are saved in those clusters' credential Secrets (with or without a
      // token in values), by name: not in an mtls cluster's Secret, not in any other.
      [{ verb: "patch", resource: "secrets", namespace: NS, name: "switchyard-cluster-east" }, true],
      [{ verb: "patch", resource: "secrets", namespace: NS, name: "switchyard-cluster-north" }, true],
      [{ verb: "patch", resource: "secrets", namespace: NS, name: "switchyard-cluster-south" }, false],
      [{ verb: "patch", resource: "secrets", namespace: NS, name: "switchyard-router-token" }, false],
      [{ verb: "patch", resource: "secrets", namespace: NS }, false],
      [{ verb: "update", resource: "secrets", namespace: NS, name: "switchyard-cluster-east" }, false],
      // Nothing more.
      [{ verb: "get", resource: "secrets", namespace: "kube-system" }, false],
      [{ verb: "get", resource: "secrets", namespace: "team-b" }, false],
      [{ verb: "list", resource: "secrets" }, false],
      [{ verb: "list", resource: "secrets", namespace: "team-a" }, false],
      [{ verb: "update", resource: "secrets", namespace: NS }, false],
      [{ verb: "update", resource: "configmaps", namespace: NS }, false],
      [{ verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system" }, false],
      [{ verb: "create", resource: "pods", namespace: "team-a" }, false],
      [{ verb: "delete", group: "apps", resource: "deployments", namespace: "team-a" }, false],
      [{ verb: "update", group: "apps", resource: "deployments", namespace: "team-a" }, false],
      [{ verb: "create", group: "apps", resource: "deployments", namespace: "team-a" }, false],
      [{ verb: "delete", resource: "namespaces", name: "team-a" }, false],
      [
        {
          verb: "create",
          resource: "serviceaccounts",
          subresource: "token",
          name: "switchyard-router",
          namespace: NS,
        },
        false,
      ],
      [{ verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings" }, false],
      // No queue splitting in this install: no QueueConsumers.
      [{ verb: "list", group: sd, resource: "queueconsumers" }, false],
      [{ verb: "get", group: sd, resource: "queueconsumers", namespace: "team-a" }, false],
      [
        {
          verb: "update",
          group: "apiextensions.k8s.io",
          resource: "customresourcedefinitions",
          name: "clustersessions.switchyard.dev",
        },
        false,
      ],
      [
        {
          verb: "get",
          group: "apiextensions.k8s.io",
          resource: "customresourcedefinitions",
          name: "clustersessions.switchyard.dev",
        },
        true,
      ],
    ]);
  });

  it("helm upgrade of router.replicas changes only the router Deployment", async () => {
    const before = await releaseObjects(primary, "sy", NS);
    const rvBefore = await resourceVersions(primary, before);
    await install(primary, "sy", NS, { router: { replicas: 4 } }, "upgrade");
    const after = await releaseObjects(primary, "sy", NS);
    expect(after.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(
      before.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
    );
    const rvAfter = await resourceVersions(primary, after);
    const changed = [...rvAfter].filter(([k, v]) => rvBefore.get(k) !== v).map(([k]) => k);
    expect(changed).toEqual([`Deployment/${NS}/switchyard-router`]);
    const router = await primary
      .kubeConfig()
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ name: "switchyard-router", namespace: NS });
    expect(router.spec?.replicas).toBe(4);
  });
});

describe("member install", () => {
  const opsRole = "switchyard-member-operations";
  const sessionsRole = "switchyard-member-sessions";
  const memberChecks: Check[] = [
    [{ verb: "create", group: sd, resource: "clustersessions", namespace: "team-a" }, true],
    [{ verb: "delete", group: sd, resource: "clustersessions", namespace: "team-a" }, true],
    [{ verb: "watch", group: sd, resource: "clustersessions" }, true],
    [
      { verb: "patch", group: sd, resource: "clustersessions", subresource: "status", namespace: "team-a" },
      true,
    ],
    [{ verb: "get", group: sd, resource: "switchyardoperators", name: "operator" }, true],
    [{ verb: "list", resource: "pods", namespace: "team-a" }, true],
    [{ verb: "get", group: "apps", resource: "deployments", namespace: "team-a" }, true],
    // Branch sync: copies of branch CRs (never their status), and their Secrets read by name.
    [{ verb: "create", group: sd, resource: "pgbranchdatabases", namespace: "team-a" }, true],
    [{ verb: "watch", group: sd, resource: "mysqlbranchdatabases" }, true],
    [{ verb: "delete", group: sd, resource: "pgbranchdatabases", namespace: "team-a" }, true],
    [{ verb: "get", resource: "secrets", namespace: "team-a" }, true],
    [
      { verb: "patch", group: sd, resource: "pgbranchdatabases", subresource: "status", namespace: "team-a" },
      false,
    ],
    [{ verb: "list", resource: "secrets", namespace: "team-a" }, false],
    [{ verb: "watch", resource: "secrets" }, false],
    [{ verb: "create", resource: "secrets", namespace: "team-a" }, false],
    [{ verb: "update", group: sd, resource: "clustersessions", namespace: "team-a" }, false],
    [{ verb: "create", group: sd, resource: "multiclustersessions", namespace: "team-a" }, false],
    [{ verb: "update", group: sd, resource: "switchyardoperators", name: "operator" }, false],
    [{ verb: "patch", group: "apps", resource: "deployments", namespace: "team-a" }, false],
    [{ verb: "create", resource: "pods", namespace: "team-a" }, false],
  ];

  it("with multiClusterMemberIamGroup binds both ClusterRoles to the group and creates no ServiceAccount", async () => {
    await install(east, "sy", NS, { multiClusterMember: true, multiClusterMemberIamGroup: MEMBER_GROUP });
    const rbac = east.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    for (const role of [opsRole, sessionsRole]) {
      await rbac.readClusterRole({ name: role });
      const binding = await rbac.readClusterRoleBinding({ name: role });
      expect(binding.subjects).toEqual([
        { kind: "Group", apiGroup: "rbac.authorization.k8s.io", name: MEMBER_GROUP },
      ]);
    }
    const sas = await east
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .listNamespacedServiceAccount({ namespace: NS });
    expect(sas.items.map((s) => s.metadata!.name)).not.toContain("switchyard-primary");
    // An IAM-mapped user in the group gets exactly the member permissions; the same user without it gets none.
    await expectAccess(east, "arn:aws:sts::111122223333:assumed-role/primary/session", memberChecks, [
      MEMBER_GROUP,
      "system:authenticated",
    ]);
    await expectAccess(
      east,
      "arn:aws:sts::111122223333:assumed-role/primary/session",
      memberChecks.map(([a]) => [a, false]),
      ["system:authenticated"],
    );
  });

  it("without a group binds the ServiceAccount switchyard-primary, which may renew only its own token", async () => {
    // A second release in its own namespace with its own names on the same cluster, its session
    // namespaces listed: branch Secrets are readable there only.
    await createNamespaces(east, ["team-a", "team-b"]);
    await install(east, "sy2", "sy2", {
      fullnameOverride: "sy2",
      multiClusterMember: true,
      sessions: { allowedNamespaces: ["team-a"] },
    });
    const rbac = east.kubeConfig().makeApiClient(RbacAuthorizationV1Api);
    const sa = { kind: "ServiceAccount", name: "switchyard-primary", namespace: "sy2" };
    for (const role of ["sy2-member-operations", "sy2-member-sessions"]) {
      const binding = await rbac.readClusterRoleBinding({ name: role });
      expect(binding.subjects).toEqual([sa]);
    }
    const secrets = await rbac.readNamespacedRoleBinding({
      name: "sy2-member-branch-secrets",
      namespace: "team-a",
    });
    expect(secrets.subjects).toEqual([sa]);
    await expectAccess(east, "system:serviceaccount:sy2:switchyard-primary", [
      ...memberChecks,
      [{ verb: "get", resource: "secrets", namespace: "team-b" }, false],
      [{ verb: "get", resource: "secrets", namespace: "sy2" }, false],
    ]);
    // Real tokens: the Primary's bearer token renews itself through TokenRequest, and nothing else.
    const core = east.kubeConfig().makeApiClient(CoreV1Api);
    const first = await core.createNamespacedServiceAccountToken({
      name: "switchyard-primary",
      namespace: "sy2",
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const asPrimary = bearerKubeConfig(east, first.status!.token).makeApiClient(CoreV1Api);
    const renewed = await asPrimary.createNamespacedServiceAccountToken({
      name: "switchyard-primary",
      namespace: "sy2",
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    expect(renewed.status?.token.split(".")).toHaveLength(3);
    const other = await asPrimary
      .createNamespacedServiceAccountToken({
        name: "default",
        namespace: "sy2",
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number },
      );
    expect(other?.code).toBe(403);
  });
});

describe("queue splitting install", () => {
  const shop = "shop-q";
  const release = { name: "sy3", namespace: "sy3", sa: "sy3-control-plane" };

  beforeAll(async () => {
    const shape = (await valuesShapes()).find((v) => v.name === "member splitting SQS queues (IRSA)")!;
    await createNamespaces(east, [shop]);
    // Its own names beside the member releases already on this cluster.
    await install(east, release.name, release.namespace, { ...shape.values, fullnameOverride: release.name });
  });

  async function tokenOf(namespace: string, name: string): Promise<KubeConfig> {
    const tr = await east
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespacedServiceAccountToken({
        name,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
    return bearerKubeConfig(east, tr.status!.token);
  }

  it("the control plane's identity reads QueueConsumers and patches the consumer workloads, nothing more", async () => {
    await expectAccess(east, `system:serviceaccount:${release.namespace}:${release.sa}`, [
      [{ verb: "get", group: sd, resource: "queueconsumers", namespace: shop }, true],
      [{ verb: "list", group: sd, resource: "queueconsumers" }, true],
      [{ verb: "watch", group: sd, resource: "queueconsumers" }, true],
      [
        { verb: "patch", group: sd, resource: "queueconsumers", subresource: "status", namespace: shop },
        true,
      ],
      [{ verb: "get", group: "apps", resource: "deployments", namespace: shop }, true],
      [{ verb: "patch", group: "apps", resource: "deployments", namespace: shop }, true],
      [{ verb: "get", group: "apps", resource: "statefulsets", namespace: shop }, true],
      [{ verb: "patch", group: "apps", resource: "statefulsets", namespace: shop }, true],
      [
        {
          verb: "get",
          group: "apiextensions.k8s.io",
          resource: "customresourcedefinitions",
          name: "queueconsumers.switchyard.dev",
        },
        true,
      ],
      [{ verb: "create", group: sd, resource: "queueconsumers", namespace: shop }, false],
      [{ verb: "update", group: sd, resource: "queueconsumers", namespace: shop }, false],
      [{ verb: "delete", group: sd, resource: "queueconsumers", namespace: shop }, false],
      [{ verb: "update", group: "apps", resource: "deployments", namespace: shop }, false],
      [{ verb: "delete", group: "apps", resource: "statefulsets", namespace: shop }, false],
    ]);
    const sa = await east
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .readNamespacedServiceAccount({ name: release.sa, namespace: release.namespace });
    expect(sa.metadata?.annotations?.["eks.amazonaws.com/role-arn"]).toBe(
      "arn:aws:iam::111122223333:role/sy-queues",
    );
  });

  it("with a real token of that ServiceAccount lists QueueConsumers; a control plane installed without it cannot", async () => {
    await queueConsumerClient(east.kubeConfig()).create({
      metadata: { name: "worker", namespace: shop },
      spec: {
        consumer: "deployment/worker",
        queues: [{ id: "orders", type: "SQS", envVar: "ORDERS_QUEUE_URL" }],
      },
    });
    const asSplitter = queueConsumerClient(await tokenOf(release.namespace, release.sa));
    const listed = await asSplitter.list({ namespace: shop });
    expect(listed.items.map((c) => c.metadata.name)).toEqual(["worker"]);
    // The member release "sy" on this cluster does not split queues.
    const asOther = queueConsumerClient(await tokenOf(NS, "switchyard-control-plane"));
    await expect(asOther.list({ namespace: shop })).rejects.toMatchObject({ code: 403 });
  });
});
