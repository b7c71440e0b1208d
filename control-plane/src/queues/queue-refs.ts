// How queues are named between the splitter's parts: a queue variable's value (a URL or a
// name) resolved to URL and name, and the tags on every queue the member makes, by which a
// restarted control plane finds them again (never another cluster's: `owner`).
import { GetQueueUrlCommand } from "@aws-sdk/client-sqs";
import type { ConsumerRef } from "./consumer-env.js";
import { queueNameOf, type SqsClients } from "./sqs-clients.js";

export const QUEUE_TAGS = {
  /** The operator cluster id of the control plane that made the queue. */
  owner: "switchyard.dev/owner",
  /** `target` (the deployed consumers' temporary queue) or `output` (a session's). */
  role: "switchyard.dev/role",
  /** URL of the queue it was cloned from, where leftovers drain back to. */
  original: "switchyard.dev/original",
  /** `<namespace>/<kind>/<name>/<queue id>` of a target queue's consumer. */
  consumer: "switchyard.dev/consumer",
  /** `<namespace>:<name>` of an output queue's session. */
  session: "switchyard.dev/session",
} as const;

export interface QueueRef {
  url: string;
  name: string;
  /** The variable holds a URL (else a name): queues made for it are given the same way. */
  byUrl: boolean;
}

export function consumerTag(ref: Pick<ConsumerRef, "namespace" | "kind" | "name">, id: string): string {
  return `${ref.namespace}/${ref.kind}/${ref.name}/${id}`;
}

/** Resolves a variable's value: a URL as it is, a name through GetQueueUrl on this cluster's SQS. */
export async function queueRef(clients: SqsClients, value: string): Promise<QueueRef> {
  if (/^https?:\/\//.test(value)) return { url: value, name: queueNameOf(value), byUrl: true };
  const out = await clients.local().send(new GetQueueUrlCommand({ QueueName: value }));
  if (!out.QueueUrl) throw new Error(`SQS returned no URL for queue ${value}`);
  return { url: out.QueueUrl, name: value, byUrl: false };
}
