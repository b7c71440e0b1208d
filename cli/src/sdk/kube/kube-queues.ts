// SQS queue splitting as the user sees it on the Primary, with the user's own credentials:
// each session's splits (one row per session × cluster × queue) and the QueueConsumers that
// say which queues a workload consumes. On a Primary the rows come from the parents: a
// parent's `status.children` carries only readiness, its `status.queues` the Default
// cluster's part of each split (mirrored from that child); in single-cluster mode each
// ClusterSession reports its own `status.queues`. A split the control plane has not reported
// on yet is listed with phase "-".
import type { KubeConfig } from "@kubernetes/client-node";
import {
  GROUP,
  clusterSessionClient,
  multiClusterSessionClient,
  queueConsumerClient,
  type ConnectParams,
  type QueueSplitStatus,
  type SwitchyardOperator,
} from "../../../../proto/api/v1alpha1/index.js";
import { explainKubeError } from "./kube-access.js";
import { sessionModeOf } from "./operator-info.js";
import { queuesOf } from "./session-queues.js";

/** One cluster's part of one session's split of one queue. */
export interface QueueSplitRow {
  session: string;
  namespace: string;
  kind: "MultiClusterSession" | "ClusterSession";
  cluster: string;
  queueId: string;
  /** Waiting, Splitting, Failed, or "-" before the control plane reported. */
  phase: string;
  mode: "steal" | "mirror";
  envVar?: string;
  outputQueueUrl?: string;
  localValue?: string;
  reason?: string;
  message?: string;
}

/** A QueueConsumer: which queues a workload consumes and through which variables. */
export interface QueueConsumerSummary {
  name: string;
  namespace: string;
  consumer: string;
  queues: Array<{ id: string; type: string; envVar: string }>;
}

const FIELD_MANAGER = "switchyard-cli";

/** The rows of one session object: every split its spec asks for, with what its status says. */
export function splitRows(
  session: { name: string; namespace: string; kind: QueueSplitRow["kind"]; cluster: string },
  connectParams: ConnectParams | undefined,
  queues: readonly QueueSplitStatus[],
): QueueSplitRow[] {
  const specs = new Map((connectParams?.sqsSplit ?? []).map((s) => [s.queueId, s]));
  const reported = new Map(queues.map((q) => [q.queueId, q]));
  const ids = [...new Set([...specs.keys(), ...reported.keys()])].sort();
  return ids.map((queueId) => {
    const q = reported.get(queueId);
    return {
      session: session.name,
      namespace: session.namespace,
      kind: session.kind,
      cluster: session.cluster,
      queueId,
      phase: q?.phase ?? "-",
      mode: specs.get(queueId)?.mode ?? "steal",
      ...(q?.envVar ? { envVar: q.envVar } : {}),
      ...(q?.outputQueueUrl ? { outputQueueUrl: q.outputQueueUrl } : {}),
      ...(q?.localValue ? { localValue: q.localValue } : {}),
      ...(q?.reason ? { reason: q.reason } : {}),
      ...(q ? (q.message ? { message: q.message } : {}) : { message: "no status yet" }),
    };
  });
}

export class KubeQueues {
  readonly #kc: KubeConfig;

  constructor(kc: KubeConfig) {
    this.#kc = kc;
  }

  #fail(err: unknown, resource: string, namespace: string) {
    return explainKubeError(err, { verb: "list", resource: `${resource}.${GROUP}`, namespace }, this.#kc);
  }

  /** Every queue split of the sessions in `namespace`, in the operator's session mode. */
  async splits(namespace: string, operator: SwitchyardOperator): Promise<QueueSplitRow[]> {
    const rows: QueueSplitRow[] = [];
    if (sessionModeOf(operator) === "multi-cluster") {
      const list = await multiClusterSessionClient(this.#kc, { fieldManager: FIELD_MANAGER })
        .list({ namespace })
        .catch((err: unknown) => {
          throw this.#fail(err, "multiclustersessions", namespace);
        });
      for (const s of list.items) {
        const byChildren = Object.entries(s.status?.children ?? {}).find(([, c]) => c.defaultCluster)?.[0];
        const cluster = byChildren ?? operator.spec.defaultCluster ?? "-";
        const session = { name: s.metadata.name!, namespace, kind: "MultiClusterSession" as const, cluster };
        rows.push(...splitRows(session, s.spec.connectParams, queuesOf(s)));
      }
    } else {
      const list = await clusterSessionClient(this.#kc, { fieldManager: FIELD_MANAGER })
        .list({ namespace })
        .catch((err: unknown) => {
          throw this.#fail(err, "clustersessions", namespace);
        });
      for (const s of list.items) {
        const cluster = s.spec.parent?.cluster ?? operator.spec.clusterName;
        const session = { name: s.metadata.name!, namespace, kind: "ClusterSession" as const, cluster };
        rows.push(...splitRows(session, s.spec.connectParams, queuesOf(s)));
      }
    }
    return rows.sort(
      (a, b) =>
        a.session.localeCompare(b.session) ||
        a.cluster.localeCompare(b.cluster) ||
        a.queueId.localeCompare(b.queueId),
    );
  }

  /** The QueueConsumers of `namespace`, by name. */
  async consumers(namespace: string): Promise<QueueConsumerSummary[]> {
    const list = await queueConsumerClient(this.#kc, { fieldManager: FIELD_MANAGER })
      .list({ namespace })
      .catch((err: unknown) => {
        throw this.#fail(err, "queueconsumers", namespace);
      });
    return list.items
      .map((c) => ({
        name: c.metadata.name!,
        namespace: c.metadata.namespace!,
        consumer: c.spec.consumer,
        queues: c.spec.queues.map((q) => ({ id: q.id, type: q.type ?? "SQS", envVar: q.envVar })),
      }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }
}
