// Traffic for the queue-splitting tests: a producer that sends numbered messages with mixed
// attributes to each cluster's original queue, and a stand-in for a cluster's deployed
// consumers that reads whichever queue the Deployment's variable names now (the embedded
// stack runs no containers: this loop plays the pods, following each rollout at once).
import { AppsV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { markPodRunning } from "../../env/clusters/kubelet.js";
import {
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";

export interface Sent {
  id: string;
  tenant: string;
  cluster: string;
  at: number;
}

export interface Received {
  id: string;
  by: string;
  at: number;
}

/** Message attributes of message `n`: tenants cycle so that every filter has matches. */
export function tenantOf(n: number, tenants: readonly string[]): string {
  return tenants[n % tenants.length]!;
}

/** Sends `count` messages in batches of 10 to `queueUrl`, `rate` per second at most. */
export async function produce(
  client: SQSClient,
  queueUrl: string,
  cluster: string,
  from: number,
  count: number,
  tenants: readonly string[],
  rate: number,
  sent: Sent[],
): Promise<void> {
  const started = Date.now();
  for (let i = 0; i < count; i += 10) {
    const batch = Array.from({ length: Math.min(10, count - i) }, (_, k) => from + i + k);
    const entries = batch.map((n) => ({
      Id: String(n),
      MessageBody: JSON.stringify({ n, cluster, order: { tier: n % 3 === 0 ? "gold" : "basic" } }),
      MessageAttributes: {
        tenant: { DataType: "String", StringValue: tenantOf(n, tenants) },
        seq: { DataType: "Number", StringValue: String(n) },
      },
    }));
    const out = await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
    if (out.Failed?.length) throw new Error(`send failed: ${JSON.stringify(out.Failed)}`);
    const at = Date.now();
    for (const n of batch) sent.push({ id: `${cluster}-${n}`, tenant: tenantOf(n, tenants), cluster, at });
    const due = started + ((i + 10) / rate) * 1000;
    if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
  }
}

/** Receives from `queueUrl()` (read before every batch) until `signal` aborts; records and deletes. */
export async function consume(
  client: SQSClient,
  queueUrl: () => string | Promise<string>,
  by: string,
  received: Received[],
  signal: AbortSignal,
): Promise<void> {
  while (!signal.aborted) {
    const url = await queueUrl();
    let out;
    try {
      out = await client.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageAttributeNames: ["All"],
        }),
      );
    } catch (err) {
      // The temporary queue of a finished split is deleted under a consumer that has not
      // followed the rollout yet: a pod would log and retry too.
      if ((err as Error).name === "QueueDoesNotExist" || /does not exist/i.test((err as Error).message)) {
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      throw err;
    }
    const msgs = out.Messages ?? [];
    if (msgs.length === 0) continue;
    const at = Date.now();
    for (const m of msgs) {
      const body = JSON.parse(m.Body!) as { n: number; cluster: string };
      received.push({ id: `${body.cluster}-${body.n}`, by, at });
    }
    await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
      }),
    );
  }
}

/** The value of `variable` in the Deployment's pod template (what its pods read after a rollout). */
export async function templateVariable(
  kc: KubeConfig,
  namespace: string,
  name: string,
  variable: string,
): Promise<{ value: string | undefined; annotations: Record<string, string> }> {
  const d = await kc.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace, name });
  const env = d.spec?.template.spec?.containers.flatMap((c) => c.env ?? []) ?? [];
  return { value: env.find((e) => e.name === variable)?.value, annotations: d.metadata?.annotations ?? {} };
}

/**
 * Plays the kubelet for a workload's rollouts: every new pod matching `selector` is marked
 * Running and Ready (the embedded stack has no node), until `signal` aborts.
 */
export async function keepPodsRunning(
  kc: KubeConfig,
  namespace: string,
  selector: string,
  signal: AbortSignal,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  while (!signal.aborted) {
    try {
      const pods = await core.listNamespacedPod({ namespace, labelSelector: selector });
      for (const p of pods.items)
        if (!p.metadata?.deletionTimestamp && p.status?.phase !== "Running")
          await markPodRunning(kc, namespace, p.metadata!.name!).catch(() => undefined);
    } catch {
      // The API server is busy or restarting: try again.
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
