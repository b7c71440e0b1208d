// Every shape of chart values the suites install or render, in one list: the render tests
// check each renders and lints, and the third-party checkers (test/integration/checkers) score
// each render. A shape added to a suite belongs here too, so the checkers see it.
import { createCertificateAuthority } from "../../env/index.js";

export interface ValuesShape {
  /** Names the shape in test titles and checker findings. */
  name: string;
  /** Where the values come from in the suites. */
  usedBy: string;
  values: Record<string, unknown>;
  /** Release namespace (default switchyard). */
  namespace?: string;
}

/** A syntactically valid ServiceAccount JWT (iat/exp/sub), signed by nobody. */
export function fakeJwt(): string {
  return [
    Buffer.from(JSON.stringify({ alg: "RS256", kid: "k" })).toString("base64url"),
    Buffer.from(
      JSON.stringify({ iat: 1, exp: 3601, sub: "system:serviceaccount:switchyard:switchyard-primary" }),
    ).toString("base64url"),
    "c2lnbmF0dXJl",
  ].join(".");
}

/** The shapes, with real PEMs (a fresh CA) where the values carry certificates. */
export async function valuesShapes(): Promise<ValuesShape[]> {
  const ca = await createCertificateAuthority("values-shapes-ca");
  const caData = Buffer.from(ca.certPem).toString("base64");
  const client = await ca.issue({ commonName: "switchyard-primary", usage: "client" });
  const jwt = fakeJwt();
  const bearer = (server: string) => ({ authType: "bearerToken", server, caData, token: jwt });
  return [
    { name: "default", usedBy: "chart-render, chart-install (upgrade)", values: {} },
    {
      name: "primary (management-only)",
      usedBy: "env/stack/embedded-stack.ts (the Primary), chart-render (flags)",
      values: {
        multiCluster: {
          enabled: true,
          clusterName: "primary",
          managementOnly: true,
          defaultCluster: "east",
          clusters: {
            east: { ...bearer("https://127.0.0.1:6443"), namespace: "switchyard" },
            west: { ...bearer("https://127.0.0.2:6443"), namespace: "switchyard" },
          },
        },
      },
    },
    {
      name: "both (Primary that is also a workload cluster)",
      usedBy: "chart-render (flags in every mode)",
      values: {
        multiCluster: {
          enabled: true,
          clusterName: "primary",
          defaultCluster: "primary",
          clusters: { east: bearer("https://east.example.com:6443") },
        },
      },
    },
    {
      name: "multi-cluster (bearer, eks, mtls; credentials in values)",
      usedBy: "chart-render (valid multi-cluster values), chart-install (Primary install)",
      values: {
        multiCluster: {
          enabled: true,
          clusterName: "primary",
          defaultCluster: "east",
          clusters: {
            east: { ...bearer("https://east.example.com:6443"), namespace: "sy" },
            north: { authType: "eks", server: "https://abc123.gr7.eu-north-1.eks.amazonaws.com", caData },
            south: {
              authType: "mtls",
              server: "https://south.example.com",
              caData,
              tls: { cert: client.certPem, key: client.keyPem },
            },
            west: { authType: "bearerToken", server: "https://west.example.com" },
          },
        },
        sessions: { allowedNamespaces: ["team-a"] },
      },
    },
    {
      name: "member",
      usedBy: "env/stack/embedded-stack.ts (workload clusters), chart-render (flags)",
      values: {
        multiClusterMember: true,
        multiCluster: { clusterName: "east" },
        router: { endpoint: "wss://east.example.com" },
      },
    },
    {
      name: "member bound to an IAM group",
      usedBy: "chart-install (member install)",
      values: { multiClusterMember: true, multiClusterMemberIamGroup: "eks:switchyard-primaries" },
    },
    {
      name: "member, second release with fullnameOverride",
      usedBy: "chart-install (member install)",
      values: {
        fullnameOverride: "sy2",
        multiClusterMember: true,
        sessions: { allowedNamespaces: ["team-a"] },
      },
      namespace: "sy2",
    },
    {
      name: "member splitting SQS queues (IRSA)",
      usedBy: "chart-install (queue splitting install, as release sy3 with fullnameOverride sy3)",
      values: {
        multiClusterMember: true,
        controlPlane: {
          serviceAccountAnnotations: {
            "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/sy-queues",
          },
        },
        queues: { sqs: { enabled: true, region: "eu-north-1" } },
      },
    },
    {
      name: "TLS, observability and autoscaling",
      usedBy: "chart-render (helm lint, observability, HPA)",
      values: {
        tls: { secretName: "sy-tls", caKey: "ca.pem" },
        metrics: { serviceMonitor: { enabled: true }, grafanaDashboard: { enabled: true } },
        router: {
          autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 7 },
          endpoint: "wss://switchyard.example.com",
        },
      },
    },
    {
      name: "allow-lists, scaled, hard anti-affinity, restricted network",
      usedBy: "chart-render (flags, scaling, scheduling, network policies)",
      values: {
        sessions: { allowedNamespaces: ["team-a", "team-b"], allowedTargetKinds: ["deployment"] },
        controlPlane: { replicas: 3, podAntiAffinity: "hard" },
        router: { replicas: 5, podAntiAffinity: "hard" },
        networkPolicy: {
          routerFrom: [{ ipBlock: { cidr: "10.0.0.0/8" } }],
          controlPlaneEgress: [{ to: [{ ipBlock: { cidr: "0.0.0.0/0" } }], ports: [{ port: 443 }] }],
        },
      },
    },
  ];
}
