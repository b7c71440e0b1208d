// The pod stack: Switchyard as a user runs it, on real nodes. A cluster set with one real node
// per cluster (test/env/nodes), the project's images imported into every node (no Docker, no
// registry), the chart installed with Helm into each cluster — a management-only Primary and
// workload clusters east (the Default) and west — so that the control planes and routers run
// as the chart's Deployments under its ServiceAccounts, and a demo Deployment (two replicas)
// behind a NodePort Service in every workload cluster that sessions inject agents into.
//
// Every endpoint speaks TLS with one CA of the stack: routers (wss://, the chart's
// `switchyard-tls` Secret in each cluster, covering the node address and the in-cluster
// names), the control planes' RouteDiscovery, member gateways as the Primary's routers see
// them (`tls.gatewayCa`) and, when agentTls is on, the sidecar agents. The laptop side — the
// CLI — reaches the Primary routers at the Primary node's address and node port, the way it
// reaches an ingress; the Primary's control plane reaches the members' API servers at their
// node-network addresses, as it would a remote cluster's endpoint.
//
//   const stack = await startPodStack();
//   // switchyard exec ...stack.developerCliArgs -- …; curl stack.workloads.east.demoUrl
//   await stack.stop();
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { switchyardOperatorClient } from "../../../proto/api/v1alpha1/index.js";
import {
  startClusterSet,
  type ClusterSet,
  type ClusterUser,
  type TestCluster,
} from "../clusters/cluster-set.js";
import { Helm } from "./helm.js";
import { demoAppImage, productImage, PRODUCT_IMAGE, REDIRECT_IMAGE } from "../images/project-images.js";
import { redirectImage } from "../images/redirect-image.js";
import { nodeAddresses } from "../nodes/node-network.js";
import { startNodes, type NodeSet } from "../nodes/node-set.js";
import type { TestNode } from "../nodes/node.js";
import { createCertificateAuthority, type CertificateAuthority } from "../pki.js";
import { envRoot, ProcessGroupDir } from "../processes.js";
import { freePorts } from "../ports.js";
import { ELASTICMQ_CREDENTIALS, startElasticmq, type ElasticmqServer } from "../sqs/elasticmq-server.js";
import { createPodDemo, DEMO_NODE_PORT } from "./pod-demo.js";
import { describePodProblems } from "./pod-problems.js";
import {
  b64,
  demoTargetArgs,
  grantDevelopers,
  installChart,
  primaryClusterValues,
  serviceAccountToken,
  STACK_NAMESPACE,
} from "./stack-install.js";
import { eventually } from "../../support/poll.js";

/** Node port of the routers' Service in every cluster (the chart's router.service.nodePort). */
export const ROUTER_NODE_PORT = 30443;
/** The Secret (in each target namespace) sidecar agents serve wss:// with, and the name it covers. */
export const AGENT_TLS_SECRET = "switchyard-agent-tls";
export const AGENT_TLS_NAME = "switchyard-agent";

export interface PodStackOptions {
  /** Workload clusters; the first is the Default cluster (default ["east", "west"]). */
  workloadClusters?: string[];
  /** Router replicas on the Primary (default 2); members run one. */
  primaryRouters?: number;
  /** Control-plane replicas on the Primary (default 2: a leader and a standby); members run one. */
  primaryControlPlanes?: number;
  /** Replicas of each cluster's demo Deployment (default 2). */
  demoReplicas?: number;
  /** Extra env vars of the demo Deployment. */
  demoEnv?: Record<string, string>;
  /** Extra env vars of one cluster's demo Deployment, from what the stack knows of that cluster before it starts. */
  demoEnvFor?: (cluster: PodClusterAddresses) => Record<string, string>;
  /**
   * An ElasticMQ per workload cluster, listening on that cluster's node host address (its pods
   * and this machine reach it there), and the cluster's control plane splitting queues against
   * it as the chart configures it (queues.sqs: endpoint, region, static credentials from a
   * Secret). Default false.
   */
  sqs?: boolean;
  /**
   * The Default cluster's branching makes PostgreSQL branches as database pods of this image
   * (the chart's branching.postgres.provisioner=pod): import it into that cluster's node before
   * the first branch. Default: branches on a server (none configured).
   */
  branchPodImage?: string;
  /** Sidecar agents serve wss:// with the stack's CA (default true). */
  agentTls?: boolean;
  /**
   * The members' admission webhook (the chart's sidecar.injection, its CA the stack's): pods of
   * opted-in workloads are born with the agent. Their API servers reach it through their node
   * (test/env/nodes/cluster-egress.ts). Default false.
   */
  injection?: boolean;
  /** Where the clusters log (default: the set's own directory, removed by stop()). */
  logDir?: string;
  /** Told of each phase as it ends: name and milliseconds since the start. */
  onPhase?: (phase: string, ms: number) => void;
}

/** Where a workload cluster's pods reach this machine, known before its node starts. */
export interface PodClusterAddresses {
  name: string;
  /** This machine's address on the cluster's node link: what its pods dial to reach the host. */
  hostIp: string;
  /** With `sqs`: the cluster's SQS endpoint (`http://<hostIp>:<port>`), the prefix of its queue URLs. */
  sqsEndpoint?: string;
}

export interface PodWorkload {
  name: string;
  cluster: TestCluster;
  node: TestNode;
  /** The node's address: its NodePorts answer here, from the host and from other nodes. */
  nodeIp: string;
  /** The demo Service from outside the cluster (its NodePort): what any replica may answer. */
  demoUrl: string;
  /** This cluster's routers from outside (what the Primary's routers dial). */
  routerEndpoint: string;
  /** This machine's address on the node link (see PodClusterAddresses). */
  hostIp: string;
  /** With `sqs`: the cluster's ElasticMQ. */
  sqs?: ElasticmqServer;
}

export interface PodStack {
  set: ClusterSet;
  nodes: NodeSet;
  primary: TestCluster;
  primaryNode: TestNode;
  workloads: Record<string, PodWorkload>;
  /** The Primary's routers from outside (what the CLI dials). */
  routerEndpoint: string;
  /** PEM of the stack's CA, and a file holding it (the CLI's --router-ca). */
  caPem: string;
  caFile: string;
  /** A developer allowed to open sessions in namespace "default" on the Primary. */
  developer: ClusterUser;
  /** `switchyard` flags that aim a command at the demo target as the developer. */
  developerCliArgs: string[];
  /** The stack's own directory (CA, helm home); removed by stop(). */
  dir: string;
  /** Milliseconds from the start to the end of each phase. */
  phases: Record<string, number>;
  /** Pods that are not Ready in any cluster, with their containers' states and last log lines. */
  describeProblems(): Promise<string>;
  /** Stops the nodes, then the clusters, and removes every file. Safe to call twice. */
  stop(): Promise<void>;
}

const NAMESPACE_LABEL = "switchyard.dev/stack";
/** The Secret (in each member's release namespace) holding the SQS test credentials (queues.sqs.credentialsSecret). */
const SQS_CREDENTIALS_SECRET = "switchyard-sqs";
const SQS_REGION = "us-east-1";

/** A kubernetes.io/tls Secret from the stack's CA, covering `dnsNames` and `ipAddresses`. */
async function tlsSecret(
  kc: KubeConfig,
  ca: CertificateAuthority,
  namespace: string,
  name: string,
  dnsNames: string[],
  ipAddresses: string[] = [],
): Promise<void> {
  const leaf = await ca.issue({
    commonName: dnsNames[0] ?? ipAddresses[0] ?? name,
    usage: "server",
    dnsNames,
    ipAddresses,
    validForSeconds: 7 * 86_400,
  });
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace,
    body: {
      metadata: { name },
      type: "kubernetes.io/tls",
      data: { "tls.crt": b64(leaf.certPem), "tls.key": b64(leaf.keyPem), "ca.crt": b64(ca.certPem) },
    },
  });
}

/** The stack's namespace with the chart's TLS Secret, before the chart's pods look for it. */
async function prepareNamespace(kc: KubeConfig, ca: CertificateAuthority, nodeIp: string): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNamespace({
    body: { metadata: { name: STACK_NAMESPACE, labels: { [NAMESPACE_LABEL]: "pods" } } },
  });
  const svc = (n: string) => [`${n}.${STACK_NAMESPACE}.svc`, `${n}.${STACK_NAMESPACE}.svc.cluster.local`];
  await tlsSecret(
    kc,
    ca,
    STACK_NAMESPACE,
    "switchyard-tls",
    [...svc("switchyard-control-plane"), ...svc("switchyard-router"), "localhost"],
    [nodeIp, "127.0.0.1"],
  );
}

/** Values every cluster's release shares: the project's images, fast leader election, node ports. */
function commonValues(
  nodeIp: string,
  routers: number,
  controlPlanes: number,
  agentTls: boolean,
  injectionCaPem?: string,
): object {
  const [repository, tag] = PRODUCT_IMAGE.split(":");
  const [redirectRepository, redirectTag] = REDIRECT_IMAGE.split(":");
  return {
    image: { repository, tag, pullPolicy: "Never" },
    sidecar: {
      redirectImage: { repository: redirectRepository, tag: redirectTag },
      ...(injectionCaPem ? { injection: { enabled: true, caBundle: b64(injectionCaPem) } } : {}),
    },
    tls: {
      secretName: "switchyard-tls",
      gatewayCa: true,
      ...(agentTls ? { agentSecretName: AGENT_TLS_SECRET, agentServerName: AGENT_TLS_NAME } : {}),
    },
    controlPlane: {
      replicas: controlPlanes,
      healthCheckIntervalSeconds: 5,
      leaderElection: { leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 1 },
    },
    router: {
      replicas: routers,
      service: { type: "NodePort", nodePort: ROUTER_NODE_PORT },
      endpoint: `wss://${nodeIp}:${ROUTER_NODE_PORT}`,
    },
  };
}

/** Waits until every named Deployment of `namespace` has all its replicas available. */
async function deploymentsAvailable(kc: KubeConfig, namespace: string, names: string[], what: string) {
  const apps = kc.makeApiClient(AppsV1Api);
  await eventually(
    what,
    async () => {
      for (const name of names) {
        const d = await apps.readNamespacedDeployment({ name, namespace });
        const want = d.spec?.replicas ?? 1;
        if ((d.status?.availableReplicas ?? 0) < want || (d.status?.updatedReplicas ?? 0) < want)
          return undefined;
      }
      return true;
    },
    { timeoutMs: 180_000, intervalMs: 250 },
  );
}

export async function startPodStack(options: PodStackOptions = {}): Promise<PodStack> {
  const workloadNames = options.workloadClusters ?? ["east", "west"];
  if (workloadNames.length === 0) throw new Error("workloadClusters: name at least one workload cluster");
  const names = ["primary", ...workloadNames];
  const t0 = Date.now();
  const phases: Record<string, number> = {};
  const phase = (name: string) => {
    phases[name] = Date.now() - t0;
    options.onPhase?.(name, phases[name]);
  };
  const group = new ProcessGroupDir(
    join(envRoot(), `stack-pods-${process.pid}-${randomBytes(4).toString("hex")}`),
  );
  let set: ClusterSet | undefined;
  let nodes: NodeSet | undefined;
  let helm: Helm | undefined;
  const sqsServers: Record<string, ElasticmqServer> = {};
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // Nodes first: their teardown deletes the workload controllers and drains through the API servers.
      const errors: unknown[] = [];
      await nodes?.stop().catch((e: unknown) => errors.push(e));
      helm?.close();
      await set?.stop().catch((e: unknown) => errors.push(e));
      for (const server of Object.values(sqsServers))
        await server.stop().catch((e: unknown) => errors.push(e));
      group.remove();
      if (errors.length > 0) throw new Error(errors.map(String).join("\n"));
    })());
  const problems = async () =>
    set ? describePodProblems(names.map((n) => set!.get(n))) : "no clusters were started";
  try {
    const images = [await productImage(), redirectImage(REDIRECT_IMAGE), await demoAppImage()];
    phase("images described");
    set = await startClusterSet({
      clusters: names,
      nodes: true,
      ...(options.logDir ? { logDir: options.logDir } : {}),
    });
    phase("clusters");
    const block = set.nodeBlock!;
    const nodeIp = (name: string) => nodeAddresses(block, names.indexOf(name) + 1).nodeIp;
    const hostIp = (name: string) => nodeAddresses(block, names.indexOf(name) + 1).hostIp;
    // The SQS servers listen on the node links, which exist once the nodes start: their ports
    // are chosen now, for the charts' values and the demos' environment.
    const sqsPorts = options.sqs ? await freePorts(workloadNames.length) : [];
    const addresses = (name: string): PodClusterAddresses => {
      const i = workloadNames.indexOf(name);
      return {
        name,
        hostIp: hostIp(name),
        ...(options.sqs ? { sqsEndpoint: `http://${hostIp(name)}:${sqsPorts[i]}` } : {}),
      };
    };
    const ca = await createCertificateAuthority("switchyard-pod-stack-ca");
    const caFile = join(group.dir, "ca.crt");
    writeFileSync(caFile, ca.certPem, { mode: 0o600 });
    helm = await Helm.create(join(group.dir, "helm"));
    const agentTls = options.agentTls ?? true;
    const routers = options.primaryRouters ?? 2;
    const controlPlanes = options.primaryControlPlanes ?? 2;

    // The nodes start while the chart is installed: the pods are scheduled once they are Ready.
    const nodesStarted = startNodes(set, { images });
    nodesStarted.catch(() => {});
    const s = set;
    const h = helm;
    const remoteTokens: Record<string, string> = {};
    await Promise.all(
      workloadNames.map(async (name) => {
        const c = s.get(name);
        const kc = c.kubeConfig();
        await prepareNamespace(kc, ca, nodeIp(name));
        const sqsEndpoint = addresses(name).sqsEndpoint;
        if (sqsEndpoint)
          await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
            namespace: STACK_NAMESPACE,
            body: {
              metadata: { name: SQS_CREDENTIALS_SECRET },
              stringData: {
                AWS_ACCESS_KEY_ID: ELASTICMQ_CREDENTIALS.accessKeyId,
                AWS_SECRET_ACCESS_KEY: ELASTICMQ_CREDENTIALS.secretAccessKey,
              },
            },
          });
        if (agentTls) await tlsSecret(kc, ca, "default", AGENT_TLS_SECRET, [AGENT_TLS_NAME]);
        await installChart(h, c, {
          ...commonValues(nodeIp(name), 1, 1, agentTls, options.injection ? ca.certPem : undefined),
          multiClusterMember: true,
          multiCluster: { clusterName: name },
          // The Default cluster's control plane runs the branching controllers (--default-cluster).
          ...(name === workloadNames[0]
            ? {
                branching: {
                  defaultCluster: true,
                  ...(options.branchPodImage
                    ? { postgres: { provisioner: "pod", pod: { image: options.branchPodImage } } }
                    : {}),
                },
              }
            : {}),
          ...(sqsEndpoint
            ? {
                queues: {
                  sqs: {
                    enabled: true,
                    region: SQS_REGION,
                    endpoint: sqsEndpoint,
                    credentialsSecret: SQS_CREDENTIALS_SECRET,
                  },
                },
              }
            : {}),
        });
        remoteTokens[name] = await serviceAccountToken(kc, "switchyard-primary");
        await createPodDemo(kc, name, {
          replicas: options.demoReplicas ?? 2,
          // east's Service names its target port (taken by name), west's numbers it (iptables).
          targetPort: workloadNames.indexOf(name) % 2 === 0 ? "name" : "number",
          env: { ...options.demoEnv, ...options.demoEnvFor?.(addresses(name)) },
        });
      }),
    );
    const primary = s.get("primary");
    await prepareNamespace(primary.kubeConfig(), ca, nodeIp("primary"));
    await installChart(h, primary, {
      ...commonValues(nodeIp("primary"), routers, controlPlanes, agentTls),
      ...primaryClusterValues(
        workloadNames[0]!,
        workloadNames.map((name) => ({
          name,
          server: s.get(name).nodeNetworkServer!,
          caPem: s.get(name).caPem,
          token: remoteTokens[name]!,
        })),
      ),
    });
    await grantDevelopers(primary.kubeConfig());
    phase("charts installed");
    nodes = await nodesStarted;
    phase("nodes Ready");
    if (options.sqs) {
      await Promise.all(
        workloadNames.map(async (name, i) => {
          sqsServers[name] = await startElasticmq({
            name: `sqs-${name}`,
            region: SQS_REGION,
            host: hostIp(name),
            port: sqsPorts[i]!,
          });
        }),
      );
      phase("SQS servers");
    }
    const components = ["switchyard-control-plane", "switchyard-router"];
    await Promise.all(
      names.map((name) =>
        deploymentsAvailable(
          s.get(name).kubeConfig(),
          STACK_NAMESPACE,
          components,
          `Switchyard's Deployments in ${name} to be available`,
        ),
      ),
    );
    await Promise.all(
      workloadNames.map((name) =>
        deploymentsAvailable(
          s.get(name).kubeConfig(),
          "default",
          ["demo"],
          `the demo in ${name} to be available`,
        ),
      ),
    );
    phase("pods Ready");
    const operators = switchyardOperatorClient(primary.kubeConfig());
    await eventually(
      "the Primary to publish its router endpoint",
      async () => (await operators.get({ name: "operator" }))?.status?.routerEndpoint,
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    phase("Primary ready");
    const developer = await primary.mintUser("developer", ["developers"]);
    const routerEndpoint = `wss://${nodeIp("primary")}:${ROUTER_NODE_PORT}`;
    const n = nodes;
    return {
      set: s,
      nodes: n,
      primary,
      primaryNode: n.get("primary"),
      workloads: Object.fromEntries(
        workloadNames.map((name) => [
          name,
          {
            name,
            cluster: s.get(name),
            node: n.get(name),
            nodeIp: nodeIp(name),
            demoUrl: `http://${nodeIp(name)}:${DEMO_NODE_PORT}`,
            routerEndpoint: `wss://${nodeIp(name)}:${ROUTER_NODE_PORT}`,
            hostIp: hostIp(name),
            ...(sqsServers[name] ? { sqs: sqsServers[name] } : {}),
          },
        ]),
      ),
      routerEndpoint,
      caPem: ca.certPem,
      caFile,
      developer,
      developerCliArgs: [
        ...demoTargetArgs(developer.kubeconfigPath),
        "--router",
        routerEndpoint,
        "--router-ca",
        caFile,
      ],
      dir: group.dir,
      phases,
      describeProblems: problems,
      stop,
    };
  } catch (err) {
    const detail = await problems().catch((e: unknown) => `(could not list the pods: ${String(e)})`);
    await stop().catch(() => {});
    (err as Error).message += `\n${detail}`;
    throw err;
  }
}
