// `switchyard queues status|consumers`: the SQS queue splits of the sessions in the
// namespace, one row per session × cluster × queue (phase, mode, output queue, what the
// control plane says), read from the sessions on the Primary; and the QueueConsumers, which
// say which queues each workload consumes and through which variable.
import type { KubeConfig } from "@kubernetes/client-node";
import { KubeQueues, type QueueConsumerSummary, type QueueSplitRow } from "../sdk/kube/kube-queues.js";
import { readOperator } from "../sdk/kube/operator-info.js";
import { json, table, type Out, type OutputFormat } from "./output.js";

export function formatQueueSplits(rows: readonly QueueSplitRow[]): string {
  if (rows.length === 0) return "No queue splits.\n";
  return table(
    ["SESSION", "CLUSTER", "QUEUE", "PHASE", "MODE", "OUTPUT QUEUE", "MESSAGE"],
    rows.map((r) => [
      r.session,
      r.cluster,
      r.queueId,
      r.phase,
      r.mode,
      r.outputQueueUrl ?? "-",
      [r.reason, r.message].filter(Boolean).join(": ") || "-",
    ]),
  );
}

export function formatQueueConsumers(list: readonly QueueConsumerSummary[]): string {
  if (list.length === 0) return "No queue consumers.\n";
  return table(
    ["NAME", "CONSUMER", "QUEUES", "ENV VARS"],
    list.map((c) => [
      c.name,
      c.consumer,
      c.queues.map((q) => q.id).join(","),
      c.queues.map((q) => q.envVar).join(","),
    ]),
  );
}

export async function queuesStatusCommand(
  kc: KubeConfig,
  o: { namespace: string },
  format: OutputFormat,
  out: Out,
): Promise<number> {
  const rows = await new KubeQueues(kc).splits(o.namespace, await readOperator(kc));
  out.stdout(format === "json" ? json({ queues: rows }) : formatQueueSplits(rows));
  return 0;
}

export async function queuesConsumersCommand(
  kc: KubeConfig,
  o: { namespace: string },
  format: OutputFormat,
  out: Out,
): Promise<number> {
  const list = await new KubeQueues(kc).consumers(o.namespace);
  out.stdout(format === "json" ? json({ consumers: list }) : formatQueueConsumers(list));
  return 0;
}
