// The API objects a cluster with a real node needs beyond what kube-apiserver bootstraps:
// endpoints for the `kubernetes` Service (the test API servers run with
// `--endpoint-reconciler-type=none`, so pods would find no API server behind 10.0.0.1), the
// `kube-dns` Service with its endpoints on the node's CoreDNS, and CoreDNS's RBAC. Endpoints are
// EndpointSlices of selector-less Services, as kube-proxy reads them.
import {
  CoreV1Api,
  DiscoveryV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1EndpointSlice,
} from "@kubernetes/client-node";

/** ClusterIP of the cluster DNS Service (kubelets' `clusterDNS`). */
export const CLUSTER_DNS_IP = "10.0.0.10";

/** User (client certificate CN) CoreDNS runs as. */
export const COREDNS_USER = "system:coredns";

const MANAGED_BY = "switchyard-test-node";

async function createOrReplace<T>(create: () => Promise<T>, replace: () => Promise<T>): Promise<T> {
  try {
    return await create();
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw err;
    return replace();
  }
}

function slice(
  namespace: string,
  service: string,
  ip: string,
  ports: V1EndpointSlice["ports"],
): V1EndpointSlice {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${service}-node`,
      namespace,
      labels: {
        "kubernetes.io/service-name": service,
        "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
      },
    },
    addressType: "IPv4",
    endpoints: [{ addresses: [ip], conditions: { ready: true } }],
    ports,
  };
}

async function applySlice(kc: KubeConfig, s: V1EndpointSlice): Promise<void> {
  const api = kc.makeApiClient(DiscoveryV1Api);
  const namespace = s.metadata!.namespace!;
  const name = s.metadata!.name!;
  await createOrReplace(
    () => api.createNamespacedEndpointSlice({ namespace, body: s }),
    async () => {
      const current = await api.readNamespacedEndpointSlice({ name, namespace });
      return api.replaceNamespacedEndpointSlice({
        name,
        namespace,
        body: { ...s, metadata: { ...s.metadata, resourceVersion: current.metadata?.resourceVersion } },
      });
    },
  );
}

/** Points the `kubernetes` Service at the API server as pods reach it (the node's host address). */
export async function publishApiServerEndpoint(kc: KubeConfig, hostIp: string, port: number): Promise<void> {
  await applySlice(kc, slice("default", "kubernetes", hostIp, [{ name: "https", port, protocol: "TCP" }]));
}

/** CoreDNS's read access, the `kube-dns` Service and its endpoints on the node's address. */
export async function publishClusterDns(kc: KubeConfig, nodeIp: string): Promise<void> {
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const role = "system:coredns";
  await createOrReplace(
    () =>
      rbac.createClusterRole({
        body: {
          metadata: { name: role },
          rules: [
            {
              apiGroups: [""],
              resources: ["endpoints", "services", "pods", "namespaces"],
              verbs: ["list", "watch"],
            },
            { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list", "watch"] },
          ],
        },
      }),
    () => rbac.readClusterRole({ name: role }),
  );
  await createOrReplace(
    () =>
      rbac.createClusterRoleBinding({
        body: {
          metadata: { name: role },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
          subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: COREDNS_USER }],
        },
      }),
    () => rbac.readClusterRoleBinding({ name: role }),
  );
  await createOrReplace(
    () =>
      core.createNamespacedService({
        namespace: "kube-system",
        body: {
          metadata: { name: "kube-dns", namespace: "kube-system", labels: { "k8s-app": "kube-dns" } },
          spec: {
            clusterIP: CLUSTER_DNS_IP,
            ports: [
              { name: "dns", port: 53, protocol: "UDP", targetPort: 53 },
              { name: "dns-tcp", port: 53, protocol: "TCP", targetPort: 53 },
            ],
          },
        },
      }),
    () => core.readNamespacedService({ name: "kube-dns", namespace: "kube-system" }),
  );
  await applySlice(
    kc,
    slice("kube-system", "kube-dns", nodeIp, [
      { name: "dns", port: 53, protocol: "UDP" },
      { name: "dns-tcp", port: 53, protocol: "TCP" },
    ]),
  );
}
