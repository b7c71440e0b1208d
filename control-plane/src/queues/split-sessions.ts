// How the queue split reconciler reads sessions and QueueConsumers: which splits a session
// asks for, whether this cluster makes its output queues, whether the allow-list refused it,
// its key and admission time, and where a QueueConsumer names a queue id.
import type { ClusterSession, QueueConsumer, SqsQueueSplit } from "../../../proto/api/v1alpha1/index.js";
import { QUEUE_SPLIT_FINALIZER } from "./queue-split-status.js";

export const splitsOf = (s: ClusterSession): SqsQueueSplit[] => s.spec.connectParams?.sqsSplit ?? [];
export const ownsOutputs = (s: ClusterSession) => !s.spec.parent || s.spec.parent.defaultCluster === true;
export const refused = (s: ClusterSession) =>
  s.status?.conditions?.some((c) => c.type === "Valid" && c.status === "False") ?? false;

export function held(s: ClusterSession): boolean {
  return s.metadata.finalizers?.includes(QUEUE_SPLIT_FINALIZER) ?? false;
}
export function keyOf(s: ClusterSession): string {
  return `${s.metadata.namespace}:${s.metadata.name}`;
}
export function admitted(s: ClusterSession): number {
  return Date.parse(s.metadata.creationTimestamp as unknown as string) || 0;
}
export function containerOf(c: QueueConsumer): string | undefined {
  return c.spec.consumer.split("/")[3];
}
export function findQueue(consumers: readonly QueueConsumer[], id: string) {
  for (const consumer of consumers) {
    const queue = consumer.spec.queues.find((q) => q.id === id);
    if (queue) return { consumer, queue };
  }
  return undefined;
}
