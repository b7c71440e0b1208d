// What both stacks do to a cluster the way a user would: install the real chart with Helm, mint
// ServiceAccount tokens through TokenRequest, and grant developers the right to open sessions.
// The embedded stack (embedded-stack.ts) then runs the components as local processes; the pod
// stack (pod-stack.ts) lets the chart's own Deployments run them on real nodes.
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { TestCluster } from "../clusters/cluster-set.js";
import { chartDir, type Helm } from "./helm.js";

/** The namespace Switchyard is installed into in every cluster of a stack. */
export const STACK_NAMESPACE = "switchyard";
/** The audience of the tokens routers present to the control plane (the chart's default). */
export const ROUTE_DISCOVERY_AUDIENCE = "switchyard-route-discovery";

export const b64 = (s: string): string => Buffer.from(s).toString("base64");

/** A TokenRequest token of a ServiceAccount of the stack's namespace, valid for a day. */
export async function serviceAccountToken(
  kc: KubeConfig,
  sa: string,
  audiences: string[] = [],
): Promise<string> {
  const tr = await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
    name: sa,
    namespace: STACK_NAMESPACE,
    body: { spec: { audiences, expirationSeconds: 24 * 3600 } },
  });
  return tr.status!.token;
}

/** `helm install switchyard` into the stack's namespace of `c`, with the given values. */
export async function installChart(helm: Helm, c: TestCluster, values: object): Promise<void> {
  const r = await helm.run(
    [
      "install",
      "switchyard",
      chartDir,
      "--namespace",
      STACK_NAMESPACE,
      "--create-namespace",
      "--kubeconfig",
      c.adminKubeconfigPath,
    ],
    [values],
  );
  if (r.code !== 0) throw new Error(`helm install into ${c.name} failed:\n${r.stderr}`);
}

/**
 * The group `developers` may open sessions in namespace "default" and read the operator's
 * status (where the CLI finds the routers' endpoint) — what a cluster admin grants a team.
 */
export async function grantDevelopers(kc: KubeConfig): Promise<void> {
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: "switchyard-developer" },
      rules: [
        {
          apiGroups: ["switchyard.dev"],
          resources: ["multiclustersessions", "clustersessions", "pgbranchdatabases", "mysqlbranchdatabases"],
          verbs: ["get", "list", "watch", "create", "delete"],
        },
        { apiGroups: ["switchyard.dev"], resources: ["switchyardoperators"], verbs: ["get", "list"] },
        // Which queues a workload consumes (`switchyard queues consumers`).
        { apiGroups: ["switchyard.dev"], resources: ["queueconsumers"], verbs: ["get", "list"] },
      ],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: "default",
    body: {
      metadata: { name: "developers-open-sessions" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "switchyard-developer" },
      subjects: [{ kind: "Group", name: "developers", apiGroup: "rbac.authorization.k8s.io" }],
    },
  });
  // A branch's credentials: the Secret its status names, in the developer's own namespace only.
  await rbac.createNamespacedRole({
    namespace: "default",
    body: {
      metadata: { name: "switchyard-developer-branch-secrets" },
      rules: [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"] }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: "default",
    body: {
      metadata: { name: "developers-read-branch-secrets" },
      roleRef: {
        apiGroup: "rbac.authorization.k8s.io",
        kind: "Role",
        name: "switchyard-developer-branch-secrets",
      },
      subjects: [{ kind: "Group", name: "developers", apiGroup: "rbac.authorization.k8s.io" }],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: "developers-read-operator" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "switchyard-developer" },
      subjects: [{ kind: "Group", name: "developers", apiGroup: "rbac.authorization.k8s.io" }],
    },
  });
}

/** `switchyard` flags that aim a command at the demo target in namespace "default" as `kubeconfigPath`'s user. */
export function demoTargetArgs(kubeconfigPath: string): string[] {
  return ["--kubeconfig", kubeconfigPath, "-n", "default", "-t", "deployment/demo"];
}

/** A workload cluster as the Primary's chart values name it: where, which CA, which token. */
export interface RemoteClusterValues {
  name: string;
  server: string;
  caPem: string;
  token: string;
}

/** The Primary's `multiCluster` values: management-only, `defaultCluster` the Default, bearer tokens. */
export function primaryClusterValues(defaultCluster: string, remotes: RemoteClusterValues[]): object {
  return {
    multiCluster: {
      enabled: true,
      clusterName: "primary",
      managementOnly: true,
      defaultCluster,
      clusters: Object.fromEntries(
        remotes.map((r) => [
          r.name,
          {
            authType: "bearerToken",
            server: r.server,
            caData: b64(r.caPem),
            namespace: STACK_NAMESPACE,
            token: r.token,
          },
        ]),
      ),
    },
  };
}
